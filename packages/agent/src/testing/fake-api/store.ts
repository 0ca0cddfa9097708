/**
 * The fake API server's storage: objects by resource, namespace and name, one global resourceVersion
 * that every write advances, and a bounded history of changes that watches replay from a
 * resourceVersion (older than the history: 410 Expired). Writes announce themselves to open watches.
 */
import { randomUUID } from 'node:crypto'
import { alreadyExists, conflict, notFound } from './status.js'

/** One kind of object the fake serves. */
export interface ResourceInfo {
  readonly plural: string
  readonly kind: string
  /** '' for the core group. */
  readonly group: string
  readonly version: string
  readonly namespaced: boolean
  /** Has a `status` subresource: the main resource ignores status, `/status` ignores the rest. */
  readonly hasStatus: boolean
}

const resource = (plural: string, kind: string, group: string, namespaced: boolean, hasStatus = false): ResourceInfo => ({
  plural,
  kind,
  group,
  version: 'v1',
  namespaced,
  hasStatus,
})

/** The resources the fake serves. */
export const RESOURCES: readonly ResourceInfo[] = [
  resource('pods', 'Pod', '', true, true),
  resource('nodes', 'Node', '', false, true),
  resource('persistentvolumeclaims', 'PersistentVolumeClaim', '', true, true),
  resource('persistentvolumes', 'PersistentVolume', '', false, true),
  resource('configmaps', 'ConfigMap', '', true),
  resource('secrets', 'Secret', '', true),
  resource('serviceaccounts', 'ServiceAccount', '', true),
  resource('events', 'Event', '', true),
  resource('csidrivers', 'CSIDriver', 'storage.k8s.io', false),
  resource('csinodes', 'CSINode', 'storage.k8s.io', false),
  resource('volumeattachments', 'VolumeAttachment', 'storage.k8s.io', false, true),
]

/** The resource named by its plural (`pods`) or kind (`Pod`). */
export function resourceOf(name: string): ResourceInfo {
  const info = RESOURCES.find((r) => r.plural === name || r.kind === name)
  if (!info) throw new Error(`the fake API server does not serve ${name}`)
  return info
}

/** Any stored object: plain JSON. */
export type KubeObject = Record<string, unknown> & { metadata: ObjectMetadata }

export interface ObjectMetadata {
  name?: string
  generateName?: string
  namespace?: string
  uid?: string
  resourceVersion?: string
  creationTimestamp?: string
  deletionTimestamp?: string
  deletionGracePeriodSeconds?: number
  labels?: Record<string, string>
  annotations?: Record<string, string>
  [other: string]: unknown
}

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED'

/** One change, as watches replay it. */
export interface Change {
  readonly rv: number
  readonly type: WatchEventType
  readonly resource: ResourceInfo
  /** The object after the change (for DELETED: as it was, with the deletion's resourceVersion). */
  readonly object: KubeObject
  /** The object before the change (for a selector a change makes it leave). */
  readonly previous?: KubeObject
}

export type ChangeListener = (change: Change) => void

const clone = <T>(value: T): T => structuredClone(value)

/** The apiVersion of a resource: `v1` or `storage.k8s.io/v1`. */
export function apiVersionOf(info: ResourceInfo): string {
  return info.group ? `${info.group}/${info.version}` : info.version
}

/** The object with kind and apiVersion, as single reads and watch events carry them. */
export function withTypeMeta(info: ResourceInfo, object: KubeObject): KubeObject {
  return { apiVersion: apiVersionOf(info), kind: info.kind, ...object }
}

/** The object without kind and apiVersion, as list items come. */
export function withoutTypeMeta(object: KubeObject): KubeObject {
  const { apiVersion: _a, kind: _k, ...rest } = object
  return rest as KubeObject
}

export class FakeStore {
  #rv: number
  /** Changes with rv > #compactedRV are kept. */
  #compactedRV: number
  readonly #objects = new Map<string, KubeObject>()
  readonly #history: Change[] = []
  readonly #listeners = new Set<ChangeListener>()
  /** Listeners of one object only (a single-object watch), by key: the fan-out of a change stays small however many there are. */
  readonly #objectListeners = new Map<string, Set<ChangeListener>>()
  readonly #maxHistory: number
  readonly #now: () => number

  constructor(options: { readonly startRV?: number; readonly maxHistory?: number; readonly now?: () => number } = {}) {
    this.#rv = options.startRV ?? 100
    this.#compactedRV = this.#rv
    this.#maxHistory = options.maxHistory ?? 10_000
    this.#now = options.now ?? Date.now
  }

  /** The current resourceVersion. */
  get resourceVersion(): number {
    return this.#rv
  }

  /** The oldest resourceVersion a watch can still start from. */
  get compactedResourceVersion(): number {
    return this.#compactedRV
  }

  /** Forgets the history: a watch from an older resourceVersion gets 410 Expired. */
  compact(): void {
    this.#history.length = 0
    this.#compactedRV = this.#rv
  }

