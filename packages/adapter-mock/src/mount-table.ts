/**
 * The mount table: a tree of mounts, each showing one filesystem (from `root`, a node in it) over a
 * mount point (a node of the parent mount). Like the kernel, a mount point is the pair (parent mount,
 * node): a mount on `/a/x` is not visible through a non-recursive bind of `/a`, and a second mount on
 * the same path goes on top of the first.
 */
import type { MountEntry } from '@kubevol/core'
import { joinPath } from '@kubevol/core/host'
import type { BlockDevice } from './devices.js'
import type { Filesystem } from './filesystem.js'
import { directoryMoves } from './filesystem.js'
import type { Inode } from './nodes.js'
import { relativePath } from './nodes.js'

/** Mount propagation, as in the mount table. */
type Propagation = MountEntry['propagation']

/** One mount: which filesystem (from which node) is shown over which mount point. */
export interface Mount {
  readonly id: number
  readonly parent: Mount | null
  /** The node of the parent mount this mount covers; null for the root mount. */
  readonly mountpoint: Inode | null
  readonly fs: Filesystem
  /** The node of `fs` shown at the mount point (`fs.root`, or a subdirectory or file for a bind). */
  readonly root: Inode
  /** The source column of the mount table (the device name; binds keep their source's). */
  readonly source: string
  /** The block device the filesystem was mounted from; binds keep it, so it stays open. */
  readonly device: BlockDevice | null
  /** Per-mount flags shown after `rw`/`ro` (`nosuid`, `nodev`, ...). */
  readonly flags: readonly string[]
  readOnly: boolean
  propagation: Propagation
}

/** A mount before it has an id. */
export type MountInit = Omit<Mount, 'id'>

const mountFlagNames = new Set(['nosuid', 'nodev', 'noexec', 'noatime', 'nodiratime', 'relatime', 'strictatime'])

/** Splits requested options into per-mount flags and filesystem (super) options. */
export function splitMountOptions(options: readonly string[]): { flags: string[]; superOptions: string[] } {
  const flags: string[] = []
  const superOptions: string[] = []
  for (const option of options) {
    if (option === 'rw' || option === 'ro' || option === 'bind' || option === 'remount' || option === '') continue
    if (mountFlagNames.has(option)) flags.push(option)
    else superOptions.push(option)
  }
  return { flags, superOptions }
}

/** Every mount of the host, in mount order, with the lookups path resolution needs. */
export class MountTable {
  readonly root: Mount
  // A Set keeps insertion (mount) order and deletes in O(1).
  readonly #mounts = new Set<Mount>()
  readonly #covers = new Map<Mount, Map<Inode, Mount>>()
  #nextId = 1

  constructor(rootFs: Filesystem, source: string) {
    this.root = this.add({
      parent: null,
      mountpoint: null,
      fs: rootFs,
      root: rootFs.root,
      source,
      device: null,
      flags: [],
      readOnly: false,
      propagation: 'private',
    })
  }

