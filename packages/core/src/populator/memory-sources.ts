/**
 * In-memory pod source and object reader: what the agent's API and manifest sources provide, held
 * in maps the embedder changes by hand. Production code, in the main entry: an embedder with no API
 * server and no manifest directory (a browser, a worker, a serverless function) feeds pods and
 * objects through these. Tests use them too (`@kubevol/core/testing` re-exports them).
 */
import type { CSIDriver, ConfigMap, Node, PersistentVolume, PersistentVolumeClaim, Pod, Secret } from '../api/kubernetes.js'
import { NotFoundError } from '../errors.js'
import type { ObjectReader, ObjectReference, PodSource } from './sources.js'

type Listener = (uid?: string) => void

function notify<T>(listeners: Set<(arg?: T) => void>, arg?: T): void {
  for (const listener of listeners) listener(arg)
}

export interface MemoryPodSource extends PodSource {
  /** Adds or replaces a pod (by UID). */
  setPod(pod: Pod): void
  /** The pod is being terminated: containers must not start; its runtime is still there. */
  terminatePod(uid: string): void
  /** The pod's containers are gone: its volumes may be unmounted. */
  markRuntimeRemoved(uid: string): void
  /** Deletes the pod; unless `runtimeRemains`, its runtime is gone too. */
  deletePod(uid: string, options?: { runtimeRemains?: boolean }): void
  /** Whether every source has listed its pods. @default true */
  setReady(ready: boolean): void
}

/**
 * An in-memory {@link PodSource}: pods are added, replaced and deleted by UID with the methods
 * below; every change is announced to subscribers. `initial` pods without a UID are skipped.
 * Ready from the start unless `options.ready` is false (then nothing is unmounted until `setReady(true)`).
 */
export function createMemoryPodSource(initial: readonly Pod[] = [], options: { ready?: boolean } = {}): MemoryPodSource {
  const pods = new Map<string, Pod>()
  const terminating = new Set<string>()
  // Pods whose containers may run: those the source has, and deleted ones whose runtime remains.
  const running = new Set<string>()
  const listeners = new Set<Listener>()
  let ready = options.ready ?? true
  let list: Pod[] | undefined
  for (const pod of initial) {
    if (!pod.metadata.uid) continue
    pods.set(pod.metadata.uid, pod)
    running.add(pod.metadata.uid)
  }
  const changed = (uid?: string): void => {
    list = undefined
    notify(listeners, uid)
  }
  return {
    getPods: () => (list ??= [...pods.values()]),
    getPodByUID: (uid) => pods.get(uid),
    shouldPodContainersBeTerminating: (uid) => terminating.has(uid) || !running.has(uid) || !pods.has(uid),
    shouldPodRuntimeBeRemoved: (uid) => !running.has(uid),
    allReady: () => ready,
    subscribe(listener) {
      listeners.add(listener)
      return () => listeners.delete(listener)
    },
    setPod(pod) {
      const uid = pod.metadata.uid
      if (!uid) throw new Error('a pod needs metadata.uid')
      pods.set(uid, pod)
      terminating.delete(uid)
      running.add(uid)
      changed(uid)
    },
    terminatePod(uid) {
      terminating.add(uid)
      changed(uid)
    },
    markRuntimeRemoved(uid) {
      running.delete(uid)
      changed(uid)
    },
    deletePod(uid, opts) {
      pods.delete(uid)
      if (!opts?.runtimeRemains) running.delete(uid)
      changed(uid)
    },
    setReady(value) {
      ready = value
      changed()
    },
  }
}

/** Any object the memory reader holds. */
export type StoredObject = PersistentVolumeClaim | PersistentVolume | ConfigMap | Secret | CSIDriver | Node

export interface MemoryObjectReader extends ObjectReader {
  /** Stores an object under its kind, namespace and name; announces the change. */
  put(kind: 'PersistentVolumeClaim' | 'PersistentVolume' | 'ConfigMap' | 'Secret' | 'CSIDriver' | 'Node', object: StoredObject): void
  delete(kind: string, namespace: string | undefined, name: string): void
  /** Makes every read fail with `error` until called with undefined. */
  failReads(error: Error | undefined): void
}

/**
 * An in-memory {@link ObjectReader}. Reads return the stored object; absent ones reject with
 * NotFoundError. Every `put` and `delete` is announced with the object's reference.
 */
export function createMemoryObjectReader(): MemoryObjectReader {
  const store = new Map<string, StoredObject>()
  const listeners = new Set<(changed?: ObjectReference) => void>()
  let failure: Error | undefined
  const key = (kind: string, namespace: string | undefined, name: string): string => `${kind}/${namespace ?? ''}/${name}`
  const get = async <T extends StoredObject>(kind: string, namespace: string | undefined, name: string, label: string): Promise<T> => {
    await Promise.resolve()
    if (failure) throw failure
    const object = store.get(key(kind, namespace, name))
    if (!object) throw new NotFoundError(label, name)
    return object as T
  }
  const namespaced = new Set(['PersistentVolumeClaim', 'ConfigMap', 'Secret'])
  return {
    getPersistentVolumeClaim: (ns, name) => get('PersistentVolumeClaim', ns, name, 'persistentvolumeclaims'),
    getPersistentVolume: (name) => get('PersistentVolume', undefined, name, 'persistentvolumes'),
    getConfigMap: (ns, name) => get('ConfigMap', ns, name, 'configmaps'),
    getSecret: (ns, name) => get('Secret', ns, name, 'secrets'),
    getCSIDriver: (name) => get('CSIDriver', undefined, name, 'csidrivers.storage.k8s.io'),
    getNode: (name) => get('Node', undefined, name, 'nodes'),
    announcesChanges: true,
    subscribe(listener) {
      listeners.add(listener)
      return () => listeners.delete(listener)
    },
    put(kind, object) {
      const ns = namespaced.has(kind) ? (object.metadata.namespace ?? 'default') : undefined
      const name = object.metadata.name ?? ''
      store.set(key(kind, ns, name), object)
      notify(listeners, { kind, namespace: ns, name })
    },
    delete(kind, namespace, name) {
      const ns = namespaced.has(kind) ? (namespace ?? 'default') : undefined
      store.delete(key(kind, ns, name))
      notify(listeners, { kind, namespace: ns, name })
    },
    failReads(error) {
      failure = error
    },
    async patchPersistentVolumeClaimStatus(namespace, name, status) {
      const pvc = await get<PersistentVolumeClaim>('PersistentVolumeClaim', namespace, name, 'persistentvolumeclaims')
      const updated = { ...pvc, status: mergePatch(pvc.status ?? {}, status) as PersistentVolumeClaim['status'] }
      store.set(key('PersistentVolumeClaim', namespace, name), updated)
      notify(listeners, { kind: 'PersistentVolumeClaim', namespace, name })
      return updated
    },
  }
}

/** RFC 7386, as the API server applies a merge patch: objects merge key by key, null deletes. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) return patch
  const base: Record<string, unknown> = typeof target === 'object' && target !== null && !Array.isArray(target) ? { ...(target as Record<string, unknown>) } : {}
  for (const [k, value] of Object.entries(patch)) {
    if (value === null) delete base[k]
    else base[k] = mergePatch(base[k], value)
  }
  return base
}
