/**
 * One ConfigMap or Secret watched by name, as the kubelet's watch-based manager watches each object
 * its pods reference (its default change detection strategy, `Watch`): a list with
 * `fieldSelector=metadata.name=<name>` in the namespace (the single-object list and watch the Node
 * authorizer allows a node), then a watch from the list's resourceVersion with bookmarks and a
 * server-side timeout of 5 to 10 minutes (client-go's reflector). A watch the server ends is started
 * again from the last resourceVersion seen, without a list: so an object that does not change costs
 * one request per timeout. 410 Expired lists again at once; any other failure lists again after a
 * delay that doubles up to `maxRetryMs`.
 */
import { type Clock, type Logger, errorMessage } from '@kubevol/core'
import { type KubeClients, apiErrorMessage, statusCodeOf, toPlain } from './kube-client.js'

/** What the watch keeps of an object. */
export interface WatchedObject {
  readonly metadata?: { readonly resourceVersion?: string; readonly name?: string }
}

export interface ObjectWatchOptions {
  readonly resource: 'configmaps' | 'secrets'
  readonly namespace: string
  readonly name: string
  readonly clients: KubeClients
  /** First delay before a failed list or watch is tried again. */
  readonly retryMs: number
  /** @default 30000 */
  readonly maxRetryMs?: number
  /** The shortest server-side timeout asked of a watch; each is drawn between it and twice it. @default 300000 (client-go's) */
  readonly minWatchTimeoutMs?: number
  readonly clock: Clock
  readonly logger: Logger
  /** The object changed (modified, created or deleted) after the first list. */
  readonly onChange: () => void
  /** A list or watch failed, or a watch expired (`forbidden`, `http-<code>`, `error`, `expired`). */
  readonly onRestart?: (reason: string) => void
}

/** The end of one watch connection. */
type WatchEnd = 'closed' | 'expired'

const is410 = (value: unknown): boolean => (value as { code?: unknown } | null | undefined)?.code === 410

/** A single-object reflector. Nothing runs before `start()`; `stop()` ends it for good. */
export class ObjectWatch {
  readonly #o: ObjectWatchOptions
  #object: WatchedObject | undefined
  #resourceVersion = ''
  #synced = false
  #error: unknown
  readonly #stop = new AbortController()
  #connection: AbortController | undefined
  #syncWaiters = new Set<() => void>()

  constructor(options: ObjectWatchOptions) {
    this.#o = options
  }

  /** A list has succeeded: `object` is the server's copy as of the last event. */
  get synced(): boolean {
    return this.#synced
  }

  /** The object, or undefined when it does not exist (once synced). */
  get object(): WatchedObject | undefined {
    return this.#object
  }

  /** The last failure of a list or watch, until a list succeeds. */
  get error(): unknown {
    return this.#error
  }

  start(): void {
    void this.#run()
  }

