/**
 * Removing a volume's directories in order (the mount directory, the file beside it, their
 * parent), as the kubelet's removals one after another, never trying to remove a mount point.
 */
import { HostError, isHostError } from '../../errors.js'
import type { Host, RemoveUnmountedOptions } from '../../host/host.js'
import { isCorruptedMountError } from './cleanup-mount-point.js'

/** The calls that look at a path before its remove: their failing as a broken mount's does means a mount point is there. */
const CHECKS: ReadonlySet<string> = new Set(['statx', 'stat', 'lstat', 'isMountPoint'])

/** A broken mount found by a check (a dead FUSE daemon, a stale NFS handle) is a mount point: EBUSY, never removed. */
function asMountPoint(err: unknown): unknown {
  if (isCorruptedMountError(err) && err instanceof HostError && CHECKS.has(err.syscall)) {
    return new HostError('EBUSY', 'remove', err.path, `a mount point whose filesystem does not answer (a corrupted mount: ${err.message})`, { cause: err })
  }
  return err
}

/**
 * Removes each path in order unless it is a mount point; a missing one is skipped. A mount point
 * (a corrupted one included) ends it with EBUSY, before any remove of it; so does any other
 * failure. The paths after the one it ended at stay: a directory still mounted keeps its parent
 * and the files beside it. One host call where the host has `removeUnmounted`.
 */
export async function removeUnmounted(host: Host, paths: readonly string[], options?: RemoveUnmountedOptions): Promise<void> {
  try {
    await (host.removeUnmounted ? host.removeUnmounted(paths, options) : removeUnmountedOneByOne(host, paths, options))
  } catch (err) {
    throw asMountPoint(err)
  }
}

/** A mount point, a corrupted one included (its check fails as a broken mount's does). */
async function mountedOrBroken(host: Pick<Host, 'isMountPoint'>, path: string): Promise<boolean> {
  try {
    return await host.isMountPoint(path)
  } catch (err) {
    if (isCorruptedMountError(err)) return true
    throw err
  }
}

/**
 * {@link removeUnmounted} as a mount-point check and a remove per path: two calls each. With
 * `unmountLast`, a mount point at the last path (a corrupted one included) is unmounted and
 * checked again before its remove.
 */
export async function removeUnmountedOneByOne(host: Pick<Host, 'isMountPoint' | 'remove' | 'unmount'>, paths: readonly string[], options?: RemoveUnmountedOptions): Promise<void> {
  for (const [i, path] of paths.entries()) {
    const last = options?.unmountLast === true && i === paths.length - 1
    try {
      if (last ? await mountedOrBroken(host, path) : await host.isMountPoint(path)) {
        if (!last) throw new HostError('EBUSY', 'remove', path, 'a mount point')
        await host.unmount(path).catch((err: unknown) => {
          // Unmounted by someone else since the check.
          if (!isHostError(err, 'EINVAL')) throw err
        })
        if (await mountedOrBroken(host, path)) throw new HostError('EBUSY', 'remove', path, 'a mount point')
      }
      await host.remove(path)
    } catch (err) {
      if (!isHostError(err, 'ENOENT')) throw asMountPoint(err)
    }
  }
}
