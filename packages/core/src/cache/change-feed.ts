/**
 * Tells subscribers which volumes changed. Both caches use it, so the reconciler can look at only
 * what changed since its last pass instead of scanning every volume.
 */
import type { UniquePodName, UniqueVolumeName } from '../api/names.js'

/**
 * Called with the volume that changed and, when the change concerned one pod's use of it (mounted,
 * unmounted, added to or removed from the pod), that pod; without a pod, any pod of the volume may
 * be affected.
 */
export type VolumeChangeListener = (volumeName: UniqueVolumeName, podName?: UniquePodName) => void

export class ChangeFeed {
  readonly #listeners = new Set<VolumeChangeListener>()

  /** Calls `listener` with the volume name after every change; returns the unsubscribe function. */
  subscribe(listener: VolumeChangeListener): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  emit(volumeName: UniqueVolumeName, podName?: UniquePodName): void {
    for (const listener of this.#listeners) listener(volumeName, podName)
  }
}