  get all(): readonly Mount[] {
    return [...this.#mounts]
  }

  // The listing `entries()` gives, kept across calls: a mount added or removed patches it; anything
  // else that may change a line (a remount, a renamed parent, a removed bind source) drops it.
  #entries: Map<Mount, MountEntry | undefined> | undefined
  #list: readonly MountEntry[] | undefined
  /** {@link directoryMoves} when the lines were made: a move since may have changed any of them. */
  #linesMoves = -1

  /** Every mount's table line, in mount order (frozen; built again only after a change). */
  entries(): readonly MountEntry[] {
    if (this.#linesMoves !== directoryMoves()) this.invalidateEntries()
    if (!this.#entries) {
      this.#entries = new Map([...this.#mounts].map((m) => [m, undefined]))
      this.#linesMoves = directoryMoves()
    }
    if (!this.#list) {
      const list: MountEntry[] = []
      for (const [mount, entry] of this.#entries) {
        const line = entry ?? Object.freeze(this.entry(mount))
        if (!entry) this.#entries.set(mount, line)
        list.push(line)
      }
      this.#list = Object.freeze(list)
    }
    return this.#list
  }

  /** Drops the kept listing: something may have changed a line in place. */
  invalidateEntries(): void {
    this.#entries = undefined
    this.#list = undefined
  }

  add(init: MountInit): Mount {
    // Spelled out, not spread: a spread copy of this many fields keeps them in a separate property
    // store, a hundred bytes more for each of a node's mounts.
    const mount: Mount = {
      id: this.#nextId++,
      parent: init.parent,
      mountpoint: init.mountpoint,
      fs: init.fs,
      root: init.root,
      source: init.source,
      device: init.device,
      flags: init.flags,
      readOnly: init.readOnly,
      propagation: init.propagation,
    }
    mount.root.isMountRoot = true
    this.#mounts.add(mount)
    // Its line is made when listed, after whoever added it has finished setting it up.
    this.#entries?.set(mount, undefined)
    this.#list = undefined
    if (mount.parent && mount.mountpoint) {
      let covers = this.#covers.get(mount.parent)
      if (!covers) this.#covers.set(mount.parent, (covers = new Map()))
      covers.set(mount.mountpoint, mount)
      mount.mountpoint.mountsOver++
    }
    return mount
  }

  /** Takes `mount` out of the table. Its children must be gone already. */
  remove(mount: Mount): void {
    this.#mounts.delete(mount)
    this.#entries?.delete(mount)
    this.#list = undefined
    this.#covers.delete(mount)
    if (!mount.parent || !mount.mountpoint) return
    this.#covers.get(mount.parent)?.delete(mount.mountpoint)
    mount.mountpoint.mountsOver--
  }

  /** The mount on top of `node` as seen through `mount`, if any. */
  covering(mount: Mount, node: Inode): Mount | undefined {
    return node.mountsOver === 0 ? undefined : this.#covers.get(mount)?.get(node)
  }

  /** The mounts whose parent is `mount`. */
  children(mount: Mount): Mount[] {
    return [...(this.#covers.get(mount)?.values() ?? [])]
  }

  /** True when some mount covers `node` (through any view of its filesystem). */
  isMountpoint(node: Inode): boolean {
    return node.mountsOver > 0
  }

  // Targets by mount, valid while no populated directory moved: listing the table is O(mounts), not
  // O(mounts × depth) with a path built for each.
  readonly #targets = new WeakMap<Mount, { readonly moves: number; readonly path: string }>()

  /** The absolute path where `mount` is mounted. */
  targetOf(mount: Mount): string {
    if (!mount.parent || !mount.mountpoint) return '/'
    const moves = directoryMoves()
    const cached = this.#targets.get(mount)
    if (cached?.moves === moves) return cached.path
    const path = this.pathOf(mount.parent, mount.mountpoint)
    this.#targets.set(mount, { moves, path })
    return path
  }

  /** The absolute path of `node` seen through `mount`. */
  pathOf(mount: Mount, node: Inode): string {
    return joinPath(this.targetOf(mount), relativePath(mount.root, node) ?? node.name)
  }

  /**
   * The targets of the mounts other than `holder` that show `node` as their root (the kernel's
   * view of mount-utils `SearchMountPoints`: same filesystem, same place in it), in mount order.
   */
  referencesOf(holder: Mount, node: Inode): string[] {
    const targets: string[] = []
    for (const mount of this.#mounts) if (mount !== holder && mount.root === node) targets.push(this.targetOf(mount))
    return targets
  }

  /** The path of the mount's root inside its filesystem (`/` unless a bind of a subdirectory). */
  rootPathOf(mount: Mount): string {
    const rel = relativePath(mount.fs.root, mount.root)
    // A bind whose source was removed since: the kernel appends `//deleted`.
    return rel === null ? `/${mount.root.name}//deleted` : `/${rel}`
  }

  /** The mount-table line of `mount`. */
  entry(mount: Mount): MountEntry {
    return {
      id: mount.id,
      parentId: mount.parent?.id ?? 0,
      device: mount.fs.device,
      root: this.rootPathOf(mount),
      target: this.targetOf(mount),
      fstype: mount.fs.fstype,
      source: mount.source,
      options: [mount.readOnly ? 'ro' : 'rw', ...mount.flags],
      superOptions: [mount.fs.readOnly ? 'ro' : 'rw', ...mount.fs.superOptions],
      propagation: mount.propagation,
    }
  }
}
