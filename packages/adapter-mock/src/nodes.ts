/**
 * The inodes of the in-memory file tree. A node belongs to exactly one filesystem and is linked in at
 * most one directory (no hard links), so `parent` and `name` give its path inside that filesystem.
 * Bind mounts show the same node objects at another place: a write through one is seen through all.
 */
import type { FileInfo } from '@kubevol/core'
import type { Filesystem } from './filesystem.js'

/** What a block device or a loop-backing file holds: a filesystem signature and its persistent tree. */
export interface DiskImage {
  signature: string | null
  fs: Filesystem | null
}

interface NodeBase {
  readonly ino: number
  readonly fs: Filesystem
  mode: number
  uid: number
  gid: number
  mtimeMs: number
  /** The directory this node is linked in; null for a filesystem root and for a removed node. */
  parent: DirNode | null
  name: string
  /**
   * Set once the node is shown as the root of a mount (a filesystem's root, or a bind's source):
   * unlinking it changes that mount's table line. A field rather than a weak set, which the garbage
   * collector would have to walk on every major collection.
   */
  isMountRoot: boolean
  /**
   * How many mounts have this node as their mount point (through any view of its filesystem),
   * kept by the mount table. Path resolution asks at every component whether a mount covers it;
   * a field read on the node it already holds answers "no" without a probe of the table's map of
   * every mount point, which a node's worth of tmpfs volumes makes large and cold.
   */
  mountsOver: number
}

/** A directory. */
export interface DirNode extends NodeBase {
  readonly type: 'directory'
  /**
   * The entries by name. Read-only to all but the filesystem's `link` and `unlink`: a directory that
   * never had an entry shares {@link noChildren}, and gets a map of its own on its first link.
   */
  children: ReadonlyMap<string, Inode>
  /**
   * The entry path resolution found here last (null: none), linked as `hintName`: taken when a
   * path holds that name again, without cutting the name out of the path and hashing it. Set by
   * the walk; cleared by the filesystem's `unlink` when that entry goes, so it is always linked.
   */
  hintChild: Inode | null
  hintName: string
}

/**
 * The children of every directory that never had one. Most directories of a node's worth of volumes
 * stay empty (a tmpfs root, a mount point under a mount), and an empty map of their own would cost
 * a few hundred bytes each for nothing.
 */
export const noChildren: ReadonlyMap<string, Inode> = new Map()

/**
 * The data of every empty file (the emptyDir ready markers, a file cut to nothing). Data is never
 * written in place, only replaced, so one array serves them all: a zero-length array of its own is
 * two objects (the array and its buffer) of nearly 200 bytes.
 */
export const noBytes: Uint8Array = new Uint8Array(0)

/** A regular file. */
export interface FileNode extends NodeBase {
  readonly type: 'file'
  /** The bytes stored; `size` may be larger (a sparse tail that reads as zeros). */
  data: Uint8Array
  size: number
  /** Set once the file is used as a loop device's backing store. */
  image: DiskImage | null
}

/** A symbolic link. */
export interface SymlinkNode extends NodeBase {
  readonly type: 'symlink'
  readonly target: string
}

/** A block or character device node. */
export interface DeviceNode extends NodeBase {
  readonly type: 'block-device' | 'char-device'
  /** Encoded device number (see `makeDev`). */
  readonly rdev: number
}

/** A socket or a fifo. */
export interface SpecialNode extends NodeBase {
  readonly type: 'socket' | 'fifo'
}

/** Any node of a file tree. */
export type Inode = DirNode | FileNode | SymlinkNode | DeviceNode | SpecialNode

/** The node types a test can create with `mknod`. */
export type SpecialNodeType = 'char-device' | 'socket' | 'fifo'

/** The `size` `stat` reports: bytes for files, the target length for symlinks, 4096 for directories. */
function nodeSize(node: Inode): number {
  switch (node.type) {
    case 'file':
      return node.size
    case 'symlink':
      return node.target.length
    case 'directory':
      return 4096
    default:
      return 0
  }
}

/** The FileInfo of a node. */
export function fileInfo(node: Inode): FileInfo {
  return {
    type: node.type,
    mode: node.mode,
    uid: node.uid,
    gid: node.gid,
    size: nodeSize(node),
    dev: node.fs.dev,
    ino: node.ino,
    mtimeMs: node.mtimeMs,
  }
}

/** True when `node` is `ancestor` or lies below it. */
export function isWithin(node: Inode, ancestor: Inode): boolean {
  for (let n: Inode | null = node; n; n = n.parent) if (n === ancestor) return true
  return false
}

/** Every node of the subtree at `node`, `node` first. */
export function subtree(node: Inode): Inode[] {
  const out: Inode[] = []
  const stack: Inode[] = [node]
  for (let n = stack.pop(); n; n = stack.pop()) {
    out.push(n)
    if (n.type === 'directory') stack.push(...n.children.values())
  }
  return out
}

/** The path of `node` relative to `ancestor` (`''` when they are the same), or null when it is not below it. */
export function relativePath(ancestor: Inode, node: Inode): string | null {
  const names: string[] = []
  for (let n: Inode | null = node; n; n = n.parent) {
    if (n === ancestor) return names.reverse().join('/')
    names.push(n.name)
  }
  return null
}
