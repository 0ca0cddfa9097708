/**
 * The pods of this node as both sources hold them, seen by the manager as one {@link PodSource}.
 *
 * kubevol runs no containers, so a pod's runtime is taken as gone as soon as the pod is terminating
 * (a deletion timestamp, or a terminal phase) or has left its source: its volumes may then be
 * unmounted. A UID no source knows is gone too (nothing runs for it).
 */
import type { Pod, PodSource } from '@kubevol/core'

/** A pod whose containers must stop: marked for deletion, or in a terminal phase. */
function isPodTerminating(pod: Pod): boolean {
  const phase = pod.status?.phase
  return pod.metadata.deletionTimestamp !== undefined && pod.metadata.deletionTimestamp !== null
    ? true
    : phase === 'Succeeded' || phase === 'Failed'
}

/** A {@link PodSource} that sources fill. Reads are synchronous; every change notifies once. */
export interface PodStore extends PodSource {
  /** Adds or replaces a pod (by UID). Returns false when nothing changed. */
  set(pod: Pod): boolean
  /** Removes a pod; its runtime is gone. */
  delete(uid: string): boolean
  /** Replaces every pod with `pods` (a full list), announcing one change. */
  replaceAll(pods: readonly Pod[]): boolean
  /** Every pod of the source has been listed once. */
  setReady(ready: boolean): void
  /** The number of changes so far (for tests and status). */
  readonly version: number
}

/** Two pods are the same version when their resourceVersion (or, without one, their JSON) is. */
function samePod(a: Pod, b: Pod): boolean {
  const ra = a.metadata.resourceVersion
  const rb = b.metadata.resourceVersion
  if (ra !== undefined && rb !== undefined) return ra === rb
  return JSON.stringify(a) === JSON.stringify(b)
}

/** Creates an empty, not-ready pod store. */
export function createPodStore(): PodStore {
  const pods = new Map<string, Pod>()
  const listeners = new Set<(uid?: string) => void>()
  let ready = false
  let list: Pod[] | undefined
  let version = 0
  // With the UID of the one pod that changed, when it is one (the populator then looks at it alone).
  const changed = (uid?: string): void => {
    list = undefined
    version++
    for (const listener of [...listeners]) listener(uid)
  }
  const put = (pod: Pod): boolean => {
    const uid = pod.metadata.uid
    if (!uid) return false
    const old = pods.get(uid)
    if (old && samePod(old, pod)) return false
    pods.set(uid, pod)
    return true
  }
  return {
    get version() {
      return version
    },
    getPods: () => (list ??= [...pods.values()]),
    getPodByUID: (uid) => pods.get(uid),
    shouldPodContainersBeTerminating(uid) {
      const pod = pods.get(uid)
      return !pod || isPodTerminating(pod)
    },
    shouldPodRuntimeBeRemoved(uid) {
      const pod = pods.get(uid)
      return !pod || isPodTerminating(pod)
    },
    allReady: () => ready,
    subscribe(listener) {
      listeners.add(listener)
      return () => listeners.delete(listener)
    },
    set(pod) {
      if (!put(pod)) return false
      changed(pod.metadata.uid)
      return true
    },
    delete(uid) {
      if (!pods.delete(uid)) return false
      changed(uid)
      return true
    },
    replaceAll(next) {
      let any = false
      const keep = new Set<string>()
      for (const pod of next) {
        if (pod.metadata.uid) keep.add(pod.metadata.uid)
        if (put(pod)) any = true
      }
      for (const uid of [...pods.keys()]) {
        if (!keep.has(uid)) {
          pods.delete(uid)
          any = true
        }
      }
      if (any) changed()
      return any
    },
    setReady(value) {
      if (ready === value) return
      ready = value
      changed()
    },
  }
}
