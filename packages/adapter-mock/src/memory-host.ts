/**
 * The memory host: the Host port over an in-memory kernel (file trees, a mount table, block and loop
 * devices), with fault injection, strict-mode invariant checks and synchronous views for tests.
 */
import type {
  BlockDevices,
  Clock,
  FileInfo,
  FileStep,
  Filesystems,
  FsStats,
  Host,
  LoopDevices,
  MountEntry,
  SELinux,
  SubPaths,
  MountRequest,
  PathHolders,
  RootHandle,
  RootLock,
  RemoveUnmountedOptions,
  UnmountOptions,
} from '@kubevol/core'
import { HostError, systemClock } from '@kubevol/core'
import { fileStepsOneByOne, joinPath, removeUnmountedOneByOne } from '@kubevol/core/host'
import type { CallRunner } from './capabilities.js'
import { createBlockDevices, createFilesystems, createLoopDevices, createStatfs } from './capabilities.js'
import * as devices from './device-ops.js'
import type { Disposer, Faults, Interceptor } from './faults.js'
import { FaultInjector } from './faults.js'
import * as files from './file-ops.js'
import type { HostState, Violation } from './host-state.js'
import { createHostState } from './host-state.js'
import type { TreeNode } from './inspect.js'
import * as inspect from './inspect.js'
import { type LockedRoot, lookupExisting, tryLookup } from './lookup.js'
import * as mounts from './mount-ops.js'
import type { SpecialNodeType } from './nodes.js'
import * as removal from './remove-ops.js'
import * as subpaths from './subpath-ops.js'

/** Which optional Host members the memory host has. Each defaults to true. */
export interface MemoryHostCapabilities {
  readonly loopDevices?: boolean
  readonly blockDevices?: boolean
  readonly filesystems?: boolean
  readonly statfs?: boolean
}

/** Options of {@link createMemoryHost}; every one has a default. */
export interface MemoryHostOptions {
  /** Time for mtimes and for `faults.delay`. @default systemClock */
  readonly clock?: Clock
  /** Record invariant breaches in `violations` (the calls still behave as the kernel's). @default true */
  readonly strict?: boolean
  /** Leave capabilities out to test the code paths of a host without them. @default all present */
  readonly capabilities?: MemoryHostCapabilities
  /** Masks the mode of created files and directories. @default 0o022 */
  readonly umask?: number
  /** The machine's memory: a tmpfs without `size=` gets half, `size=50%` a share. @default 8 GiB */
  readonly memoryBytes?: number
  /** Capacity of the root filesystem. @default 64 GiB */
  readonly rootCapacityBytes?: number
  /** Inodes of the root filesystem. @default 4_194_304 */
  readonly rootInodes?: number
  /** Report SELinux as enabled (the `selinux` capability). @default false */
  readonly selinux?: boolean
}

const GiB = 2 ** 30

/** What every call's work waits on: already settled, so the work runs on the next turn of the microtask queue. */
const settled: Promise<void> = Promise.resolve()

/** The options with every default filled in. */
function resolveMemoryHostOptions(options: MemoryHostOptions = {}) {
  return {
    clock: options.clock ?? systemClock,
    strict: options.strict ?? true,
    umask: options.umask ?? 0o022,
    memoryBytes: options.memoryBytes ?? 8 * GiB,
    rootCapacityBytes: options.rootCapacityBytes ?? 64 * GiB,
    inodeLimit: options.rootInodes ?? 4_194_304,
    capabilities: {
      loopDevices: options.capabilities?.loopDevices ?? true,
      blockDevices: options.capabilities?.blockDevices ?? true,
      filesystems: options.capabilities?.filesystems ?? true,
      statfs: options.capabilities?.statfs ?? true,
    },
  }
}

/**
 * A Host in memory that behaves like the Linux kernel where kubevol cares: path resolution with
 * symlinks, mount points that hide and restore what is below, bind mounts sharing nodes, EBUSY on
 * mount points, read-only mounts, device filesystems that persist across mounts. Every call settles
 * asynchronously and passes through {@link faults} first. Create it with {@link createMemoryHost}.
 */
