/**
 * API mode's object reader. The ConfigMaps and Secrets the pods' volumes reference are watched one
 * by one while a pod references them (the kubelet's default change detection strategy, `Watch`;
 * see object-watches.ts), so their changes are announced as they happen; PVCs, PVs, CSIDrivers (and
 * ConfigMaps and Secrets with the `Cache` or `Get` strategy) are read by name (the only reads the
 * Node authorizer allows a node: the objects its pods reference), each kept for a short TTL. Also
 * the status of a claim patched as a node expansion goes (the one write it has), and this node's
 * Node object from a watch (its `status.volumesAttached` holds the device paths of
 * controller-attached volumes).
 */
import type { V1Node } from '@kubernetes/client-node'
import {
  type CSIDriver,
  type Clock,
  type ConfigMap,
  type Logger,
  type Node,
  NotFoundError,
  type ObjectReader,
  type ObjectReference,
  type PersistentVolume,
  type PersistentVolumeClaim,
  type PodSource,
  type Secret,
  systemClock,
  type VolumeAttachment,
} from '@kubevol/core'
import { type Informer, createInformer } from './informer.js'
import { type KubeClients, MERGE_PATCH, apiErrorMessage, statusCodeOf, toPlain } from './kube-client.js'
import { ObjectWatches } from './object-watches.js'

/**
 * How changes of the ConfigMaps and Secrets that volumes read are found: the kubelet's
 * `configMapAndSecretChangeDetectionStrategy`. `Watch`: a watch per referenced object, changes
 * announced as they happen. `Cache`: a read by GET kept for the TTL, changes found when the volume is
 * set up again (every pod sync). `Get`: a GET on every read.
 */
export type ChangeDetectionStrategy = 'Watch' | 'Cache' | 'Get'

export interface ApiObjectReaderOptions {
  readonly clients: KubeClients
  readonly nodeName: string
  /** How long a read by GET is reused; 0 reads every time. */
  readonly ttlMs: number
  /** @default 'Watch' */
  readonly changeDetection?: ChangeDetectionStrategy
  /** The pods whose volumes say which ConfigMaps and Secrets to watch; without it, `Watch` reads as `Cache` does. */
  readonly pods?: PodSource
  /** The shortest server-side timeout of a ConfigMap or Secret watch (each is between it and twice it). @default 300000 */
  readonly minWatchTimeoutMs?: number
  readonly retryMs: number
  readonly logger: Logger
  /** @default systemClock */
  readonly clock?: Clock
  readonly onRestart?: (resource: string, reason: string) => void
}

/** The kinds the reader serves, by API resource. */
const KINDS: Readonly<Record<string, string>> = {
  persistentvolumeclaims: 'PersistentVolumeClaim',
  persistentvolumes: 'PersistentVolume',
  configmaps: 'ConfigMap',
  secrets: 'Secret',
  'csidrivers.storage.k8s.io': 'CSIDriver',
  'volumeattachments.storage.k8s.io': 'VolumeAttachment',
}

/**
 * With the `Watch` strategy (and a pod source) the reader `announcesChanges`: a watched ConfigMap
 * or Secret that changes is announced by name as the event arrives, so the core sets up again only
 * the volumes that read it. Otherwise changes are found by reading again after the TTL, so the reader
 * does not claim `announcesChanges`: volumes built from objects are set up again every pod sync
 * period, and those reads find the changes, which are then announced by name.
 */
export interface ApiObjectReader extends ObjectReader {
  subscribe(listener: (changed?: ObjectReference) => void): () => void
  /** True with the `Watch` strategy and a pod source: changes of the ConfigMaps and Secrets volumes read are announced as they happen. */
  readonly announcesChanges: boolean
  /** The watches of referenced ConfigMaps and Secrets (`Watch` strategy): `start()` follows the pods, `stop()` ends every watch. */
  readonly objectWatches: { start(): void; stop(): void; readonly size: number }
  /** Watches this node's Node object. */
  readonly nodeInformer: Informer
  /**
   * A VolumeAttachment by name (`storage.k8s.io/v1`), for CSI attach; not part of the core's
   * ObjectReader port yet.
   */
  getVolumeAttachment(name: string): Promise<VolumeAttachment>
  /** Forgets every cached read. */
  invalidate(): void
  /** Number of cached reads (for status). */
  readonly cached: number
}

