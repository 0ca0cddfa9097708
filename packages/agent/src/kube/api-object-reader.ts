/**
 * API mode's object reader: PVCs, PVs, ConfigMaps, Secrets and CSIDrivers read by name (the only
 * reads the Node authorizer allows a node: the objects its pods reference), each kept for a short
 * TTL; the status of a claim patched as a node expansion goes (the one write it has); and this node's Node object from a watch (its `status.volumesAttached` holds the device paths
 * of controller-attached volumes).
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
  type Secret,
  systemClock,
  type VolumeAttachment,
} from '@kubevol/core'
import { type Informer, createInformer } from './informer.js'
import { type KubeClients, MERGE_PATCH, apiErrorMessage, statusCodeOf, toPlain } from './kube-client.js'

export interface ApiObjectReaderOptions {
  readonly clients: KubeClients
  readonly nodeName: string
  /** How long a read is reused; 0 reads every time. */
  readonly ttlMs: number
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
 * Changes are found by reading again after the TTL, not announced by the server, so the reader
 * does not claim `announcesChanges`: volumes built from objects are set up again every pod sync
 * period, and those reads find the changes, which are then announced by name.
 */
export interface ApiObjectReader extends ObjectReader {
  subscribe(listener: (changed?: ObjectReference) => void): () => void
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

  read<T>(resource: string, namespace: string | undefined, name: string, fetch: () => Promise<unknown>): Promise<T> {
    const key = `${resource}/${namespace ?? ''}/${name}`
    const changed: ObjectReference = { kind: KINDS[resource] ?? resource, namespace, name }
    const now = this.#clock.now()
    const hit = this.#cache.get(key)
    if (hit && now - hit.at < this.#ttlMs) return hit.promise as Promise<T>
    const promise = fetch().then(
      (value) => {
        const plain = toPlain<{ metadata?: { resourceVersion?: string } }>(value)
        const version = plain.metadata?.resourceVersion ?? ''
        const before = this.#versions.get(key)
        this.#versions.set(key, version)
        if (before !== undefined && before !== version) queueMicrotask(() => this.#notify(changed))
        return plain
      },
      (err: unknown) => {
        // Failures are not kept: the next read asks again.
        this.#cache.delete(key)
        if (statusCodeOf(err) === 404) {
          if (this.#versions.delete(key)) queueMicrotask(() => this.#notify(changed))
          throw new NotFoundError(resource, name, { cause: err })
        }
        throw new Error(`reading ${resource} ${namespace ? `${namespace}/` : ''}${name}: ${apiErrorMessage(err)}`, { cause: err })
      },
    )
    if (this.#ttlMs > 0) this.#cache.set(key, { at: now, promise })
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

  #notify(changed: ObjectReference): void {
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
  return {
    nodeInformer,
    get cached() {
      return cache.size
    },
    getPersistentVolumeClaim: (namespace, name) =>
      read<PersistentVolumeClaim>('persistentvolumeclaims', namespace, name, () => core.readNamespacedPersistentVolumeClaim({ namespace, name })),
    getPersistentVolume: (name) => read<PersistentVolume>('persistentvolumes', undefined, name, () => core.readPersistentVolume({ name })),
    getConfigMap: (namespace, name) => read<ConfigMap>('configmaps', namespace, name, () => core.readNamespacedConfigMap({ namespace, name })),
    getSecret: (namespace, name) => read<Secret>('secrets', namespace, name, () => core.readNamespacedSecret({ namespace, name })),
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
