/**
 * The operations that take names away: rename, remove and removeAll. None of them ever touches a
 * mount point (EBUSY), and removeAll never crosses into another filesystem: it looks at the whole
 * subtree first and deletes only when no mount point is in it.
 */
import { HostError, isHostError } from '@kubevol/core'
import type { HostState } from './host-state.js'
import { assertWritable, recordViolation } from './host-state.js'
import type { Lookup } from './lookup.js'
import { lookup } from './lookup.js'
import { isWithin, subtree } from './nodes.js'

/** rename(2): atomic; replaces a file, a symlink or an empty directory at `to`. */
export function rename(state: HostState, from: string, to: string): void {
  const src = lookup(state, from, { follow: false, syscall: 'rename' })
  if (!src.entry) throw new HostError('ENOENT', 'rename', from, 'no such file or directory')
  const dst = lookup(state, to, { follow: false, syscall: 'rename' })
  if (!src.parent || !dst.parent) throw new HostError('EBUSY', 'rename', from, 'device or resource busy')
  // The kernel checks the mount first: across mounts is EXDEV even for a mount point.
  if (src.parent.mount !== dst.parent.mount) throw new HostError('EXDEV', 'rename', from, `cannot move to ${to}: cross-device link`)
  for (const [node, path] of [[src.entry, from], [dst.entry, to]] as const) {
    if (node && state.table.isMountpoint(node)) {
      recordViolation(state, 'rename-mount-point', path, `rename ${from} -> ${to} touches the mount point ${path}`)
      throw new HostError('EBUSY', 'rename', path, 'device or resource busy')
    }
  }
  assertWritable(src.parent.mount, 'rename', from)
  const node = src.entry
  const replaced = dst.entry
  if (node === replaced) return
  if (node.type === 'directory') {
    if (replaced && replaced.type !== 'directory') throw new HostError('ENOTDIR', 'rename', to, 'not a directory')
    if (replaced?.type === 'directory' && replaced.children.size > 0) throw new HostError('ENOTEMPTY', 'rename', to, 'directory not empty')
    if (isWithin(dst.parent.node, node)) throw new HostError('EINVAL', 'rename', to, 'cannot move a directory into itself')
  } else if (replaced?.type === 'directory') {
    throw new HostError('EISDIR', 'rename', to, 'is a directory')
  }
  const fs = node.fs
  if (replaced) {
    fs.unlink(replaced)
    fs.release(replaced)
  }
  fs.unlink(node)
  fs.link(dst.parent.node, dst.name, node)
}

/** unlink(2) or rmdir(2): a file, a symlink (not its target) or an empty directory. */
export function remove(state: HostState, path: string): void {
  removeOne(state, path, true)
}

/**
 * `removeUnmounted`: each path removed in order, a missing one skipped; a mount point ends it with
 * EBUSY as a check before the remove, so it is not a breach. Given `unmountLast`, a mount point at
 * the last path is unmounted with it once first (a failure ends it with the unmount's error).
 */
export function removeUnmounted(state: HostState, paths: readonly string[], unmountLast?: (path: string) => void): void {
  for (const [i, path] of paths.entries()) {
    try {
      removeOne(state, path, false)
    } catch (err) {
      if (unmountLast && i === paths.length - 1 && isHostError(err, 'EBUSY')) {
        // A mount point: unmounted once, then removed, or EBUSY again for one stacked below.
        unmountLast(path)
        removeOne(state, path, false)
        continue
      }
      if (!isHostError(err, 'ENOENT')) throw err
    }
  }
}

function removeOne(state: HostState, path: string, breach: boolean): void {
  const result = lookup(state, path, { follow: false, syscall: 'unlink' })
  const syscall = result.entry?.type === 'directory' ? 'rmdir' : 'unlink'
  if (!result.entry) throw new HostError('ENOENT', syscall, path, 'no such file or directory')
  if (!result.parent) throw new HostError('EBUSY', syscall, path, 'device or resource busy')
  if (state.table.isMountpoint(result.entry)) {
    if (breach) recordViolation(state, 'remove-mount-point', path, `remove of ${path}, which is a mount point`)
    throw new HostError('EBUSY', syscall, path, 'device or resource busy')
  }
  assertWritable(result.parent.mount, syscall, path)
  if (result.entry.type === 'directory' && result.entry.children.size > 0) {
    throw new HostError('ENOTEMPTY', syscall, path, 'directory not empty')
  }
  result.entry.fs.unlink(result.entry)
  result.entry.fs.release(result.entry)
}

/**
 * `rm -rf` on one filesystem: a missing `path` is not an error; a mount point at or below `path`
 * fails the whole call with EBUSY before anything is deleted.
 */
export function removeAll(state: HostState, path: string): void {
  let result: Lookup
  try {
    result = lookup(state, path, { follow: false, syscall: 'unlinkat' })
  } catch (err) {
    if (isHostError(err, 'ENOENT')) return
    throw err
  }
  const { entry, parent } = result
  if (!entry) return
  if (!parent) throw new HostError('EBUSY', 'rmdir', path, 'device or resource busy')
  const mountpoint = subtree(entry).find((node) => state.table.isMountpoint(node))
  if (mountpoint) {
    const where = state.table.pathOf(parent.mount, mountpoint)
    recordViolation(state, 'remove-all-across-mount', where, `removeAll ${path} reaches the mount point ${where}`)
    throw new HostError('EBUSY', 'rmdir', where, `device or resource busy: ${path} holds a mount point`)
  }
  assertWritable(parent.mount, 'unlinkat', path)
  entry.fs.unlink(entry)
  entry.fs.release(entry)
}
