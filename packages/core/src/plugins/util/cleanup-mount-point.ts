/**
 * Unmounts and removes a pod's mount point (mount-utils `CleanupMountPoint`, SPEC §8.4). The
 * directory is removed with a plain remove, which fails on a non-empty directory: content that
 * is still there after the unmount is never deleted. A mount whose filesystem no longer answers
 * (a dead FUSE daemon, a stale NFS handle) is unmounted without looking at it first, as the
 * kubelet does for a "corrupted mount": otherwise its tear-down would fail forever.
 */
import { errorMessage, isHostError } from '../../errors.js'
import type { Host } from '../../host/host.js'

/**
 * True for the errors of a mount point whose filesystem no longer answers (mount-utils
 * `IsCorruptedMnt`: ENOTCONN, ESTALE, EIO, EACCES, EHOSTDOWN, ENODEV). The Host port folds
 * ENOTCONN, ESTALE and EHOSTDOWN onto EIO (the kernel's name stays in the message).
 */
export function isCorruptedMountError(err: unknown): boolean {
  return isHostError(err, 'EIO', 'EACCES', 'ENODEV')
}

/**
 * What is at `path` for a tear-down: `missing`, `mounted`, `not-mounted`, or `corrupted` (its
 * check failed as a broken mount's does: treat it as mounted). Other failures are thrown. One
 * call: the Host's check answers a mount point from the mount table without touching it.
 */
async function mountStateOf(host: Host, path: string): Promise<'missing' | 'mounted' | 'not-mounted' | 'corrupted'> {
  try {
    return (await host.isMountPoint(path)) ? 'mounted' : 'not-mounted'
  } catch (err) {
    if (isHostError(err, 'ENOENT')) return 'missing'
    if (isCorruptedMountError(err)) return 'corrupted'
    throw err
  }
}

/** The error of a tear-down that unmounted `path` once and found it still a mount point. */
export function stillMounted(path: string): Error {
  return new Error(`failed to cleanup mount point ${path}: still mounted after unmount (another mount is stacked on it); nothing below it is removed`)
}

/** The error of a tear-down whose unmount of `path` failed (a busy mount). */
export function unmountFailed(path: string, err: unknown, corrupted = false): Error {
  return new Error(`failed to unmount path ${path}${corrupted ? ' (a corrupted mount)' : ''}: ${errorMessage(err)}`, { cause: err })
}

/**
 * Unmounts `path` once when it is a mount point (a corrupted one included) and checks that it is
 * no longer one. Returns false when `path` does not exist. Throws, having removed nothing, when
 * it is still a mount point after the unmount (another mount stacked on it): what is below is
 * never looked into. A symlink at `path` is never followed (the unmount does not follow it).
 * `recheck: false` leaves the check after the unmount to the caller's next step. `mounted: true`
 * is a caller's word that its own call has just found a mount point there (a remove that refused
 * it): the unmount is made without a check first, and the check is made after all if the unmount
 * finds nothing mounted (EINVAL).
 */
export async function unmountMountPoint(host: Host, path: string, options: { readonly recheck?: boolean; readonly mounted?: boolean } = {}): Promise<boolean> {
  const state = options.mounted ? 'mounted' : await mountStateOf(host, path)
  if (state === 'missing') return false
  if (state === 'not-mounted') return true
  try {
    await host.unmount(path)
  } catch (err) {
    // Unmounted by someone else since the caller's call found it mounted: look now.
    if (options.mounted && isHostError(err, 'EINVAL')) return unmountMountPoint(host, path, { ...options, mounted: false })
    // The check follows a symlink at `path`, the unmount does not: a link to a mount point is
    // not one, and it is the link that is removed.
    if (isHostError(err, 'EINVAL') && (await host.lstat(path))?.type === 'symlink') return true
    throw unmountFailed(path, err, state === 'corrupted')
  }
  // A caller whose next step refuses a mount point by itself (a remove that never crosses a
  // mount) skips the check: that step says it.
  if (options.recheck === false) return true
  const after = await mountStateOf(host, path)
  if (after === 'mounted' || after === 'corrupted') {
    throw stillMounted(path)
  }
  return after !== 'missing'
}

/** Idempotent: a missing path is done. Throws when the path is still mounted after one unmount. */
export async function cleanupMountPoint(host: Host, path: string): Promise<void> {
  if (!(await unmountMountPoint(host, path))) return
  try {
    await host.remove(path)
  } catch (err) {
    if (!isHostError(err, 'ENOENT')) throw err
  }
}

/**
 * The other mount points that show what is at `path` (mount-utils `GetMountRefs`): binds of it,
 * whether `path` is a mount point or a directory inside a mounted filesystem (see
 * {@link Host.mountReferences}).
 */
export async function mountReferences(host: Host, path: string): Promise<string[]> {
  return [...(await host.mountReferences(path))]
}

