/**
 * Removing a volume's directories in order (the mount directory, the file beside it, their
 * parent), as the kubelet's removals one after another, never trying to remove a mount point.
 */
import { HostError, isHostError } from '../../errors.js'
import type { Host } from '../../host/host.js'

/**
 * Removes each path in order unless it is a mount point; a missing one is skipped. A mount point
 * ends it with EBUSY, before any remove of it; so does any other failure. The paths after the one
 * it ended at stay: a directory still mounted keeps its parent and the files beside it. One host
 * call where the host has `removeUnmounted`.
 */
export function removeUnmounted(host: Host, paths: readonly string[]): Promise<void> {
  return host.removeUnmounted ? host.removeUnmounted(paths) : removeUnmountedOneByOne(host, paths)
}

/** {@link removeUnmounted} as a mount-point check and a remove per path: two calls each. */
export async function removeUnmountedOneByOne(host: Pick<Host, 'isMountPoint' | 'remove'>, paths: readonly string[]): Promise<void> {
  for (const path of paths) {
    try {
      if (await host.isMountPoint(path)) throw new HostError('EBUSY', 'remove', path, 'a mount point')
      await host.remove(path)
    } catch (err) {
      if (!isHostError(err, 'ENOENT')) throw err
    }
  }
}