/**
 * Calls that leave every line of the mount table as it is (everything else drops the kept
 * listing): reads, and file calls, whose only effect on a line (a moved directory, an unlinked
 * bind source) the table notices itself, by the count of such changes the filesystems keep.
 */
const LINES_KEPT = new Set([
  'lstat',
  'stat',
  'readdir',
  'readFile',
  'readlink',
  'mounts',
  'isMountPoint',
  'mountReferences',
  'holders',
  'statfs',
  'mkdir',
  'unmount',
  'writeFile',
  'appendFile',
  'writeFileAt',
  'syncFile',
  'truncate',
  'remove',
  'removeUnmounted',
  'fileSteps',
  'removeAll',
  'rename',
  'symlink',
  'chmod',
  'lchown',
])

/** A mount that only adds lines to the table: a new tmpfs or bind, no remount, no propagation change. */
function addsLinesOnly(request: MountRequest): boolean {
  if (request.remount || request.propagation !== undefined) return false
  return request.bind === true || request.fstype === 'tmpfs' || request.fstype === 'ramfs'
}

export class MemoryHost implements Host {
  readonly #state: HostState
  readonly #faults: FaultInjector
  /** Root directories locked by {@link MemoryHost.lockRoot}, and the pid of their holder. */
  readonly #rootLocks = new Map<string, number>()
  #lockHolders = 0
  declare readonly loopDevices?: LoopDevices
  declare readonly blockDevices?: BlockDevices
  declare readonly filesystems?: Filesystems
  declare readonly statfs?: (path: string) => Promise<FsStats>
  /** Safe subPath binds (see the Host port); always present. */
  readonly subPaths: SubPaths
  /** SELinux as the options say (absent unless `selinux: true`). */
  declare readonly selinux?: SELinux

  constructor(options: MemoryHostOptions = {}) {
    const resolved = resolveMemoryHostOptions(options)
    const state = createHostState(resolved)
    this.#state = state
    this.#faults = new FaultInjector(resolved.clock, state.busy)
    const { capabilities } = resolved
    const call: CallRunner = (method, args, path, run) => this.#call(method, args, path, run)
    const self = this as { -readonly [K in 'loopDevices' | 'blockDevices' | 'filesystems' | 'statfs']?: MemoryHost[K] }
    if (capabilities.loopDevices) self.loopDevices = createLoopDevices(state, call)
    if (capabilities.blockDevices) self.blockDevices = createBlockDevices(state, call)
    if (capabilities.filesystems) self.filesystems = createFilesystems(state, call)
    if (capabilities.statfs) self.statfs = createStatfs(state, call)
    this.subPaths = {
      bind: (volumePath, subPath, target, opts) =>
        call('subPaths.bind', [volumePath, subPath, target, opts], target, () =>
          subpaths.bindSubPath(state, volumePath, subPath, target, opts?.readOnly ?? false),
        ),
    }
    if (options.selinux) (this as { selinux?: SELinux }).selinux = { enabled: async () => true }
  }

