/**
 * The ConfigMaps and Secrets this node's pods reference, each watched ({@link ObjectWatch}) from the
 * moment a pod referencing it arrives until no pod references it any more: the kubelet's
 * watch-based managers (`RegisterPod` / `UnregisterPod` with a reference count per object). Reads
 * are served from the watch once it has listed; a change is announced by name.
 */
import { type Clock, type Logger, NotFoundError, type ObjectReference, type Pod, type PodSource } from '@kubevol/core'
import type { KubeClients } from './kube-client.js'
import { ObjectWatch } from './object-watch.js'

export type WatchedResource = 'configmaps' | 'secrets'

export interface ObjectWatchesOptions {
  readonly clients: KubeClients
  /** The pods whose volumes say what to watch. */
  readonly pods: PodSource
  readonly retryMs: number
  /** @default 300000 (see ObjectWatchOptions) */
  readonly minWatchTimeoutMs?: number
  /** How long a read waits for a new watch's first list (the kubelet's: 1 s). @default 1000 */
  readonly syncTimeoutMs?: number
  readonly clock: Clock
  readonly logger: Logger
  readonly onChange: (changed: ObjectReference) => void
  readonly onRestart?: (resource: string, reason: string) => void
}

const KIND: Readonly<Record<WatchedResource, string>> = { configmaps: 'ConfigMap', secrets: 'Secret' }
/** The kubelet's group resource of each manager, in its errors: `failed to sync configmap cache`. */
const SINGULAR: Readonly<Record<WatchedResource, string>> = { configmaps: 'configmap', secrets: 'secret' }

type Volume = {
  configMap?: { name?: string }
  secret?: { secretName?: string }
  projected?: { sources?: readonly { configMap?: { name?: string }; secret?: { name?: string } }[] }
}

const keyOf = (resource: WatchedResource, namespace: string, name: string): string => `${resource}/${namespace}/${name}`

/**
 * The ConfigMaps and Secrets the volumes of a pod read: configMap and secret volumes and projected
 * sources (what the kubelet's managers register for volumes; kubevol runs no containers, so env
 * references are not read).
 */
function referencedObjects(pod: Pod): Set<string> {
  const keys = new Set<string>()
  const namespace = pod.metadata.namespace ?? 'default'
  for (const v of (pod.spec?.volumes ?? []) as readonly Volume[]) {
    if (v.configMap?.name) keys.add(keyOf('configmaps', namespace, v.configMap.name))
    if (v.secret?.secretName) keys.add(keyOf('secrets', namespace, v.secret.secretName))
    for (const s of v.projected?.sources ?? []) {
      if (s.configMap?.name) keys.add(keyOf('configmaps', namespace, s.configMap.name))
      if (s.secret?.name) keys.add(keyOf('secrets', namespace, s.secret.name))
    }
  }
  return keys
}

/** Watches what the pods reference. Nothing runs before `start()`. */
export class ObjectWatches {
  readonly #o: ObjectWatchesOptions
  readonly #watches = new Map<string, ObjectWatch>()
  /** Pod UID → the keys it references. */
  readonly #byPod = new Map<string, ReadonlySet<string>>()
  readonly #counts = new Map<string, number>()
  #unsubscribe: (() => void) | undefined

  constructor(options: ObjectWatchesOptions) {
    this.#o = options
  }

  /** Objects watched now. */
  get size(): number {
    return this.#watches.size
  }

  /** Follows the pod source: watches start and stop as pods come and go. */
  start(): void {
    if (this.#unsubscribe) return
    this.#unsubscribe = this.#o.pods.subscribe((uid) => (uid === undefined ? this.#syncAll() : this.#syncPod(uid)))
    this.#syncAll()
  }

  /** Stops every watch. */
  stop(): void {
    this.#unsubscribe?.()
    this.#unsubscribe = undefined
    for (const uid of [...this.#byPod.keys()]) this.#setPod(uid, new Set())
  }

  /**
   * The object, from its watch, when a pod references it; undefined when none does (the caller
   * reads it otherwise, as the kubelet's CSI plugin reads a driver's secret). Waits up to
   * `syncTimeoutMs` for a new watch's first list; then fails as the kubelet does
   * (`failed to sync configmap cache: timed out waiting for the condition`, the list's own failure as
   * the cause). A missing object is a NotFoundError.
   */
  read<T>(resource: WatchedResource, namespace: string, name: string): Promise<T> | undefined {
    const key = keyOf(resource, namespace, name)
    // A pod the reader has not heard of yet (the populator may hear first): look at the pods again.
    if (this.#unsubscribe && !this.#watches.has(key)) this.#syncAll()
    const watch = this.#watches.get(key)
    if (!watch) return undefined
    return (async () => {
      if (!(await watch.whenSynced(this.#o.syncTimeoutMs ?? 1000))) {
        throw new Error(`failed to sync ${SINGULAR[resource]} cache: timed out waiting for the condition`, { cause: watch.error })
      }
      if (!watch.object) throw new NotFoundError(resource, name)
      return watch.object as T
    })()
  }

  #syncAll(): void {
    const seen = new Set<string>()
    for (const pod of this.#o.pods.getPods()) {
      const uid = pod.metadata.uid
      if (!uid) continue
      seen.add(uid)
      this.#setPod(uid, referencedObjects(pod))
    }
    for (const uid of [...this.#byPod.keys()]) if (!seen.has(uid)) this.#setPod(uid, new Set())
  }

  #syncPod(uid: string): void {
    const pod = this.#o.pods.getPodByUID(uid)
    this.#setPod(uid, pod ? referencedObjects(pod) : new Set())
  }

  /** The pod now references `keys`: watches start for new objects and stop for the last reference gone. */
  #setPod(uid: string, keys: ReadonlySet<string>): void {
    const before = this.#byPod.get(uid) ?? new Set<string>()
    if (keys.size === 0) this.#byPod.delete(uid)
    else this.#byPod.set(uid, keys)
    for (const key of keys) if (!before.has(key)) this.#addReference(key)
    for (const key of before) if (!keys.has(key)) this.#dropReference(key)
  }

  #addReference(key: string): void {
    const count = (this.#counts.get(key) ?? 0) + 1
    this.#counts.set(key, count)
    if (count > 1) return
    const [resource, namespace = '', name = ''] = key.split('/') as [WatchedResource, string, string]
    const o = this.#o
    const watch = new ObjectWatch({
      resource,
      namespace,
      name,
      clients: o.clients,
      retryMs: o.retryMs,
      ...(o.minWatchTimeoutMs !== undefined ? { minWatchTimeoutMs: o.minWatchTimeoutMs } : {}),
      clock: o.clock,
      logger: o.logger,
      onChange: () => o.onChange({ kind: KIND[resource], namespace, name }),
      onRestart: (reason) => o.onRestart?.(resource, reason),
    })
    this.#watches.set(key, watch)
    watch.start()
  }

  #dropReference(key: string): void {
    const count = (this.#counts.get(key) ?? 0) - 1
    if (count > 0) {
      this.#counts.set(key, count)
      return
    }
    this.#counts.delete(key)
    this.#watches.get(key)?.stop()
    this.#watches.delete(key)
  }
}
