/**
 * Path resolution, the way the kernel walks a path: component by component from the root mount,
 * crossing onto the topmost mount at each mount point, following symlinks in intermediate components
 * (and in the last one when asked), at most 40 of them (ELOOP). A relative symlink target continues
 * from the link's directory; `..` at a mount's root climbs to the mount point first.
 */
import { HostError } from '@kubevol/core'
import type { Mount, MountTable } from './mount-table.js'
import type { DirNode, Inode } from './nodes.js'

/** Linux's MAXSYMLINKS. */
export const maxSymlinks = 40

/** A node as seen through a mount. */
export interface Location {
  readonly mount: Mount
  readonly node: Inode
}

/** A directory as seen through a mount. */
export interface DirLocation {
  readonly mount: Mount
  readonly node: DirNode
}

/** The result of resolving a path. */
export interface Lookup {
  /** The directory holding the last component; null when the path ends at `/`, `.` or `..`. */
  readonly parent: DirLocation | null
  /** The last component's name in `parent`. */
  readonly name: string
  /** The node linked as `name` in `parent` (before crossing a mount on it); null when missing. */
  readonly entry: Inode | null
  /** Where the path leads, after crossing mounts (and the last symlink when following); null when missing. */
  readonly found: Location | null
}

/** How to resolve. */
export interface LookupOptions {
  /** Follow a symlink in the last component. */
  readonly follow: boolean
  /** The syscall named in errors. */
  readonly syscall: string
}

/** The topmost mount over `loc`, or `loc` itself. */
export function crossMounts(table: MountTable, loc: Location): Location {
  let current = loc
  for (let over = table.covering(current.mount, current.node); over; over = table.covering(current.mount, current.node)) {
    current = { mount: over, node: over.root }
  }
  return current
}

function up(loc: Location): Location {
  let current = loc
  while (current.node === current.mount.root && current.mount.parent && current.mount.mountpoint) {
    current = { mount: current.mount.parent, node: current.mount.mountpoint }
  }
  if (current.node === current.mount.root) return current
  return { mount: current.mount, node: current.node.parent ?? current.node }
}

function components(path: string): string[] {
  return path.split('/').filter((part) => part !== '')
}

/**
 * Resolves `path`. Fails with EINVAL for a relative path, ENOENT when an intermediate component is
 * missing, ENOTDIR when one is not a directory, ELOOP after {@link maxSymlinks} links. A missing last
 * component is not an error: `entry` and `found` are null and `parent`/`name` say where it would be.
 */
export function lookup(table: MountTable, path: string, options: LookupOptions): Lookup {
  if (!path.startsWith('/')) throw new HostError('EINVAL', options.syscall, path, 'path is not absolute')
  const root = crossMounts(table, { mount: table.root, node: table.root.root })
  let current = root
  let pending = components(path)
  let links = 0
  let index = 0
  while (index < pending.length) {
    const name = pending[index++] as string
    const isLast = index === pending.length
    if (current.node.type !== 'directory') throw new HostError('ENOTDIR', options.syscall, path, 'not a directory')
    if (name === '.') continue
    if (name === '..') {
      current = up(current)
      continue
    }
    const dir = current as DirLocation
    const child = dir.node.children.get(name)
    if (!child) {
      if (isLast) return { parent: dir, name, entry: null, found: null }
      throw new HostError('ENOENT', options.syscall, path, 'no such file or directory')
    }
    if (child.type === 'symlink' && (!isLast || options.follow)) {
      if (++links > maxSymlinks) throw new HostError('ELOOP', options.syscall, path, 'too many levels of symbolic links')
      pending = [...components(child.target), ...pending.slice(index)]
      index = 0
      if (child.target.startsWith('/')) current = root
      continue
    }
    const found = crossMounts(table, { mount: dir.mount, node: child })
    if (isLast) return { parent: dir, name, entry: child, found }
    current = found
  }
  return { parent: null, name: '', entry: current.node, found: current }
}

/** Resolves `path` and fails with ENOENT when it does not exist. */
export function lookupExisting(table: MountTable, path: string, options: LookupOptions): Lookup & { found: Location } {
  const result = lookup(table, path, options)
  if (!result.found) throw new HostError('ENOENT', options.syscall, path, 'no such file or directory')
  return result as Lookup & { found: Location }
}
