/**
 * A filesystem (the kernel's superblock): its own tree of nodes, a device number, a capacity, and
 * the bookkeeping `statfs` reports. Every mount shows one filesystem; several mounts (binds) may show
 * the same one.
 */
import type { Clock } from '@kubevol/core'
import type { DeviceNode, DirNode, FileNode, Inode, SpecialNode, SymlinkNode } from './nodes.js'
import { noChildren, subtree } from './nodes.js'

/** Linux's `new_encode_dev`: the `st_dev`/`st_rdev` number of `major:minor`. */
export function makeDev(major: number, minor: number): number {
  return (minor & 0xff) | ((major & 0xfff) << 8) | ((minor & ~0xff) << 12)
}

/** `major:minor` of an encoded device number. */
export function deviceName(dev: number): string {
  return `${(dev >> 8) & 0xfff}:${(dev & 0xff) | ((dev >> 12) & ~0xff)}`
}

/** How to build a filesystem. */
export interface FilesystemOptions {
  readonly fstype: string
  readonly major: number
  readonly minor: number
  readonly capacityBytes: number
  readonly inodeLimit: number
  /** Permission bits of the root directory. */
  readonly rootMode: number
  /** Filesystem options shown after `rw`/`ro` in the super options (`size=64m`). */
  readonly superOptions?: readonly string[]
  readonly clock: Clock
}

/** One filesystem: a tree, a device number, capacity and usage. */
/**
 * Counts moves of populated directories (a rename, or an unlink that keeps the subtree alive) and
 * unlinks of a mount's root: the only changes to a tree that alter a line of the mount table (a
 * target's path, or a bind's root turning `//deleted`). The mount table's listing and its target
 * cache are kept against it.
 */
let movedDirectories = 0

/** The current count of populated-directory moves (see the mount table's target cache). */
export function directoryMoves(): number {
  return movedDirectories
}

export class Filesystem {
  readonly fstype: string
  readonly root: DirNode
  /** Updated when a persistent filesystem is mounted again from another device (a loop re-attach). */
  major: number
  minor: number
  capacityBytes: number
  inodeLimit: number
  /** The superblock's read-only flag (a remount without `bind`). */
  readOnly = false
  superOptions: readonly string[]
  /** Bytes held by file data (sparse tails are free, as on tmpfs and ext4). */
  usedBytes = 0
  inodesUsed = 0
  #nextIno = 2
  readonly #clock: Clock

  constructor(options: FilesystemOptions) {
    this.fstype = options.fstype
    this.major = options.major
    this.minor = options.minor
    this.capacityBytes = options.capacityBytes
    this.inodeLimit = options.inodeLimit
    this.superOptions = options.superOptions ?? []
    this.#clock = options.clock
    this.root = this.newDir(options.rootMode)
  }

  get dev(): number {
    return makeDev(this.major, this.minor)
  }

  /** `major:minor`, as in the mount table. */
  get device(): string {
    return `${this.major}:${this.minor}`
  }

  /** True when `bytes` more data and `inodes` more nodes fit. */
  hasRoom(bytes: number, inodes = 0): boolean {
    return this.usedBytes + bytes <= this.capacityBytes && this.inodesUsed + inodes <= this.inodeLimit
  }

  newDir(mode: number): DirNode {
    // Spelled out rather than spread from #base: directories are most of the nodes a node's worth
    // of volumes makes, and a spread builds and copies a second object for each.
    this.inodesUsed++
    return {
      type: 'directory',
      children: noChildren,
      ino: this.#nextIno++,
      fs: this,
      mode: mode & 0o7777,
      uid: 0,
      gid: 0,
      mtimeMs: this.#clock.now(),
      parent: null,
      name: '',
      isMountRoot: false,
      mountsOver: 0,
      hintChild: null,
      hintName: '',
    }
  }

  // Files and symlinks spelled out too: a volume of the built-in mix makes about one of each, and a
  // spread of the shared fields leaves them in a property store of its own beside the node, for as
  // long as the node lives.
  newFile(mode: number, data: Uint8Array): FileNode {
    this.usedBytes += data.length
    this.inodesUsed++
    return {
      type: 'file',
      data,
      size: data.length,
      image: null,
      ino: this.#nextIno++,
      fs: this,
      mode: mode & 0o7777,
      uid: 0,
      gid: 0,
      mtimeMs: this.#clock.now(),
      parent: null,
      name: '',
      isMountRoot: false,
      mountsOver: 0,
    }
  }

  newSymlink(target: string): SymlinkNode {
    this.inodesUsed++
    return {
      type: 'symlink',
      target,
      ino: this.#nextIno++,
      fs: this,
      mode: 0o777,
      uid: 0,
      gid: 0,
      mtimeMs: this.#clock.now(),
      parent: null,
      name: '',
      isMountRoot: false,
      mountsOver: 0,
    }
  }

  newDevice(type: DeviceNode['type'], rdev: number, mode: number): DeviceNode {
    return { type, rdev, ...this.#base(mode) }
  }

  newSpecial(type: SpecialNode['type'], mode: number): SpecialNode {
    return { type, ...this.#base(mode) }
  }

  /** Links `node` into `dir` as `name` (replacing nothing: the caller unlinks first). */
  link(dir: DirNode, name: string, node: Inode): void {
    if (node.type === 'directory' && node.children.size > 0) movedDirectories++
    node.parent = dir
    node.name = name
    let children = dir.children as Map<string, Inode>
    if (children === noChildren) dir.children = children = new Map()
    children.set(name, node)
    this.touch(dir)
  }

  /** Takes `node` out of its directory; it stays alive for whoever still holds it (a bind mount). */
  unlink(node: Inode): void {
    const dir = node.parent
    if (!dir) return
    if ((node.type === 'directory' && node.children.size > 0) || node.isMountRoot) movedDirectories++
    // The node is linked in `dir`, so this is the directory's own map, never the shared empty one.
    const children = dir.children as Map<string, Inode>
    children.delete(node.name)
    if (dir.hintChild === node) dir.hintChild = null
    node.parent = null
    this.touch(dir)
  }

  /** Gives back the space and inodes of a removed subtree. */
  release(node: Inode): void {
    for (const n of subtree(node)) {
      this.inodesUsed--
      if (n.type === 'file') this.usedBytes -= n.data.length
    }
  }

  /** Replaces the bytes of `file`. The caller checked {@link hasRoom}. */
  setData(file: FileNode, data: Uint8Array, size = data.length): void {
    this.usedBytes += data.length - file.data.length
    file.data = data
    file.size = Math.max(size, data.length)
    this.touch(file)
  }

  touch(node: Inode): void {
    node.mtimeMs = this.#clock.now()
  }

  #base(mode: number) {
    this.inodesUsed++
    return {
      ino: this.#nextIno++,
      fs: this,
      mode: mode & 0o7777,
      uid: 0,
      gid: 0,
      mtimeMs: this.#clock.now(),
      parent: null,
      name: '',
      isMountRoot: false,
      mountsOver: 0,
    }
  }
}
