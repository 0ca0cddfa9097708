/**
 * Unmounts and removes a pod's mount point (mount-utils `CleanupMountPoint`, SPEC §8.4). The
 * directory is removed with a plain remove, which fails on a non-empty directory: content that
 * is still there after the unmount is never deleted.
 */
import { isHostError } from '../../errors.js'
import type { Host } from '../../host/host.js'

/** Idempotent: a missing path is done. Throws when the path is still mounted after one unmount. */
export async function cleanupMountPoint(host: Host, path: string): Promise<void> {
  if (!(await host.lstat(path))) return
  if (await host.isMountPoint(path)) {
    await host.unmount(path)
    if (await host.isMountPoint(path)) throw new Error(`failed to cleanup mount point ${path}: still mounted after unmount`)
  }
  try {
    await host.remove(path)
  } catch (err) {
    if (!isHostError(err, 'ENOENT')) throw err
  }
}

/** The mount points other than `path` that show the same filesystem at the same root (bind references). */
export async function mountReferences(host: Host, path: string): Promise<string[]> {
  const mounts = await host.mounts()
  const own = mounts.findLast((m) => m.target === path)
  if (!own) return []
  return mounts.filter((m) => m.target !== path && m.device === own.device && m.root === own.root).map((m) => m.target)
}