  stop(): void {
    this.#stop.abort(new Error('stopped'))
    this.#connection?.abort()
    for (const wake of this.#syncWaiters) wake()
  }

  /** Resolves true once synced, false if `timeoutMs` passes (or the watch stops) first. */
  whenSynced(timeoutMs: number): Promise<boolean> {
    if (this.#synced) return Promise.resolve(true)
    return new Promise<boolean>((resolve) => {
      const wake = (): void => {
        timer.cancel()
        this.#syncWaiters.delete(wake)
        resolve(this.#synced)
      }
      const timer = this.#o.clock.setTimer(timeoutMs, wake)
      this.#syncWaiters.add(wake)
    })
  }

  async #run(): Promise<void> {
    const o = this.#o
    let attempt = 0
    while (!this.#stop.signal.aborted) {
      try {
        // The delay resets only once a watch has run its course: a list that succeeds before a
        // watch that keeps failing must not make the retries come at the first delay forever.
        await this.#list()
        // Watch until the history we resume from is gone (410): then list again. An immutable object
        // cannot change any more (only go): as the kubelet, stop watching it.
        while (!this.#stop.signal.aborted && !this.#immutable() && (await this.#watchOnce()) === 'closed') attempt = 0
        if (this.#stop.signal.aborted || this.#immutable()) return
        o.logger.info(`Watch of ${o.resource} ${o.namespace}/${o.name} expired; listing again`, { resource: o.resource, resourceVersion: this.#resourceVersion })
        o.onRestart?.('expired')
      } catch (err) {
        if (this.#stop.signal.aborted) return
        this.#error = err
        const code = statusCodeOf(err)
        const delay = Math.min(o.retryMs * 2 ** attempt, o.maxRetryMs ?? 30_000)
        attempt++
        o.onRestart?.(code === 403 ? 'forbidden' : code !== undefined ? `http-${code}` : 'error')
        o.logger.warn(`List/watch of ${o.resource} ${o.namespace}/${o.name} failed; restarting`, { err: err instanceof Error ? apiErrorMessage(err) : errorMessage(err), retryInMs: delay })
        await o.clock.sleep(delay, this.#stop.signal).catch(() => undefined)
      }
    }
  }

  #immutable(): boolean {
    return (this.#object as { immutable?: unknown } | undefined)?.immutable === true
  }

  async #list(): Promise<void> {
    const { clients, resource, namespace, name } = this.#o
    const request = { namespace, fieldSelector: `metadata.name=${name}` }
    const list = resource === 'configmaps' ? await clients.core.listNamespacedConfigMap(request) : await clients.core.listNamespacedSecret(request)
    const plain = toPlain<{ items: WatchedObject[]; metadata?: { resourceVersion?: string } }>(list)
    this.#resourceVersion = plain.metadata?.resourceVersion ?? ''
    this.#set(plain.items.find((item) => item.metadata?.name === name))
    this.#synced = true
    this.#error = undefined
    for (const wake of [...this.#syncWaiters]) wake()
  }

  /** The object as it is now; a change after the first list is announced. */
  #set(object: WatchedObject | undefined): void {
    const before = this.#object?.metadata?.resourceVersion
    this.#object = object
    if (this.#synced && before !== object?.metadata?.resourceVersion) this.#o.onChange()
  }

  /** One watch connection, from the last resourceVersion; resolves when the server ends it, rejects on failure. */
  async #watchOnce(): Promise<WatchEnd> {
    const { clients, resource, namespace, name, clock } = this.#o
    const minMs = this.#o.minWatchTimeoutMs ?? 300_000
    const timeoutSeconds = Math.max(1, Math.round((minMs + Math.random() * minMs) / 1000))
    const startedAt = clock.now()
    let end = 'closed' as WatchEnd
    let failure: unknown
    let events = 0
    await new Promise<void>((resolve) => {
      const onEvent = (type: string, object: unknown): void => {
        events++
        if (type === 'ERROR') {
          if (is410(object)) end = 'expired'
          else failure = Object.assign(new Error(errorMessage((object as { message?: unknown })?.message ?? 'watch error')), { code: (object as { code?: unknown })?.code })
          return
        }
        const plain = object as WatchedObject
        const rv = plain.metadata?.resourceVersion
        if (rv) this.#resourceVersion = rv
        if (type === 'ADDED' || type === 'MODIFIED') this.#set(plain)
        else if (type === 'DELETED') this.#set(undefined)
      }
      const query = { fieldSelector: `metadata.name=${name}`, resourceVersion: this.#resourceVersion, allowWatchBookmarks: true, timeoutSeconds }
      clients.watch
        .watch(`/api/v1/namespaces/${namespace}/${resource}`, query, onEvent, (err: unknown) => {
          if (err && !this.#stop.signal.aborted) failure = err
          resolve()
        })
        .then((connection) => {
          this.#connection = connection
          if (this.#stop.signal.aborted) connection.abort()
        }, (err: unknown) => {
          failure = err
          resolve()
        })
    })
    this.#connection = undefined
    if (failure !== undefined && end !== 'expired') throw failure
    // A watch the server ends at once with nothing in it is a failure in disguise: do not spin.
    if (end === 'closed' && events === 0 && clock.now() - startedAt < 1000 && !this.#stop.signal.aborted) throw new Error('the watch ended at once')
    return end
  }
}
