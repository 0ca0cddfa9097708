/**
 * A recursive remove that never crosses into another filesystem (SPEC §8.7: `RemoveAll` on a
 * still-mounted directory deletes volume content). Two checks, both before anything is deleted:
 * the mount table (catches bind mounts of the same filesystem, which st_dev cannot see) and the
 * st_dev of every entry against the root's (catches a mount the table did not show yet). Only then
 * are the entries removed, deepest first, with unlink and rmdir, which the kernel refuses (EBUSY)
 * on a mount point that appeared in between. An empty directory is removed at once with rmdir(2).
 */
import type { FileInfo, MountEntry } from '@kubevol/core'
import { HostError } from '@kubevol/core'
import { joinPath } from '@kubevol/core/host'
import { isPathWithin } from './mountinfo.js'

/** What removeAll needs from the host: its calls, each off the main thread and mapped to HostErrors. */
export interface RemoveAllDeps {
  /** null when missing. */
  readonly lstat: (path: string) => Promise<FileInfo | null>
  readonly readdir: (path: string) => Promise<readonly string[]>
  readonly rmdir: (path: string) => Promise<unknown>
  readonly unlink: (path: string) => Promise<unknown>
  /** `path` with its parent resolved (the last component is not followed). */
  readonly canonical: (path: string) => Promise<string>
  readonly mounts: () => Promise<readonly MountEntry[]>
}

/** Removes `path` and everything below it; EBUSY (and nothing removed) when a mount point is in the tree. */
export async function removeAll(deps: RemoveAllDeps, path: string): Promise<void> {
  const { lstat, readdir, rmdir, unlink } = deps
  // An empty directory (most volume directories at tear-down) goes in one call: rmdir(2) removes
  // nothing but an empty directory and refuses a mount point (EBUSY), so it cannot cross a mount.
  // Anything else (not empty, not a directory, a mount point) takes the checked walk below, which
  // says what is in the way.
  const removed = await rmdir(path).then(
    () => true,
    (err: unknown) => err instanceof HostError && err.code === 'ENOENT',
  )
  if (removed) return
  const root = await lstat(path)
  if (!root) return
  const where = await deps.canonical(path)
  const below = (await deps.mounts()).find((e) => isPathWithin(e.target, where))
  if (below) throw new HostError('EBUSY', 'removeAll', path, `${below.target} is a mount point`)
  if (root.type !== 'directory') {
    await unlink(path)
    return
  }

  // Walk first: collect every entry (directories after their contents) and check its device.
  const order: { path: string; directory: boolean }[] = []
  const walk = async (dir: string): Promise<void> => {
    for (const name of await readdir(dir)) {
      const child = joinPath(dir, name)
      const info = await lstat(child)
      if (!info) throw new HostError('ENOENT', 'lstat', child, 'no such file or directory')
      if (info.dev !== root.dev) throw new HostError('EBUSY', 'removeAll', path, `${child} is on another filesystem (a mount point)`)
      const directory = info.type === 'directory'
      if (directory) await walk(child)
      order.push({ path: child, directory })
    }
  }
  await walk(path)
  for (const entry of order) {
    if (entry.directory) await rmdir(entry.path)
    else await unlink(entry.path)
  }
  await rmdir(path)
}
