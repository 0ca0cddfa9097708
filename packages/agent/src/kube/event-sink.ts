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

const namespaceOf = (e: StoredEvent): string => e.involvedObject.namespace ?? 'default'

/** The core/v1 Event of a stored event, as the kubelet's recorder makes it. */
function eventBody(e: StoredEvent, name: string, nodeName: string): CoreV1Event {
  return {
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
  }
}

/** One post: a new event is created, a repeat patches the one created, one gone meanwhile is created again. */
class EventPoster {
  readonly #o: EventSinkOptions
  readonly #posted = new Map<number, Posted>()
  #seq = 0

  constructor(options: EventSinkOptions) {
    this.#o = options
  }

  async post(e: StoredEvent): Promise<void> {
    const known = this.#posted.get(e.id)
    if (!known) return this.#create(e)
    try {
      await this.#o.clients.core.patchNamespacedEvent(
        { namespace: known.namespace, name: known.name, body: { count: e.count, lastTimestamp: new Date(e.lastTimestamp).toISOString() } },
        MERGE_PATCH,
      )
      this.#o.onPost?.('patched')
    } catch (err) {
      if (statusCodeOf(err) !== 404) throw err
      this.#posted.delete(e.id)
      await this.#create(e)
    }
  }

  async #create(e: StoredEvent): Promise<void> {
    const { nodeName } = this.#o
    // The kubelet's name: the object's name and the time in hex nanoseconds (unique per process).
    const nanos = BigInt(e.firstTimestamp) * 1_000_000n + BigInt(this.#seq++ % 1_000_000)
    const name = `${e.involvedObject.name || nodeName}.${nanos.toString(16)}`
    await this.#o.clients.core.createNamespacedEvent({ namespace: namespaceOf(e), body: eventBody(e, name, nodeName) })
    this.#posted.set(e.id, { namespace: namespaceOf(e), name })
    this.#o.onPost?.('created')
  }
}

/** Creates the sink; `start()` subscribes to the store. */
export function createEventSink(options: EventSinkOptions): EventSink {
  const { store, logger } = options
  const maxTries = options.maxTries ?? 3
  const retryMs = options.retryMs ?? 250
  const poster = new EventPoster(options)
  const queue = new Map<number, StoredEvent>()
  let unsubscribe: (() => void) | undefined
  let draining: Promise<void> | undefined
  let stopped = true

  const drain = async (): Promise<void> => {
    while (queue.size > 0) {
      const [id, event] = queue.entries().next().value as [number, StoredEvent]
      queue.delete(id)
      for (let attempt = 1; ; attempt++) {
        try {
          await poster.post(event)
          break
        } catch (err) {
          if (attempt >= maxTries || stopped) {
            options.onPost?.('error')
            logger.warn('Could not post event; it is kept in memory only', { reason: event.reason, object: event.involvedObject.name, err: apiErrorMessage(err) })
            break
          }
          const delay = retryMs * 2 ** (attempt - 1)
          logger.warn('Could not post event; retrying', { reason: event.reason, object: event.involvedObject.name, err: apiErrorMessage(err), retryInMs: delay })
          await new Promise((resolve) => setTimeout(resolve, delay))
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
