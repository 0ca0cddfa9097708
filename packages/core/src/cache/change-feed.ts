/**
 * Tells subscribers which volumes changed. Both caches use it, so the reconciler can look at only
 * what changed since its last pass instead of scanning every volume.
 */
import type { UniqueVolumeName } from '../api/names.js'

export type VolumeChangeListener = (volumeName: UniqueVolumeName) => void

export class ChangeFeed {
  readonly #listeners = new Set<VolumeChangeListener>()

  /** Calls `listener` with the volume name after every change; returns the unsubscribe function. */
  subscribe(listener: VolumeChangeListener): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  emit(volumeName: UniqueVolumeName): void {
    for (const listener of this.#listeners) listener(volumeName)
  }
}