  /** Calls `listener` with every change, or only with the changes of one object. */
  subscribe(listener: ChangeListener, only?: { readonly resource: ResourceInfo; readonly namespace?: string; readonly name: string }): () => void {
    if (!only) {
      this.#listeners.add(listener)
      return () => this.#listeners.delete(listener)
    }
    const key = this.#key(only.resource, only.namespace, only.name)
    let set = this.#objectListeners.get(key)
    if (!set) {
      set = new Set()
      this.#objectListeners.set(key, set)
    }
    set.add(listener)
    return () => {
      set.delete(listener)
      if (set.size === 0 && this.#objectListeners.get(key) === set) this.#objectListeners.delete(key)
    }
  }

  /** Changes after `rv` (which must not be older than the compacted resourceVersion). */
  changesSince(rv: number): Change[] {
    // The history is in resourceVersion order: find the first change after `rv` by bisection, since
    // every watch that resumes asks (a fleet of single-object watches asks thousands of times).
    let lo = 0
    let hi = this.#history.length
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if ((this.#history[mid] as Change).rv > rv) hi = mid
      else lo = mid + 1
    }
    return this.#history.slice(lo)
  }

  #key(info: ResourceInfo, namespace: string | undefined, name: string): string {
    return `${info.plural}/${info.namespaced ? (namespace ?? 'default') : ''}/${name}`
  }

  get(info: ResourceInfo, namespace: string | undefined, name: string): KubeObject | undefined {
    const object = this.#objects.get(this.#key(info, namespace, name))
    return object ? clone(object) : undefined
  }

  /** Objects of a resource, in one namespace or all, sorted by namespace and name. */
  list(info: ResourceInfo, namespace?: string): KubeObject[] {
    const prefix = `${info.plural}/${namespace && info.namespaced ? namespace : ''}`
    return [...this.#objects.entries()]
      .filter(([key]) => (namespace && info.namespaced ? key.startsWith(`${prefix}/`) : key.startsWith(`${info.plural}/`)))
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, object]) => clone(object))
  }

  /**
   * The stored objects of a resource, not copied: for readers inside the fake (the authorizer's
   * graph) that only look. Nothing given out may be changed.
   */
  *objects(info: ResourceInfo): Iterable<Readonly<KubeObject>> {
    const prefix = `${info.plural}/`
    for (const [key, object] of this.#objects) if (key.startsWith(prefix)) yield object
  }

  #record(type: WatchEventType, info: ResourceInfo, object: KubeObject, previous?: KubeObject): void {
    const change: Change = { rv: this.#rv, type, resource: info, object: clone(object), ...(previous ? { previous: clone(previous) } : {}) }
    this.#history.push(change)
    if (this.#history.length > this.#maxHistory) {
      const dropped = this.#history.splice(0, this.#history.length - this.#maxHistory)
      this.#compactedRV = (dropped[dropped.length - 1] as Change).rv
    }
    for (const listener of [...this.#listeners]) listener(change)
    const key = this.#key(info, object.metadata.namespace, object.metadata.name ?? '')
    for (const listener of [...(this.#objectListeners.get(key) ?? [])]) listener(change)
  }

  /** Creates an object; fills uid, resourceVersion, creationTimestamp, namespace and a generated name. */
  create(info: ResourceInfo, input: KubeObject, namespace?: string): KubeObject {
    const object = clone(input)
    const meta: ObjectMetadata = { ...object.metadata }
    if (info.namespaced) meta.namespace = namespace ?? meta.namespace ?? 'default'
    else delete meta.namespace
    if (!meta.name && meta.generateName) meta.name = `${meta.generateName}${randomUUID().replace(/-/g, '').slice(0, 5)}`
    const name = meta.name
    if (!name) throw new Error('metadata.name or metadata.generateName is required')
    const key = this.#key(info, meta.namespace, name)
    if (this.#objects.has(key)) throw alreadyExists(info.plural, name, info.group)
    this.#rv++
    meta.uid = meta.uid ?? randomUUID()
    meta.resourceVersion = String(this.#rv)
    meta.creationTimestamp = new Date(this.#now()).toISOString().replace(/\.\d{3}Z$/, 'Z')
    const stored = withoutTypeMeta({ ...object, metadata: meta })
    this.#objects.set(key, stored)
    this.#record('ADDED', info, stored)
    return clone(stored)
  }

  /**
   * Replaces an object. A resourceVersion in the new object must be the current one (409 Conflict
   * otherwise), as on PUT.
   */
  update(info: ResourceInfo, input: KubeObject): KubeObject {
    const meta = input.metadata
    const name = meta.name ?? ''
    const key = this.#key(info, meta.namespace, name)
    const current = this.#objects.get(key)
    if (!current) throw notFound(info.plural, name, info.group)
    if (meta.resourceVersion !== undefined && meta.resourceVersion !== current.metadata.resourceVersion) throw conflict(info.plural, name)
    this.#rv++
    const stored = withoutTypeMeta({
      ...clone(input),
      metadata: { ...clone(meta), uid: current.metadata.uid, creationTimestamp: current.metadata.creationTimestamp, namespace: current.metadata.namespace, resourceVersion: String(this.#rv) },
    })
    if (!info.namespaced) delete stored.metadata.namespace
    this.#objects.set(key, stored)
    this.#record('MODIFIED', info, stored, current)
    return clone(stored)
  }

  /** Deletes an object now. */
  delete(info: ResourceInfo, namespace: string | undefined, name: string): KubeObject {
    const key = this.#key(info, namespace, name)
    const current = this.#objects.get(key)
    if (!current) throw notFound(info.plural, name, info.group)
    this.#objects.delete(key)
    this.#rv++
    const gone = { ...current, metadata: { ...current.metadata, resourceVersion: String(this.#rv) } }
    this.#record('DELETED', info, gone, current)
    return clone(gone)
  }
}
