/**
 * A recursive remove that never crosses into another filesystem (SPEC §8.7: `RemoveAll` on a
 * still-mounted directory deletes volume content). Two checks, both before anything is deleted:
 * the mount table (catches bind mounts of the same filesystem, which st_dev cannot see) and the
 * st_dev of every entry against the root's (catches a mount the table did not show yet). Only then
 * are the entries removed, deepest first, with unlink and rmdir, which the kernel refuses (EBUSY)
 * on a mount point that appeared in between. An empty directory is removed at once with rmdir(2).
 */
import type { Stats } from 'node:fs'
import { lstat, readdir, rmdir, unlink } from 'node:fs/promises'
import { HostError, joinPath } from '@kubevol/core'
import type { MountEntry } from '@kubevol/core'
import { isPathWithin } from './mountinfo.js'
import type { Sys } from './sys.js'

/** What removeAll needs from the host. */
export interface RemoveAllDeps {
  readonly sys: Sys
  /** `path` with its parent resolved (the last component is not followed). */
  readonly canonical: (path: string) => Promise<string>
  readonly mounts: () => Promise<readonly MountEntry[]>
}

/** Removes `path` and everything below it; EBUSY (and nothing removed) when a mount point is in the tree. */
export async function removeAll({ sys, canonical, mounts }: RemoveAllDeps, path: string): Promise<void> {
  // An empty directory (most volume directories at tear-down) goes in one call: rmdir(2) removes
  // nothing but an empty directory and refuses a mount point (EBUSY), so it cannot cross a mount.
  // Anything else (not empty, not a directory, a mount point) takes the checked walk below, which
  // says what is in the way.
  const removed = await sys.fs('rmdir', path, () => rmdir(path)).then(
    () => true,
    (err: unknown) => err instanceof HostError && err.code === 'ENOENT',
  )
  if (removed) return
  const root = await sys.fs('lstat', path, () => lstat(path)).catch((err: unknown) => {
    if (err instanceof HostError && err.code === 'ENOENT') return null
    throw err
  })
  if (!root) return
  const where = await canonical(path)
  const below = (await mounts()).find((e) => isPathWithin(e.target, where))
  if (below) throw new HostError('EBUSY', 'removeAll', path, `${below.target} is a mount point`)
  if (!root.isDirectory()) {
    await sys.fs('unlink', path, () => unlink(path))
    return
  }

  // Walk first: collect every entry (directories after their contents) and check its device.
  const order: { path: string; directory: boolean }[] = []
  const walk = async (dir: string): Promise<void> => {
    for (const name of await sys.fs('readdir', dir, () => readdir(dir))) {
      const child = joinPath(dir, name)
      const info: Stats = await sys.fs('lstat', child, () => lstat(child))
      if (info.dev !== root.dev) throw new HostError('EBUSY', 'removeAll', path, `${child} is on another filesystem (a mount point)`)
      if (info.isDirectory()) await walk(child)
      order.push({ path: child, directory: info.isDirectory() })
    }
  }
  await walk(path)
  for (const entry of order) {
    if (entry.directory) await sys.fs('rmdir', entry.path, () => rmdir(entry.path))
    else await sys.fs('unlink', entry.path, () => unlink(entry.path))
  }
  await sys.fs('rmdir', path, () => rmdir(path))
}