interface Entry {
  readonly at: number
  readonly promise: Promise<unknown>
  /** The resourceVersion seen, to tell a changed object from a re-read one. */
  version?: string
}

/** Reads through a TTL cache; a changed resourceVersion since the last read is announced to the listeners. */
class ReadCache {
  readonly #ttlMs: number
  readonly #clock: Clock
  readonly #cache = new Map<string, Entry>()
  readonly #versions = new Map<string, string>()
  readonly #listeners = new Set<(changed?: ObjectReference) => void>()

  constructor(ttlMs: number, clock: Clock) {
    this.#ttlMs = ttlMs
    this.#clock = clock
  }

  get size(): number {
    return this.#cache.size
  }

  read<T>(resource: string, namespace: string | undefined, name: string, fetch: () => Promise<unknown>, ttlMs = this.#ttlMs): Promise<T> {
    const key = `${resource}/${namespace ?? ''}/${name}`
    const changed: ObjectReference = { kind: KINDS[resource] ?? resource, namespace, name }
    const now = this.#clock.now()
    const hit = this.#cache.get(key)
    if (hit && now - hit.at < ttlMs) return hit.promise as Promise<T>
    const promise = fetch().then(
      (value) => {
        const plain = toPlain<{ metadata?: { resourceVersion?: string } }>(value)
        const version = plain.metadata?.resourceVersion ?? ''
        const before = this.#versions.get(key)
        this.#versions.set(key, version)
        if (before !== undefined && before !== version) queueMicrotask(() => this.notify(changed))
        return plain
      },
      (err: unknown) => {
        // Failures are not kept: the next read asks again.
        this.#cache.delete(key)
        if (statusCodeOf(err) === 404) {
          if (this.#versions.delete(key)) queueMicrotask(() => this.notify(changed))
          throw new NotFoundError(resource, name, { cause: err })
        }
        throw new Error(`reading ${resource} ${namespace ? `${namespace}/` : ''}${name}: ${apiErrorMessage(err)}`, { cause: err })
      },
    )
    if (ttlMs > 0) this.#cache.set(key, { at: now, promise })
    return promise as Promise<T>
  }

  /** What a write answered: the cached read goes, and its version is the one seen. */
  wrote(key: string, version: string): void {
    this.#cache.delete(key)
    this.#versions.set(key, version)
  }

  clear(): void {
    this.#cache.clear()
  }

  subscribe(listener: (changed?: ObjectReference) => void): () => boolean {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  notify(changed: ObjectReference): void {
    for (const listener of [...this.#listeners]) listener(changed)
  }
}

/** This node's Node from a watch (`metadata.name=<node>`): `current()` is the last copy seen. */
function watchNode(options: ApiObjectReaderOptions): { readonly informer: Informer; current(): Node | undefined } {
  const { clients, nodeName } = options
  let node: Node | undefined
  const nodeSelector = `metadata.name=${nodeName}`
  const informer = createInformer<V1Node>({
    resource: 'nodes',
    path: '/api/v1/nodes',
    watch: clients.watch,
    list: () => clients.core.listNode({ fieldSelector: nodeSelector }),
    fieldSelector: nodeSelector,
    retryMs: options.retryMs,
    logger: options.logger,
    onList(items) {
      node = items.find((n) => n.metadata?.name === nodeName) as Node | undefined
    },
    onUpsert(object) {
      if (object.metadata?.name === nodeName) node = object as Node
    },
    onDelete(object) {
      if (object.metadata?.name === nodeName) node = undefined
    },
    onRestart: (reason) => options.onRestart?.('nodes', reason),
  })
  return { informer, current: () => node }
}

/** Creates the reader; `nodeInformer.start()` begins watching the node. */
export function createApiObjectReader(options: ApiObjectReaderOptions): ApiObjectReader {
  const { clients, nodeName } = options
  const cache = new ReadCache(options.ttlMs, options.clock ?? systemClock)
  const read = <T>(resource: string, namespace: string | undefined, name: string, fetch: () => Promise<unknown>): Promise<T> => cache.read<T>(resource, namespace, name, fetch)
  const watched = watchNode(options)
  const nodeInformer = watched.informer
  const { core, storage } = clients
  const strategy = options.changeDetection ?? 'Watch'
  const watches =
    strategy === 'Watch' && options.pods
      ? new ObjectWatches({
          clients,
          pods: options.pods,
          retryMs: options.retryMs,
          ...(options.minWatchTimeoutMs !== undefined ? { minWatchTimeoutMs: options.minWatchTimeoutMs } : {}),
          clock: options.clock ?? systemClock,
          logger: options.logger,
          onChange: (changed) => cache.notify(changed),
          ...(options.onRestart ? { onRestart: options.onRestart } : {}),
        })
      : undefined
  // A ConfigMap or Secret: from its watch when a pod references it; else by GET (for `Get`, every time).
  const readVolumeObject = <T>(resource: 'configmaps' | 'secrets', namespace: string, name: string, fetch: () => Promise<unknown>): Promise<T> =>
    watches?.read<T>(resource, namespace, name) ?? cache.read<T>(resource, namespace, name, fetch, strategy === 'Get' ? 0 : options.ttlMs)
  return {
    nodeInformer,
    announcesChanges: watches !== undefined,
    objectWatches: {
      start: () => watches?.start(),
      stop: () => watches?.stop(),
      get size() {
        return watches?.size ?? 0
      },
    },
    get cached() {
      return cache.size
    },
    getPersistentVolumeClaim: (namespace, name) =>
      read<PersistentVolumeClaim>('persistentvolumeclaims', namespace, name, () => core.readNamespacedPersistentVolumeClaim({ namespace, name })),
    getPersistentVolume: (name) => read<PersistentVolume>('persistentvolumes', undefined, name, () => core.readPersistentVolume({ name })),
    getConfigMap: (namespace, name) => readVolumeObject<ConfigMap>('configmaps', namespace, name, () => core.readNamespacedConfigMap({ namespace, name })),
    getSecret: (namespace, name) => readVolumeObject<Secret>('secrets', namespace, name, () => core.readNamespacedSecret({ namespace, name })),
    getCSIDriver: (name) => read<CSIDriver>('csidrivers.storage.k8s.io', undefined, name, () => storage.readCSIDriver({ name })),
    getVolumeAttachment: (name) =>
      read<VolumeAttachment>('volumeattachments.storage.k8s.io', undefined, name, () => storage.readVolumeAttachment({ name })),
    async getNode(name) {
      // The watched copy is current to the last event; before the first list, ask the server.
      const node = watched.current()
      if (name === nodeName && node && nodeInformer.synced()) return node
      try {
        return toPlain<Node>(await core.readNode({ name }))
      } catch (err) {
        if (statusCodeOf(err) === 404) throw new NotFoundError('nodes', name, { cause: err })
        throw new Error(`reading node ${name}: ${apiErrorMessage(err)}`, { cause: err })
      }
    },
    // The progress of a node expansion, as the kubelet writes it (the Node authorizer lets a node
    // patch the status of its pods' claims). The answer is the claim now: later reads start from it.
    async patchPersistentVolumeClaimStatus(namespace, name, status) {
      let updated: PersistentVolumeClaim
      try {
        updated = toPlain<PersistentVolumeClaim>(await core.patchNamespacedPersistentVolumeClaimStatus({ namespace, name, body: { status } }, MERGE_PATCH))
      } catch (err) {
        throw new Error(`patching the status of persistentvolumeclaims ${namespace}/${name}: ${apiErrorMessage(err)}`, { cause: err })
      }
      cache.wrote(`persistentvolumeclaims/${namespace}/${name}`, updated.metadata.resourceVersion ?? '')
      return updated
    },
    subscribe: (listener) => cache.subscribe(listener),
    invalidate() {
      cache.clear()
    },
  }
}
