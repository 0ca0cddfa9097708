/**
 * A list+watch of one resource that keeps going: client-node's `ListWatch` (which, unlike
 * `makeInformer`, keeps the field selector a node identity needs), restarted after every error with
 * a doubling delay. A 410 Expired (an ERROR event in the stream, or an HTTP 410) makes ListWatch
 * list again from scratch; a list or watch that fails otherwise stops it, which is why this exists.
 * ListWatch relists after a 410 silently, so the watch it is given is wrapped to notice the 410: the
 * relist is logged (resource, the expired resourceVersion) and counted as a restart (`expired`).
 *
 * ListWatch leaves promises no one awaits: the handlers it gives the watch are async, and it starts
 * the next watch from inside the last one's `done` callback. A watch whose request cannot be made (a
 * credential that fails, as the node's does before its certificate) or a handler that throws would
 * reject one of them, which Node treats as a crash. The watch it is given is wrapped so that every
 * such failure becomes an `error` like a failed list: logged, counted and retried.
 */
import { ListWatch, type Watch } from '@kubernetes/client-node'
import type { KubernetesObject } from '@kubernetes/client-node'
import { type Logger, errorMessage } from '@kubevol/core'
import { apiErrorMessage, statusCodeOf, toPlain } from './kube-client.js'

export interface InformerOptions<T extends KubernetesObject> {
  /** For logs and metrics: `pods`, `nodes`. */
  readonly resource: string
  /** The collection path: `/api/v1/pods`. */
  readonly path: string
  readonly watch: Watch
  /** The list call, with the same field selector. */
  readonly list: () => Promise<{ items: T[]; metadata?: { resourceVersion?: string } }>
  readonly fieldSelector?: string
  /** First delay before a restart; doubles up to `maxRetryMs`. */
  readonly retryMs: number
  /** @default 30000 */
  readonly maxRetryMs?: number
  readonly logger: Logger
  /** Every full list (plain JSON items), before its items are announced one by one. */
  onList(items: T[]): void
  onUpsert(object: T): void
  onDelete(object: T): void
  /** A restart was scheduled (for metrics): `error`, `forbidden`, `expired` (a relist after 410), ... */
  onRestart?(reason: string): void
}

export interface Informer {
  /** Lists and starts watching. Resolves once the first list was tried (it may have failed: see `synced`). */
  start(): Promise<void>
  stop(): Promise<void>
  /** A list has succeeded since start. */
  synced(): boolean
}

const is410 = (value: unknown): boolean => {
  const v = value as { code?: unknown; statusCode?: unknown } | null | undefined
  return v?.code === 410 || v?.statusCode === 410
}

/**
 * `watch` as ListWatch needs it: telling `onExpired` the resourceVersion of a watch refused with 410
 * Expired (an ERROR event or the end), and never leaving a rejection unhandled. A watch that cannot
 * be started ends through `done` with its error (after ListWatch has taken the returned controller);
 * a handler of ListWatch's that rejects is passed to `onFailure`.
 */
function guarded(inner: Watch, onExpired: (resourceVersion: string) => void, onFailure: (err: unknown) => void): Watch {
  const watch: Watch = Object.create(inner)
  const settle = (result: unknown): void => {
    if (result instanceof Promise) result.catch(onFailure)
  }
  watch.watch = async (path, query, callback, done) => {
    let ended = false
    const end = (err: unknown): void => {
      if (ended) return
      ended = true
      if (is410(err)) onExpired(String(query.resourceVersion ?? ''))
      try {
        settle((done as (err: unknown) => unknown)(err))
      } catch (thrown) {
        onFailure(thrown)
      }
    }
    const onEvent = (phase: string, object: unknown, raw: unknown): void => {
      if (phase === 'ERROR' && is410(object)) onExpired(String(query.resourceVersion ?? ''))
      try {
        settle((callback as (phase: string, object: unknown, raw: unknown) => unknown)(phase, object, raw))
      } catch (thrown) {
        onFailure(thrown)
      }
    }
    try {
      return await inner.watch(path, query, onEvent, end)
    } catch (err) {
      // Not even sent: end it as a failed watch once ListWatch holds the controller returned here.
      const controller = new AbortController()
      setImmediate(() => end(err))
      return controller
    }
  }
  return watch
}

/** Creates a self-restarting list+watch. Nothing runs before `start()`. */
export function createInformer<T extends KubernetesObject>(options: InformerOptions<T>): Informer {
  const { logger, resource } = options
  const maxRetryMs = options.maxRetryMs ?? 30_000
  let stopped = true
  let synced = false
  let attempt = 0
  let timer: NodeJS.Timeout | undefined

  /** The resourceVersion a watch was refused with 410 Expired, until the relist it causes. */
  let expired: string | undefined
  // Set below, once the ListWatch it restarts exists.
  let failed: (err: unknown) => void = () => {}
  const watch = guarded(
    options.watch,
    (resourceVersion) => (expired = resourceVersion),
    (err) => failed(err),
  )

  const listFn = async () => {
    if (expired !== undefined && !stopped) {
      logger.info(`Watch of ${resource} expired; listing again`, { resource, resourceVersion: expired })
      options.onRestart?.('expired')
      expired = undefined
    }
    const list = await options.list()
    const items = list.items.map((item) => toPlain<T>(item))
    synced = true
    attempt = 0
    options.onList(items)
    return { ...list, items }
  }
  const lw = new ListWatch<T>(options.path, watch, listFn, false, undefined, options.fieldSelector)
  const seen = (object: T): void => {
    attempt = 0
    options.onUpsert(object)
  }
  lw.on('add', seen)
  lw.on('update', seen)
  lw.on('delete', (object) => options.onDelete(object))
  failed = (err: unknown) => {
    if (stopped) return
    const code = statusCodeOf(err)
    const delay = Math.min(options.retryMs * 2 ** attempt, maxRetryMs)
    attempt++
    const reason = code === 403 ? 'forbidden' : code !== undefined ? `http-${code}` : 'error'
    logger.warn(`List/watch of ${resource} failed; restarting`, { resource, err: err instanceof Error ? apiErrorMessage(err) : errorMessage(err), retryInMs: delay })
    options.onRestart?.(reason)
    if (timer) clearTimeout(timer)
    timer = setTimeout(() => {
      timer = undefined
      if (!stopped) lw.start().catch(failed)
    }, delay)
    timer.unref?.()
  }
  lw.on('error', (err?: unknown) => failed(err))
  lw.on('connect', () => logger.debug(`Watching ${resource}`, { resource, resourceVersion: lw.latestResourceVersion() }))

  return {
    async start() {
      stopped = false
      await lw.start()
    },
    async stop() {
      stopped = true
      if (timer) clearTimeout(timer)
      timer = undefined
      await lw.stop()
    },
    synced: () => synced,
  }
}
