/**
 * Posts the event store's events to the API as core/v1 Events, as the kubelet's recorder does: a new
 * event is created (named `<object>.<hex nanoseconds>`), a repeat patches the count and last time of
 * the one created (merge patch), one that disappeared meanwhile is created again. Posting is
 * serialized, retried a few times, and never blocks the manager; what cannot be posted is logged and
 * dropped (it stays in memory).
 */
import type { CoreV1Event } from '@kubernetes/client-node'
import { type Logger, errorMessage } from '@kubevol/core'
import type { EventStore, StoredEvent } from '../events/event-store.js'
import { type KubeClients, MERGE_PATCH, apiErrorMessage, statusCodeOf } from './kube-client.js'

export interface EventSinkOptions {
  readonly clients: KubeClients
  readonly nodeName: string
  readonly store: EventStore
  readonly logger: Logger
  /** Tries per event. @default 3 */
  readonly maxTries?: number
  /** Delay before the second try; doubles. @default 250 */
  readonly retryMs?: number
  readonly onPost?: (result: 'created' | 'patched' | 'error') => void
}

export interface EventSink {
  start(): void
  stop(): void
  /** Resolves when every queued event was posted or dropped. */
  flush(): Promise<void>
}

interface Posted {
  readonly namespace: string
  readonly name: string
}

/** Creates the sink; `start()` subscribes to the store. */
export function createEventSink(options: EventSinkOptions): EventSink {
  const { clients, nodeName, store, logger } = options
  const maxTries = options.maxTries ?? 3
  const retryMs = options.retryMs ?? 250
  const posted = new Map<number, Posted>()
  const queue = new Map<number, StoredEvent>()
  let unsubscribe: (() => void) | undefined
  let draining: Promise<void> | undefined
  let stopped = true
  let seq = 0

  const namespaceOf = (e: StoredEvent): string => e.involvedObject.namespace ?? 'default'

  const bodyOf = (e: StoredEvent, name: string): CoreV1Event => ({
    metadata: { name, namespace: namespaceOf(e) },
    involvedObject: {
      apiVersion: 'v1',
      kind: e.involvedObject.kind,
      name: e.involvedObject.name,
      ...(e.involvedObject.kind === 'Pod' ? { namespace: namespaceOf(e) } : {}),
      ...(e.involvedObject.uid ? { uid: e.involvedObject.uid } : {}),
    },
    reason: e.reason,
    message: e.message,
    type: e.type,
    count: e.count,
    firstTimestamp: new Date(e.firstTimestamp),
    lastTimestamp: new Date(e.lastTimestamp),
    source: { component: 'kubevol', host: nodeName },
    reportingComponent: 'kubevol',
    reportingInstance: nodeName,
  })

  const create = async (e: StoredEvent): Promise<void> => {
    // The kubelet's name: the object's name and the time in hex nanoseconds (unique per process).
    const nanos = BigInt(e.firstTimestamp) * 1_000_000n + BigInt(seq++ % 1_000_000)
    const name = `${e.involvedObject.name || nodeName}.${nanos.toString(16)}`
    await clients.core.createNamespacedEvent({ namespace: namespaceOf(e), body: bodyOf(e, name) })
    posted.set(e.id, { namespace: namespaceOf(e), name })
    options.onPost?.('created')
  }

  const post = async (e: StoredEvent): Promise<void> => {
    const known = posted.get(e.id)
    if (!known) return create(e)
    try {
      await clients.core.patchNamespacedEvent(
        { namespace: known.namespace, name: known.name, body: { count: e.count, lastTimestamp: new Date(e.lastTimestamp).toISOString() } },
        MERGE_PATCH,
      )
      options.onPost?.('patched')
    } catch (err) {
      if (statusCodeOf(err) !== 404) throw err
      posted.delete(e.id)
      await create(e)
    }
  }

  const drain = async (): Promise<void> => {
    while (queue.size > 0) {
      const [id, event] = queue.entries().next().value as [number, StoredEvent]
      queue.delete(id)
      for (let attempt = 1; ; attempt++) {
        try {
          await post(event)
          break
        } catch (err) {
          if (attempt >= maxTries || stopped) {
            options.onPost?.('error')
            logger.warn('Could not post event; it is kept in memory only', { reason: event.reason, object: event.involvedObject.name, err: apiErrorMessage(err) })
            break
          }
          await new Promise((resolve) => setTimeout(resolve, retryMs * 2 ** (attempt - 1)))
        }
      }
    }
  }

  const kick = (): void => {
    if (draining) return
    draining = drain()
      .catch((err: unknown) => logger.error('Event posting failed', { err: errorMessage(err) }))
      .finally(() => {
        draining = undefined
        if (queue.size > 0 && !stopped) kick()
      })
  }

  return {
    start() {
      stopped = false
      unsubscribe = store.subscribe((event) => {
        queue.set(event.id, event)
        kick()
      })
    },
    stop() {
      stopped = true
      unsubscribe?.()
    },
    async flush() {
      while (draining) await draining
    },
  }
}
