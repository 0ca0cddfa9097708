/**
 * Path resolution, the way the kernel walks a path: component by component from the root mount,
 * crossing onto the topmost mount at each mount point, following symlinks in intermediate components
 * (and in the last one when asked), at most 40 of them (ELOOP). A relative symlink target continues
 * from the link's directory; `..` at a mount's root climbs to the mount point first.
 *
 * Once a root is locked (see {@link LockedRoot}), a path strictly beneath it is walked as the Linux
 * host's `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` from the root's descriptor: from the
 * directory the lock found, following no symlink at any level beneath it (ELOOP), `..` never above it
 * (EXDEV); mount points are crossed as usual.
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
interface DirLocation {
  readonly mount: Mount
  readonly node: DirNode
}

/**
 * The root a lock made the host's root: the path it was locked as (normalized), and the directory
 * that path led to when it was locked (symlinks on the way followed once, then): the descriptor the
 * Linux host holds.
 */
export interface LockedRoot {
  readonly path: string
  readonly mount: Mount
  readonly node: DirNode
}

/** What a path is resolved in: the mount table, and the locked root when there is one. */
export interface PathSpace {
  readonly table: MountTable
  readonly lockedRoot?: LockedRoot | null
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
  /** Follow a symlink in the last component (beneath a locked root: refuse it, ELOOP). */
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

/**
 * Resolves `path`. Fails with EINVAL for a relative path, ENOENT when an intermediate component is
 * missing, ENOTDIR when one is not a directory, ELOOP after {@link maxSymlinks} links. A missing last
 * component is not an error: `entry` and `found` are null and `parent`/`name` say where it would be.
 */
export function lookup(space: PathSpace, path: string, options: LookupOptions): Lookup {
  const result = tryLookup(space, path, options)
  if (!result) throw new HostError('ENOENT', options.syscall, path, 'no such file or directory')
  return result
}

/**
 * {@link lookup}, but a missing intermediate component gives undefined instead of throwing ENOENT:
 * callers for which a missing path is an expected answer (stat, `mkdir -p`) pay for no error and
 * no stack trace. Every other failure throws as in {@link lookup}.
 */
export function tryLookup(space: PathSpace, path: string, options: LookupOptions): Lookup | undefined {
  return walk(space, path, options, false) as Lookup | undefined
}

/**
 * Where a walk found an intermediate component missing, reached without following a symlink: the
 * directory it stood in, and the components left from there (`rest` from `at`, the missing one
 * first).
 */
export interface MissingAt {
  readonly missing: true
  readonly mount: Mount
  readonly node: DirNode
  readonly rest: string
  readonly at: number
}

/**
 * {@link tryLookup}, but a missing intermediate component reached without following a symlink
 * gives where the walk stopped ({@link MissingAt}): `mkdir -p` makes the rest from there instead
 * of looking every prefix up from the root. A missing component behind a symlink still gives
 * undefined (a dangling link on the way is the caller's case to decide).
 */
export function lookupOrMissing(space: PathSpace, path: string, options: LookupOptions): Lookup | MissingAt | undefined {
  return walk(space, path, options, true)
}

/**
 * Where `path` leaves the locked root's own path, when it lies strictly beneath it: the index in
 * `path` of its first component below the root; -1 when no root is locked or `path` is the root, above
 * it or elsewhere. Compared as text, slashes folded: the root's descriptor stands for its path.
 */
export function beneathRootAt(space: PathSpace, path: string): number {
  const root = space.lockedRoot
  if (!root) return -1
  const prefix = root.path
  // The common case first: the path spelled as the root was, then a slash.
  let at: number
  if (path.startsWith(prefix) && (prefix === '/' || path.charCodeAt(prefix.length) === 47)) at = prefix.length
  else {
    // Doubled slashes in either spelling: compare component by component.
    at = matchFolded(path, prefix)
    if (at < 0) return -1
  }
  at = skipSlashes(path, at)
  return at < path.length ? at : -1
}

/** The index in `path` just past `prefix` (a normalized absolute path), slashes folded; -1 when `prefix` does not lead it. */
function matchFolded(path: string, prefix: string): number {
  let i = 0
  let j = 0
  while (j < prefix.length) {
    if (prefix.charCodeAt(j) === 47) {
      if (path.charCodeAt(i) !== 47) return -1
      i = skipSlashes(path, i)
      j++
      continue
    }
    if (path.charCodeAt(i) !== prefix.charCodeAt(j)) return -1
    i++
    j++
  }
  return prefix === '/' || i === path.length || path.charCodeAt(i) === 47 ? i : -1
}

/** The refusal of a symlink beneath the locked root: ELOOP, naming the level that is one. */
function symlinkRefused(syscall: string, path: string, level: string): HostError {
  return new HostError('ELOOP', syscall, path, `refusing to follow a symlink beneath the root: ${level} is a symlink`)
}

function walk(space: PathSpace, path: string, options: LookupOptions, reportMissing: boolean): Lookup | MissingAt | undefined {
  if (!path.startsWith('/')) throw new HostError('EINVAL', options.syscall, path, 'path is not absolute')
  const table = space.table
  const rootMount = topmost(table, table.root, table.root.root)
  const rootNode = rootMount.root
  // The walk keeps its place as a mount and a node, and reads components straight from the string:
  // no array of components and no location object per step. A symlink replaces what is left to walk
  // with its target followed by the rest, as the kernel does.
  let mount = rootMount
  let node: Inode = rootNode
  let rest = path
  let links = 0
  let at = skipSlashes(rest, 0)
  // Strictly beneath a locked root: start from the directory the lock found, follow no symlink.
  const beneath = beneathRootAt(space, path)
  const locked = beneath >= 0 ? (space.lockedRoot as LockedRoot) : null
  if (locked) {
    mount = locked.mount
    node = locked.node
    at = beneath
  }
  while (at < rest.length) {
    const slash = rest.indexOf('/', at)
    const end = slash < 0 ? rest.length : slash
    const start = at
    at = skipSlashes(rest, end)
    const isLast = at === rest.length
    if (node.type !== 'directory') throw new HostError('ENOTDIR', options.syscall, path, 'not a directory')
    const dots = dotCount(rest, start, end)
    if (dots === 1) continue
    if (dots === 2) {
      if (locked && node === locked.node && mount === locked.mount) {
        throw new HostError('EXDEV', options.syscall, path, 'refusing to climb above the root')
      }
      // Climb out of mounts whose root we stand on, then to the parent directory (not above a root).
      while (node === mount.root && mount.parent && mount.mountpoint) {
        node = mount.mountpoint
        mount = mount.parent
      }
      if (node !== mount.root) node = node.parent ?? node
      continue
    }
    const dirMount = mount
    const dir = node
    // The entry this directory gave last, when the path names it again (see DirNode.hintChild):
    // a name cut from the path is a new string to allocate and hash, and most calls walk the same
    // directories of the same volumes (`/var/lib/kubelet/pods/<uid>/volumes/<plugin>/<name>`).
    let name: string
    let child: Inode | undefined
    const hint = dir.hintChild
    if (hint && isNameAt(rest, start, end, dir.hintName)) {
      name = dir.hintName
      child = hint
    } else {
      name = rest.slice(start, end)
      child = dir.children.get(name)
      if (child) {
        dir.hintChild = child
        // The entry's own name (the same text as `name`), so a later check compares with the string linked.
        dir.hintName = child.name
      }
    }
    if (!child) {
      if (isLast) return { parent: { mount: dirMount, node: dir }, name, entry: null, found: null }
      return reportMissing && links === 0 ? { missing: true, mount: dirMount, node: dir as DirNode, rest, at: start } : undefined
    }
    if (child.type === 'symlink' && (!isLast || options.follow)) {
      if (locked) throw symlinkRefused(options.syscall, path, isLast ? path : path.slice(0, end))
      if (++links > maxSymlinks) throw new HostError('ELOOP', options.syscall, path, 'too many levels of symbolic links')
      rest = isLast ? child.target : `${child.target}/${rest.slice(at)}`
      at = skipSlashes(rest, 0)
      if (child.target.startsWith('/')) {
        mount = rootMount
        node = rootNode
      }
      continue
    }
    const over = table.covering(dirMount, child)
    if (over) {
      mount = topmost(table, over, over.root)
      node = mount.root
    } else {
      node = child
    }
    if (isLast) return { parent: { mount: dirMount, node: dir }, name, entry: child, found: { mount, node } }
  }
  return { parent: null, name: '', entry: node, found: { mount, node } }
}

/** The topmost mount over `node` seen through `mount`, or `mount` itself when nothing covers it. */
function topmost(table: MountTable, mount: Mount, node: Inode): Mount {
  let current = mount
  for (let over = table.covering(current, node); over; over = table.covering(current, current.root)) current = over
  return current
}

/** 1 for a component `.`, 2 for `..`, else 0. */
function dotCount(text: string, start: number, end: number): number {
  const length = end - start
  if (length === 0 || length > 2 || text.charCodeAt(start) !== 46) return 0
  return length === 1 ? 1 : text.charCodeAt(start + 1) === 46 ? 2 : 0
}

/** True when `text` holds exactly `name` from `start` to `end`. */
function isNameAt(text: string, start: number, end: number, name: string): boolean {
  return end - start === name.length && text.startsWith(name, start)
}

function skipSlashes(text: string, from: number): number {
  let i = from
  while (i < text.length && text.charCodeAt(i) === 47) i++
  return i
}

/** Resolves `path` and fails with ENOENT when it does not exist. */
export function lookupExisting(space: PathSpace, path: string, options: LookupOptions): Lookup & { found: Location } {
  const result = lookup(space, path, options)
  if (!result.found) throw new HostError('ENOENT', options.syscall, path, 'no such file or directory')
  return result as Lookup & { found: Location }
}
