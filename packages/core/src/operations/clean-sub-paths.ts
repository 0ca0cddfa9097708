/**
 * Cleaning a volume's subPath binds (`pods/<uid>/volume-subpaths/<volume>/<container>/<index>`), as
 * the kubelet's `doCleanSubPaths` does it: exactly those three levels are walked, each entry by its
 * own type (lstat), so a symlink is unlinked and never followed. An index that is a mount point is
 * unmounted once and checked again; still a mount point (another bind stacked on it), it is refused
 * with an error and nothing below it is ever listed or removed. What is removed is only what a bind
 * leaves behind: empty directories and the empty file a file bind was made on.
 */
import { errorMessage, isHostError } from '../errors.js'
import type { FileInfo, Host } from '../host/host.js'
import { joinPath } from '../paths.js'
import { isCorruptedMountError, unmountMountPoint } from '../plugins/util/cleanup-mount-point.js'

/** How {@link cleanVolumeSubPaths} treats what it finds. */
export interface SubPathCleanupOptions {
  /** Unmount an index that is a mount point (tear-down). Without it a mount point is refused (orphan cleanup). */
  readonly unmount: boolean
  /** Check only: nothing is unmounted or removed. */
  readonly dryRun?: boolean
}

type Entry = FileInfo | 'corrupted' | null

/** lstat, with a broken mount's failure (a dead FUSE daemon, a stale NFS handle) as a value. */
async function entryAt(host: Host, path: string): Promise<Entry> {
  try {
    return await host.lstat(path)
  } catch (err) {
    if (isCorruptedMountError(err)) return 'corrupted'
    throw err
  }
}

async function remove(host: Host, path: string, options: SubPathCleanupOptions): Promise<void> {
  if (options.dryRun) return
  try {
    await host.remove(path)
  } catch (err) {
    if (isHostError(err, 'ENOENT')) return
    throw new Error(`error deleting ${path}: ${errorMessage(err)}`, { cause: err })
  }
}

/** A directory the walk lists: a real directory that is not a mount point (whatever is mounted there is not ours to list). */
async function checkListable(host: Host, path: string, entry: Entry): Promise<void> {
  if (entry === 'corrupted' || (entry?.type === 'directory' && (await mountedOrBroken(host, path)))) {
    throw new Error(`error cleaning subPath mounts: ${path} is a mount point; refusing to look below it`)
  }
  if (entry && entry.type !== 'directory') throw new Error(`error cleaning subPath mounts: ${path} is a ${entry.type}, not a directory`)
}

async function mountedOrBroken(host: Host, path: string): Promise<boolean> {
  try {
    return await host.isMountPoint(path)
  } catch (err) {
    if (isCorruptedMountError(err)) return true
    throw err
  }
}

/** One `<index>` entry: a symlink is unlinked; a mount point unmounted once (or refused); then a plain remove. */
async function cleanIndex(host: Host, path: string, options: SubPathCleanupOptions): Promise<void> {
  const entry = await entryAt(host, path)
  if (entry === null) return
  if (entry !== 'corrupted' && entry.type === 'symlink') return remove(host, path, options)
  if (!options.unmount || options.dryRun) {
    if (entry === 'corrupted' || (await mountedOrBroken(host, path))) throw new Error(`error cleaning subpath mount ${path}: still mounted`)
  } else {
    try {
      if (!(await unmountMountPoint(host, path))) return
    } catch (err) {
      throw new Error(`error cleaning subpath mount ${path}: ${errorMessage(err)}`, { cause: err })
    }
  }
  // An empty directory or the file a file bind was made on; a directory with content fails (ENOTEMPTY).
  await remove(host, path, options)
}

/**
 * Unmounts and removes the subPath binds of one volume under `dir` (`volume-subpaths/<volume>`),
 * then `dir` itself. A missing `dir` is done; a symlink at `dir` or at a container level is
 * unlinked, not followed; a container directory or `dir` that is a mount point is refused.
 */
export async function cleanVolumeSubPaths(host: Host, dir: string, options: SubPathCleanupOptions): Promise<void> {
  const top = await entryAt(host, dir)
  if (top === null) return
  if (top !== 'corrupted' && top.type === 'symlink') return remove(host, dir, options)
  await checkListable(host, dir, top)
  for (const container of await host.readdir(dir)) {
    const containerDir = joinPath(dir, container)
    const entry = await entryAt(host, containerDir)
    if (entry === null) continue
    if (entry !== 'corrupted' && entry.type === 'symlink') {
      await remove(host, containerDir, options)
      continue
    }
    await checkListable(host, containerDir, entry)
    for (const index of await host.readdir(containerDir)) await cleanIndex(host, joinPath(containerDir, index), options)
    await remove(host, containerDir, options)
  }
  await remove(host, dir, options)
}