  /** What holds `path`: the mounts below it (the memory host has no processes). */
  holders(path: string): Promise<PathHolders> {
    return this.#call('holders', [path], path, () => {
      const base = path.endsWith('/') ? path : `${path}/`
      return { mounts: this.mountTargets().filter((t) => t.startsWith(base)), processes: [] }
    })
  }

  /**
   * Appends to a file, creating it (0600); the memory host has no cache, so `sync` has nothing to
   * wait for. The options are in the call interceptors see: a test can drop unsynced appends to
   * play a crash that loses the kernel's cache.
   */
  appendFile(path: string, data: Uint8Array | string, options?: { readonly sync?: boolean }): Promise<void> {
    return this.#call('appendFile', [path, data, options], path, () => files.appendFile(this.#state, path, data))
  }

  /**
   * Writes into an existing file at `offset` (pwrite); `sync` has nothing to wait for, and is in
   * the call interceptors see, as for {@link appendFile}.
   */
  writeFileAt(path: string, offset: number, data: Uint8Array, options?: { readonly sync?: boolean }): Promise<void> {
    return this.#call('writeFileAt', [path, offset, data, options], path, () => files.writeFileAt(this.#state, path, offset, data))
  }

  /** Nothing to flush in memory; fails like fsync on a missing file. */
  syncFile(path: string): Promise<void> {
    return this.#call('syncFile', [path], path, () => {
      if (!files.statPath(this.#state, path, true)) throw new HostError('ENOENT', 'fsync', path, 'no such file or directory')
    })
  }

  /** Sets a file's size, extending it sparsely (`truncate -s`). ENOENT when the file does not exist. */
  truncate(path: string, size: number): Promise<void> {
    return this.#call('truncate', [path, size], path, () => {
      if (!files.statPath(this.#state, path, true)) throw new HostError('ENOENT', 'truncate', path, 'no such file or directory')
      files.allocateFile(this.#state, path, size)
    })
  }

  /**
   * kubevol's lock on `rootDir`, modelled per host: one holder at a time, each given its own pid
   * (from 1000 up) for the refusal to name. The directory is made when missing (no lock file is
   * written). Held, it makes `rootDir` the host's root as the Host port says: the directory it leads
   * to now (symlinks followed, once) stands for it, and every path strictly beneath it is resolved
   * following no symlink, until `release()`. One root at a time: a lock on another directory takes
   * the host's root over, and its release leaves none.
   */
  /**
   * Makes `rootDir` the root without the lock (the volume manager's run), as {@link MemoryHost.lockRoot}
   * does; the root already held gives a handle that leaves it in place.
   */
  openRoot(rootDir: string): Promise<RootHandle> {
    return this.#call('openRoot', [rootDir], rootDir, (): RootHandle => {
      if (this.#state.lockedRoot?.path === joinPath(rootDir)) return { close: async () => {} }
      const root = this.#findRoot(rootDir)
      this.#state.lockedRoot = root
      return {
        close: async () => {
          if (this.#state.lockedRoot === root) this.#state.lockedRoot = null
        },
      }
    })
  }

  // The directory `rootDir` names now (made when missing; symlinks to it followed, this once).
  #findRoot(rootDir: string): LockedRoot {
    files.mkdir(this.#state, rootDir, { recursive: true, mode: 0o755 })
    const found = lookupExisting(this.#state, rootDir, { follow: true, syscall: 'open' }).found
    if (found.node.type !== 'directory') throw new HostError('ENOTDIR', 'open', rootDir, 'not a directory')
    return { path: joinPath(rootDir), mount: found.mount, node: found.node }
  }

  lockRoot(rootDir: string): Promise<RootLock> {
    return this.#call('lockRoot', [rootDir], rootDir, (): RootLock => {
      const holder = this.#rootLocks.get(rootDir)
      if (holder !== undefined) return { locked: false, holderPid: holder }
      const root = this.#findRoot(rootDir)
      const pid = 1000 + this.#lockHolders++
      this.#rootLocks.set(rootDir, pid)
      this.#state.lockedRoot = root
      let held = true
      return {
        locked: true,
        release: async () => {
          if (held && this.#rootLocks.get(rootDir) === pid) this.#rootLocks.delete(rootDir)
          if (held && this.#state.lockedRoot === root) this.#state.lockedRoot = null
          held = false
        },
      }
    })
  }

  /** Fault injection: `failOn`, `hangOn`, `delay`, `markBusy`, `intercept`. */
  get faults(): Faults {
    return this.#faults
  }

  /** Adds an interceptor that sees every call first (see {@link Faults.intercept}). */
  intercept(interceptor: Interceptor): Disposer {
    return this.#faults.intercept(interceptor)
  }

  // Every call settles asynchronously, as on a real host: nothing runs before the caller's next line.
  // One promise a call: the work runs in a reaction to a settled promise, and its value (or its
  // throw) settles the promise the caller awaits. An async wrapper awaiting `null` and then the
  // dispatch made three promises and as many turns of the microtask queue for each call, which a
  // node's worth of volumes (about a dozen calls each) paid for in the collector.
  #call<T>(method: string, args: readonly unknown[], path: string | undefined, run: () => T): Promise<T> {
    return settled.then(() => this.#run(method, args, path, run)) as Promise<T>
  }

  #run<T>(method: string, args: readonly unknown[], path: string | undefined, run: () => T): T | Promise<unknown> {
    // A read changes nothing; a tmpfs or bind mount and an unmount add or remove lines (the table
    // patches its listing); a file call changes a line only by moving a directory or unlinking a
    // bind's source, which the table sees itself. Anything else may change a line in place (a
    // remount, a device filesystem turning read-only): the listing is built again after it.
    const table = this.#state.table
    const work = LINES_KEPT.has(method) || (method === 'mount' && addsLinesOnly(args[0] as MountRequest))
      ? run
      : () => {
          table.invalidateEntries()
          try {
            return run()
          } finally {
            table.invalidateEntries()
          }
        }
    // Whether an interceptor is set is read when the call runs, as the chain would be.
    return this.#faults.intercepting ? this.#faults.dispatch(method, args, path, work) : work()
  }

  lstat(path: string): Promise<FileInfo | null> {
    return this.#call('lstat', [path], path, () => files.statPath(this.#state, path, false))
  }

  stat(path: string): Promise<FileInfo | null> {
    return this.#call('stat', [path], path, () => files.statPath(this.#state, path, true))
  }

  mkdir(path: string, options?: { readonly recursive?: boolean; readonly mode?: number }): Promise<void> {
    return this.#call('mkdir', [path, options], path, () => files.mkdir(this.#state, path, options))
  }

  readdir(path: string): Promise<readonly string[]> {
    return this.#call('readdir', [path], path, () => files.readdir(this.#state, path))
  }

  readFile(path: string): Promise<Uint8Array> {
    return this.#call('readFile', [path], path, () => files.readFile(this.#state, path))
  }

  writeFile(path: string, data: Uint8Array | string, options?: { readonly mode?: number }): Promise<void> {
    return this.#call('writeFile', [path, data, options], path, () => files.writeFile(this.#state, path, data, options))
  }

  rename(from: string, to: string): Promise<void> {
    return this.#call('rename', [from, to], from, () => removal.rename(this.#state, from, to))
  }

  symlink(target: string, path: string): Promise<void> {
    return this.#call('symlink', [target, path], path, () => files.symlink(this.#state, target, path))
  }

  readlink(path: string): Promise<string> {
    return this.#call('readlink', [path], path, () => files.readlink(this.#state, path))
  }

  remove(path: string): Promise<void> {
    return this.#call('remove', [path], path, () => removal.remove(this.#state, path))
  }

  /**
   * In one call; with `unmountLast` and a fault or interceptor set, as the separate checks,
   * unmount and removes, so that each is a call of its own (a crash point, a fault's target).
   */
  async removeUnmounted(paths: readonly string[], options?: RemoveUnmountedOptions): Promise<void> {
    await this.#call('removeUnmounted', [paths, options], paths[0], () =>
      options?.unmountLast === true && this.#faults.intercepting
        ? removeUnmountedOneByOne(this, paths, options)
        : removal.removeUnmounted(this.#state, paths, options?.unmountLast === true ? (path) => mounts.unmount(this.#state, path, { noFollow: true }) : undefined),
    )
  }

  /**
   * The steps one after another, each as its own call of the member it names inside the one
   * `fileSteps` call: a fault set on `mkdir`, `stat`, `chmod`, `lstat` or `writeFile` fails (or
   * holds, or delays) that step as it would the separate call; one set on `fileSteps` the whole.
   * With no interceptor set, nothing can tell the steps' calls apart from the whole, and they are
   * made at once, in the same order, with the same results and errors.
   */
  async fileSteps(steps: readonly FileStep[]): Promise<number> {
    // A mount other than a new tmpfs or bind changes lines of the table in place: the separate
    // calls, as the mount alone would be made (see #run).
    const inPlace = steps.some((step) => step.op === 'mountUnlessMountPoint' && !addsLinesOnly({ ...step.mount, target: step.path }))
    return await this.#call('fileSteps', [steps], steps[0]?.path, () =>
      this.#faults.intercepting || inPlace
        ? fileStepsOneByOne(this, steps)
        : files.fileSteps(this.#state, steps, (step) => {
            if (!mounts.isMountPoint(this.#state, step.path)) mounts.mount(this.#state, { ...step.mount, target: step.path })
          }),
    )
  }

  removeAll(path: string): Promise<void> {
    return this.#call('removeAll', [path], path, () => removal.removeAll(this.#state, path))
  }

  chmod(path: string, mode: number): Promise<void> {
    return this.#call('chmod', [path, mode], path, () => files.chmod(this.#state, path, mode))
  }

  lchown(path: string, uid: number, gid: number): Promise<void> {
    return this.#call('lchown', [path, uid, gid], path, () => files.lchown(this.#state, path, uid, gid))
  }

  mount(request: MountRequest): Promise<void> {
    return this.#call('mount', [request], request.target, () => mounts.mount(this.#state, request))
  }

  unmount(target: string, options?: UnmountOptions): Promise<void> {
    return this.#call('unmount', [target, options], target, () => mounts.unmount(this.#state, target, options))
  }

  mounts(): Promise<readonly MountEntry[]> {
    // Kept between calls: plugins ask for the table on every device unmount.
    return this.#call('mounts', [], undefined, () => this.#state.table.entries())
  }

  isMountPoint(path: string): Promise<boolean> {
    return this.#call('isMountPoint', [path], path, () => mounts.isMountPoint(this.#state, path))
  }

  /** The other mounts showing what `path` resolves to (see the Host port); none when it is missing. */
  mountReferences(path: string): Promise<readonly string[]> {
    return this.#call('mountReferences', [path], path, () => {
      const found = tryLookup(this.#state, path, { follow: true, syscall: 'stat' })?.found
      return found ? this.#state.table.referencesOf(found.mount, found.node) : []
    })
  }

  /** Test setup: a blank disk of `sizeBytes` at `path` (parents created), or one holding `fstype`. */
  addBlockDevice(path: string, sizeBytes: number, options: { readonly fstype?: string } = {}): void {
    devices.addBlockDevice(this.#state, path, sizeBytes, options.fstype)
  }

  /** Test setup: a character device, socket or fifo at `path` (parents created). */
  mknod(path: string, type: SpecialNodeType, mode?: number): void {
    files.mknod(this.#state, path, type, mode)
  }

  /** Test setup: a sparse file of `sizeBytes` (created, grown or shrunk), e.g. a loop device's backing. */
  allocateFile(path: string, sizeBytes: number): void {
    files.allocateFile(this.#state, path, sizeBytes)
  }

  /** A JSON-able snapshot of the subtree at `path`, crossing mounts as a process would see it. */
  tree(path: string): TreeNode {
    return inspect.tree(this.#state, path)
  }

  /** True when something (a dangling symlink included) is at `path`. */
  exists(path: string): boolean {
    return inspect.exists(this.#state, path)
  }

  /** The target of every mount except the root filesystem's, in mount order. */
  mountTargets(): string[] {
    return inspect.mountTargets(this.#state)
  }

  /** The invariant breaches recorded so far (always empty when not strict). */
  get violations(): readonly Violation[] {
    return [...this.#state.violations]
  }

  /** Throws, listing them, when any breach was recorded. */
  assertNoViolations(): void {
    const found = this.#state.violations
    if (found.length === 0) return
    const lines = found.map((v) => `  ${v.kind} at ${v.path}: ${v.message}`)
    throw new Error(`memory host recorded ${found.length} invariant breach(es):\n${lines.join('\n')}`)
  }

  /** Forgets the recorded breaches (after a test asserted the ones it expected). */
  clearViolations(): void {
    this.#state.violations.length = 0
  }
}

/**
 * A fresh memory host: `/`, `/dev` and `/tmp` on a root filesystem, nothing mounted, no devices.
 *
 * @example
 * const host = createMemoryHost({ clock: fakeClock })
 * await host.mkdir('/var/lib/kubevol', { recursive: true })
 */
export function createMemoryHost(options: MemoryHostOptions = {}): MemoryHost {
  return new MemoryHost(options)
}
