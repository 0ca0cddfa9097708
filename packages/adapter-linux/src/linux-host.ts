/**
 * The Linux host: the Host port on the real kernel. Files through node:fs, mounts, loop devices and
 * statfs through koffi, the mount table from /proc/self/mountinfo, filesystem tools by spawning
 * them. Every call that may block runs off the main thread under a deadline: the calls set-up and
 * tear-down repeat for every volume on the I/O worker (io-workers.ts), in batches; the rest on
 * libuv's threadpool.
 */
import { closeSync, openSync, readlinkSync } from 'node:fs'
import { access, stat, writeFile } from 'node:fs/promises'
import { constants as osConstants } from 'node:os'
import { basename, dirname } from 'node:path'
import type {
  BlockDevices,
  FileInfo,
  FileStep,
  Filesystems,
  FsStats,
  Host,
  LoopDevices,
  MountEntry,
  MountRequest,
  PathHolders,
  RemoveUnmountedOptions,
  RootHandle,
  RootLock,
  SELinux,
  SubPaths,
  UnmountOptions,
} from '@kubevol/core'
import { HostError, isHostError } from '@kubevol/core'
import { fileStepsOneByOne, joinPath, removeUnmountedOneByOne } from '@kubevol/core/host'
import { errnoError, toHostError } from './errno.js'
import { findHolders } from './holders.js'
import { createBlockDevices } from './block-devices.js'
import type { StalledCall } from './call-runner.js'
import { CallRunner } from './call-runner.js'
import * as c from './constants.js'
import { spawnTools } from './exec.js'
import { exitNow } from './exit-now.js'
import { toFileInfo } from './file-info.js'
import type { FileFields, FileStepsDone, IoFailure, IoRoot, IoStep, RemoveUnmounted } from './io-workers.js'
import { IoWorkers } from './io-workers.js'
import { createFilesystems } from './filesystems.js'
import type { StatfsResult, SysResult } from './libc.js'
import { libc, readStatx } from './libc.js'
import { createLoopDevices } from './loop-devices.js'
import type { MountCall } from './mount-options.js'
import { describeMountCall, lockedFlags, planMount } from './mount-options.js'
import { MountTable } from './mount-table.js'
import type { LinuxMountEntry } from './mountinfo.js'
import { deviceNumber, mountReferencesIn, mountsOfDevice } from './mountinfo.js'
import type { LinuxHostOptions, ResolvedLinuxHostOptions } from './options.js'
import { resolveLinuxHostOptions } from './options.js'
import { normalPath } from './normal-path.js'
import { removeAll } from './remove-all.js'
import { SharedReads } from './shared-reads.js'
import { lockRoot } from './root-lock.js'
import { toFsStats } from './statfs.js'
import type { BeneathRoot } from './sub-paths.js'
import { createSubPaths, openBeneathRoot } from './sub-paths.js'
import type { Sys } from './sys.js'
import { createSys } from './sys.js'

const osErrno = osConstants.errno
const MOUNT_ROOT = BigInt(c.STATX_ATTR_MOUNT_ROOT)
/**
 * How long a batch of calls may run on the I/O worker before the calls it has not started go to
 * another one: what a blocked call (a dead NFS server) can add to the wait of the calls behind it.
 */
const IO_STALL_MS = 100

/** Bytes (or characters) past which writeFile does not go through the I/O worker. */
const LARGE_WRITE = 1 << 20

/** The call name a step's failure carries: the one its Host member's error gives. */
const FILE_STEP_SYSCALLS: Readonly<Record<string, string | undefined>> = {
  lstat: 'lstat',
  mkdir: 'mkdir',
  mkdirp: 'mkdir',
  setPermissions: 'stat',
  stat: 'stat',
  chmod: 'chmod',
  writeFile: 'write',
  mountUnlessMountPoint: 'statx',
}

type MountStep = FileStep & { readonly op: 'mountUnlessMountPoint' }

/** A step as the worker takes it: a recursive mkdir's path resolved, as {@link LinuxHost.mkdir} does. */
function toIoStep(step: FileStep): IoStep {
  switch (step.op) {
    case 'lstat':
      return ['lstat', step.path, step.stopIfFound === true]
    case 'mkdir':
      return step.recursive === true ? ['mkdirp', normalPath(step.path), step.mode ?? 0o777] : ['mkdir', step.path, step.mode ?? 0o777]
    case 'setPermissions':
      return ['setPermissions', step.path, step.permissions]
    case 'writeFile':
      return ['writeFile', step.path, step.data, step.mode ?? 0o666]
    case 'mountUnlessMountPoint': {
      const call = tmpfsCall(step) as MountCall
      return ['mountUnlessMountPoint', normalPath(step.path), call.source, call.fstype, call.flags, call.data, c.AT_SYMLINK_NOFOLLOW | c.AT_STATX_DONT_SYNC, c.STATX_TYPE, c.STATX_ATTR_MOUNT_ROOT]
    }
  }
}

/** A mount step's failure as its members give it: the mount's, or the mount-point check's. */
function mountStepError(step: MountStep, syscall: string, failure: IoFailure): HostError {
  const errno = Math.abs(failure.errno ?? osErrno.EIO)
  if (syscall === 'mount') return failure.detail ? toHostError(failure, 'mount', step.path) : errnoError(errno, 'mount', step.path, describeMountCall(tmpfsCall(step) as MountCall))
  if (errno === osErrno.ENOENT) return new HostError('ENOENT', 'isMountPoint', step.path, 'no such file or directory')
  return failure.detail ? toHostError(failure, 'statx', normalPath(step.path)) : errnoError(errno, 'statx', normalPath(step.path))
}

/**
 * The one mount(2) of a step's new tmpfs, which the I/O worker makes within the steps; undefined for
 * any other mount (a bind, a remount, a propagation change, another filesystem, one whose source
 * may hang), made as the separate calls.
 */
function tmpfsCall(step: MountStep): MountCall | undefined {
  const request: MountRequest = { ...step.mount, target: step.path }
  if (request.fstype !== 'tmpfs' || request.bind || request.remount || request.propagation !== undefined) return undefined
  const calls = planMount(request)
  const call = calls[0]
  return calls.length === 1 && call !== undefined && call.keepLockedFlags !== true ? call : undefined
}

/**
 * The Host port on Linux. Create it with {@link createLinuxHost}. Needs root (CAP_SYS_ADMIN) for
 * mounts and loop devices; file calls work for any user within their permissions.
 *
 * One class in one file, longer than the others: each method is one member of the Host port, most
 * a few lines over the same call runner, io workers and mount table, which stay `#private` so that
 * every call goes through the runner's batching and deadlines. The capabilities with state of their
 * own are their own files (loop devices, filesystems, sub paths, block devices).
 */
export class LinuxHost implements Host {
  readonly blockDevices: BlockDevices
  readonly filesystems: Filesystems
  readonly subPaths: SubPaths
  readonly selinux: SELinux
  /** Present when the kernel has the loop driver (`/dev/loop-control`); see {@link createLinuxHost}. */
  declare readonly loopDevices?: LoopDevices
  readonly #options: ResolvedLinuxHostOptions
  readonly #runner: CallRunner
  readonly #sys: Sys
  readonly #io: IoWorkers
  readonly #table: MountTable
  /** Recursive mkdirs in flight, by directory: concurrent callers share one. */
  readonly #making = new Map<string, Promise<boolean>>()
  /**
   * Calls of the host other than an lstat, so far. An lstat joins a queued one only while this and
   * the workers' dispatches stand still: one asked after another call (a remove, a mkdir) is never
   * answered from before it.
   */
  #otherCalls = 0
  readonly #lstats = new SharedReads<FileInfo | null>(() => this.#io.dispatches + this.#otherCalls)
  /** {@link #sys} without counting: for the lstats themselves. */
  readonly #lstatSys: Sys
  /** The root every path beneath it is resolved in (see {@link LinuxHost.lockRoot}), while its lock is held. */
  #root: IoRoot | undefined

  constructor(options: LinuxHostOptions = {}, capabilities: { loopDevices: boolean } = { loopDevices: true }) {
    this.#options = resolveLinuxHostOptions(options)
    this.#runner = new CallRunner({ clock: this.#options.clock, timeoutMs: this.#options.callTimeoutMs, maxStalledCalls: this.#options.maxStalledCalls })
    // One worker per call that may be stuck, and one more for the rest.
    this.#io = new IoWorkers({ maxWorkers: this.#options.maxStalledCalls + 1, stallMs: IO_STALL_MS })
    this.#lstatSys = createSys(this.#runner, libc, {
      keyOf: (path) => this.#keyOf(path),
      freshKeyOf: async (path) => {
        await this.#table.entries()
        return this.#keyOf(path)
      },
    })
    this.#sys = this.#counting(this.#lstatSys)
    this.#table = new MountTable(
      libc,
      '/proc/self/mountinfo',
      () => this.#sys.fs('read', '/proc/self/mountinfo', (call) => this.#io.run<string>(['readFile', '/proc/self/mountinfo', true], call), { key: '/proc' }),
      { ordered: true },
    )
    const sys = this.#sys
    if (capabilities.loopDevices) {
      const mountPointsOf = async (device: string) => (await this.mountsOfDevice(device)).map((entry) => entry.target)
      ;(this as { loopDevices?: LoopDevices }).loopDevices = createLoopDevices(sys, { mountPointsOf })
    }
    this.blockDevices = createBlockDevices(sys)
    this.filesystems = createFilesystems({
      run: spawnTools(this.#options.toolTimeoutMs, this.#options.toolEnv),
      requireDevice: async (device, syscall) => {
        await sys.fs(syscall, device, () => stat(device))
      },
      isMounted: async (device) => (await this.mountsOfDevice(device)).length > 0,
      deviceSize: (device) => this.blockDevices.size(device),
    })
    this.subPaths = createSubPaths({
      sys,
      beneathRoot: (path) => this.#beneathRoot(path),
      stat: (path) => this.stat(path),
      mkdirAll: (path, mode) => this.mkdir(path, { recursive: true, mode }),
      createFile: (path, mode) => this.writeFile(path, '', { mode }),
      bind: (source, target) => this.#mountCall({ source, target, fstype: null, flags: c.MS_BIND, data: null }, this.#keyOf(target)).finally(() => this.#table.invalidate()),
      remountReadOnly: (source, target) => this.#remountReadOnly(source, target),
    })
    const enforce = this.#options.selinuxEnforcePath
    this.selinux = {
      enabled: () => sys.fs('access', enforce, () => access(enforce)).then(
        () => true,
        () => false,
      ),
    }
  }

  // Every call but an lstat counts, so that no lstat asked after it shares one queued before it.
  #counting(sys: Sys): Sys {
    return {
      libc: sys.libc,
      raw: (...args) => {
        this.#otherCalls++
        return sys.raw(...args)
      },
      call: (...args) => {
        this.#otherCalls++
        return sys.call(...args)
      },
      fs: (...args) => {
        this.#otherCalls++
        return sys.fs(...args)
      },
    }
  }

  /** Calls past their deadline that have not returned (each holds a threadpool thread). */
  stalledCalls(): readonly StalledCall[] {
    return this.#runner.stalled()
  }

  /**
   * Calls started and not returned yet, stalled ones included. While there is one, node's own exit
   * may wait for it forever (it joins the thread making it): end the process with {@link exitNow}.
   */
  callsInFlight(): number {
    return this.#runner.inFlight
  }

  /**
   * Ends the process at once with `code` (_exit(2)): node's exit joins every thread, and one blocked
   * in the kernel on a hung filesystem never returns. No exit handler runs; mounts stay as they are.
   */
  exitNow(code: number): never {
    return exitNow(code)
  }

  /** How many times the mount table was read from the kernel (the snapshot is reused otherwise). */
  get mountTableReads(): number {
    return this.#table.reads
  }

  /** Releases the descriptor kept open on /proc/self/mountinfo. The host keeps working (it reopens). */
  close(): void {
    this.#table.close()
    this.#io.close()
  }

  // ---- files ----

  lstat(path: string): Promise<FileInfo | null> {
    // Identical lstats queued together share one call (shared-reads.ts: tear-down checks).
    return this.#lstats.read(path, () => this.#lstatSys.fs('lstat', path, (call) => this.#io.run<FileFields | null>(['lstat', path], call)).then((fields) => fields && toFileInfo(fields)))
  }

  stat(path: string): Promise<FileInfo | null> {
    return this.#sys.fs('stat', path, (call) => this.#io.run<FileFields | null>(['stat', path], call)).then((fields) => fields && toFileInfo(fields))
  }

  async mkdir(path: string, options?: { readonly recursive?: boolean; readonly mode?: number }): Promise<void> {
    const mode = options?.mode ?? 0o777
    if (options?.recursive !== true) {
      await this.#sys.fs('mkdir', path, (call) => this.#io.run(['mkdir', path, mode], call))
      return
    }
    await this.#mkdirAll(normalPath(path), mode)
  }

  /**
   * mkdir -p as one call on the I/O worker: mkdir(2) of `path`, and only when a parent is missing
   * the walk up and down that node's recursive mkdir makes (an existing file at `path` is EEXIST,
   * as `mkdir -p` says). A pod's volumes set up at once all need the same missing parents
   * (`pods/<uid>/volumes/<plugin>`): their calls go to the worker in one batch and are made one
   * after another, so the first makes the parents and the rest find them. Callers asking for the
   * same path at once share one call.
   */
  #mkdirAll(path: string, mode: number): Promise<boolean> {
    const running = this.#making.get(path)
    if (running) return running
    const making = this.#sys.fs('mkdir', path, (call) => this.#io.run<boolean>(['mkdirp', path, mode], call)).finally(() => this.#making.delete(path))
    this.#making.set(path, making)
    return making
  }

  async readdir(path: string): Promise<readonly string[]> {
    const names = await this.#readdir(path)
    return names.sort()
  }

  #readdir(path: string): Promise<string[]> {
    return this.#sys.fs('readdir', path, (call) => this.#io.run<string[]>(['readdir', path], call))
  }

  readFile(path: string): Promise<Uint8Array> {
    return this.#sys.fs('read', path, (call) => this.#io.run<Uint8Array>(['readFile', path, false], call))
  }

  async writeFile(path: string, data: Uint8Array | string, options?: { readonly mode?: number }): Promise<void> {
    const mode = options?.mode ?? 0o666
    // A large file (a disk image) is written by node:fs from the caller's buffer: sent to the
    // worker, its data would be copied first.
    if (data.length > LARGE_WRITE && !this.#isBeneathRoot(path)) await this.#sys.fs('write', path, () => writeFile(path, data, { mode }))
    else await this.#sys.fs('write', path, (call) => this.#io.run(['writeFile', path, data, mode], call))
  }

  async rename(from: string, to: string): Promise<void> {
    await this.#sys.fs('rename', from, (call) => this.#io.run(['rename', from, to], call))
  }

  async symlink(target: string, path: string): Promise<void> {
    await this.#sys.fs('symlink', path, (call) => this.#io.run(['symlink', target, path], call))
  }

  readlink(path: string): Promise<string> {
    return this.#sys.fs('readlink', path, (call) => this.#io.run<string>(['readlink', path], call))
  }

  async remove(path: string): Promise<void> {
    // unlink(2) of a directory is EISDIR on Linux: then it is rmdir (EBUSY on a mount point, ENOTEMPTY).
    await this.#sys.fs('unlink', path, (call) =>
      this.#io.run(['remove', path], call).catch((err: IoFailure) => {
        throw err.syscall === 'rmdir' ? toHostError(err, 'rmdir', path) : err
      }),
    )
  }

  /**
   * One call on the I/O worker: per path a statx that tells a mount root (the kernel's answer,
   * current whether or not the mount table is), then the remove. A path the current table lists is
   * a mount point known with no call: the paths before it are the one call, and from it on (and on
   * a kernel whose statx cannot tell a mount root) each path is checked and removed as two calls.
   */
  async removeUnmounted(paths: readonly string[], options?: RemoveUnmountedOptions): Promise<void> {
    const normalized = paths.map(normalPath)
    const first = normalized[0]
    if (first === undefined) return
    const unmountLast = options?.unmountLast === true
    // A path the current table lists is a mount point known with no call: the paths before it are
    // the worker's call, and the check of it ends the rest (EBUSY) with no call either, or, the last
    // one to be unmounted, is unmounted as unmount does it (under its own filesystem's deadline: a
    // hung mount must not hold the calls of the disk the others are on).
    const last = this.#table.lastTargets()
    const listed = last?.current ? normalized.findIndex((p) => last.targets.has(p)) : -1
    const upTo = listed < 0 ? normalized.length : listed
    let from = 0
    if (upTo > 0) {
      let done: RemoveUnmounted
      try {
        done = await this.#sys.fs('unlink', first, (call) =>
          this.#io.run<RemoveUnmounted>(
            [
              'removeUnmounted',
              normalized.slice(0, upTo),
              c.AT_SYMLINK_NOFOLLOW | c.AT_STATX_DONT_SYNC,
              c.STATX_TYPE,
              c.STATX_ATTR_MOUNT_ROOT,
              unmountLast && upTo === normalized.length,
              c.UMOUNT_NOFOLLOW,
            ],
            call,
          ),
        )
      } finally {
        if (unmountLast) this.#table.invalidate()
      }
      const [stoppedAt, errno, syscall, detail] = done
      from = stoppedAt
      const path = paths[stoppedAt]
      if (path === undefined) return
      if (stoppedAt < upTo) {
        if (syscall === 'statx' && errno === osErrno.EBUSY) throw new HostError('EBUSY', 'remove', path, 'a mount point')
        // The unmount's own error, as unmount gives it.
        if (syscall === 'umount2') throw errnoError(errno, 'umount', path)
        if (errno !== 0) throw errnoError(errno, syscall, path, detail)
      }
    }
    await removeUnmountedOneByOne(this, paths.slice(from), unmountLast ? { unmountLast } : undefined)
  }

  /**
   * One call on the I/O worker: each step the system calls its member makes (lstat, mkdir or
   * node's `mkdir -p`, stat and chmod, open/write/close), one after another on the worker's thread.
   * A step's failure is that member's HostError (its call name and path). A file too large for the
   * worker (see writeFile) makes the steps the separate calls.
   */
  async fileSteps(steps: readonly FileStep[]): Promise<number> {
    const first = steps[0]
    if (first === undefined) return 0
    if (steps.some((step) => step.op === 'writeFile' && step.data.length > LARGE_WRITE)) return fileStepsOneByOne(this, steps)
    // A mount the worker does not make within the steps (see tmpfsCall), or whose target the table
    // lists (a mount point known with no call, a hung one included): the separate calls there.
    const last = this.#table.lastTargets()
    const split = steps.findIndex((step) => step.op === 'mountUnlessMountPoint' && (tmpfsCall(step) === undefined || last?.targets.has(normalPath(step.path)) === true))
    if (split >= 0) {
      const made = await this.fileSteps(steps.slice(0, split))
      if (made < split) return made
      await fileStepsOneByOne(this, steps.slice(split, split + 1))
      return split + 1 + (await this.fileSteps(steps.slice(split + 1)))
    }
    const io = steps.map(toIoStep)
    const mounting = steps.some((step) => step.op === 'mountUnlessMountPoint')
    let done: FileStepsDone
    try {
      done = await this.#sys.fs(FILE_STEP_SYSCALLS[first.op] ?? first.op, io[0]?.[1] ?? first.path, (call) => this.#io.run<FileStepsDone>(['steps', io], call))
    } finally {
      if (mounting) this.#table.invalidate()
    }
    if (done.length === 1) return done[0]
    // A symlink at a mount step's target, or a kernel whose statx cannot tell: decided here.
    if (done.length === 2) return done[0] + (await fileStepsOneByOne(this, steps.slice(done[0])))
    const [at, syscall, failure] = done
    const step = steps[at]
    if (step?.op === 'mountUnlessMountPoint') throw mountStepError(step, syscall, failure)
    throw toHostError(failure, FILE_STEP_SYSCALLS[syscall] ?? syscall, io[at]?.[1] ?? '')
  }

  removeAll(path: string): Promise<void> {
    return removeAll(
      {
        lstat: (p) => this.lstat(p),
        readdir: (p) => this.#readdir(p),
        rmdir: (p) => this.#sys.fs('rmdir', p, (call) => this.#io.run(['rmdir', p], call)),
        unlink: (p) => this.#sys.fs('unlink', p, (call) => this.#io.run(['unlink', p], call)),
        canonical: (p) => this.#canonical(p),
        mounts: () => this.mounts(),
      },
      path,
    )
  }

  async chmod(path: string, mode: number): Promise<void> {
    await this.#sys.fs('chmod', path, (call) => this.#io.run(['chmod', path, mode], call))
  }

  async lchown(path: string, uid: number, gid: number): Promise<void> {
    await this.#sys.fs('lchown', path, (call) => this.#io.run(['lchown', path, uid, gid], call))
  }

  /** Mounts below `path` and processes using it: what makes an unmount of it fail with EBUSY. */
  async holders(path: string): Promise<PathHolders> {
    return findHolders(await this.#canonical(path), await this.#table.entries())
  }

  /** Appends (O_APPEND|O_CREAT, mode 0600); with `sync`, returns once the data is on stable storage (fdatasync). */
  async appendFile(path: string, data: Uint8Array | string, options?: { readonly sync?: boolean }): Promise<void> {
    await this.#sys.fs('append', path, (call) => this.#io.run(['append', path, data, options?.sync === true], call))
  }

  /**
   * pwrite(2) into an existing file (no O_CREAT), a short write carried on; with `sync`, fdatasync
   * before it returns. One call on the I/O worker.
   */
  async writeFileAt(path: string, offset: number, data: Uint8Array, options?: { readonly sync?: boolean }): Promise<void> {
    if (!Number.isSafeInteger(offset) || offset < 0) throw new HostError('EINVAL', 'pwrite', path, `invalid offset ${offset}`)
    await this.#sys.fs('pwrite', path, (call) => this.#io.run(['pwrite', path, offset, data, options?.sync === true], call))
  }

  /** fsync(2) of a file: its data and metadata on stable storage. */
  async syncFile(path: string): Promise<void> {
    await this.#sys.fs('fsync', path, (call) => this.#io.run(['fsync', path], call))
  }

  /**
   * kubevol's exclusive lock on `rootDir` (root-lock.ts); the directory is made when missing. Held,
   * it makes `rootDir` this host's root until it is released: the root is opened once as a
   * directory descriptor, and every path beneath it that a call names is resolved from that
   * descriptor by the kernel (openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
   * RESOLVE_NO_MAGICLINKS, on the I/O worker): a symlink at any level below the root fails the call
   * with ELOOP, and the call acts on what that one resolution found (see io-worker-source.ts).
   */
  async lockRoot(rootDir: string): Promise<RootLock> {
    const dir = normalPath(rootDir)
    await this.mkdir(dir, { recursive: true, mode: 0o750 })
    const held = lockRoot(this.#sys.libc(), dir, process.pid)
    if (!('fd' in held)) return held
    const root = this.#holdRoot(dir, held.fd)
    return {
      locked: true,
      release: async () => {
        this.#dropRoot(root)
        await held.lock.release()
      },
    }
  }

  /**
   * Makes `rootDir` the root without the lock (the volume manager's run): opened once, as
   * {@link LinuxHost.lockRoot} opens it. The root already held gives a handle that leaves it.
   */
  async openRoot(rootDir: string): Promise<RootHandle> {
    const dir = normalPath(rootDir)
    const current = this.#root
    if (current?.[0].includes(dir)) return { close: async () => {} }
    await this.mkdir(dir, { recursive: true, mode: 0o750 })
    const fd = await this.#sys.fs('open', dir, () => Promise.resolve(openSync(dir, c.O_PATH | c.O_DIRECTORY | c.O_CLOEXEC)))
    const root = this.#holdRoot(dir, fd)
    let open = true
    return {
      close: async () => {
        if (!open) return
        open = false
        this.#dropRoot(root)
        closeSync(fd)
      },
    }
  }

  #holdRoot(dir: string, fd: number): IoRoot {
    const real = readlinkSync(`/proc/self/fd/${fd}`)
    const root: IoRoot = [dir === real ? [dir] : [dir, real], fd, real]
    this.#root = root
    this.#io.setRoot(root)
    return root
  }

  #dropRoot(root: IoRoot): void {
    if (this.#root !== root) return
    this.#root = undefined
    this.#io.setRoot(null)
  }

  /** True when `path` is strictly beneath the root (as the worker decides it; see {@link IoRoot}). */
  #isBeneathRoot(path: string): boolean {
    return this.#beneathRoot(path) !== undefined
  }

  /** The root's descriptor and `path` relative to it, when `path` is strictly beneath the root. */
  #beneathRoot(path: string): BeneathRoot | undefined {
    const root = this.#root
    if (root === undefined) return undefined
    for (const name of root[0]) {
      if (path.length > name.length + 1 && path.startsWith(name) && path.charCodeAt(name.length) === 47) {
        const relative = path
          .slice(name.length + 1)
          .split('/')
          .filter((part) => part !== '' && part !== '.')
          .join('/')
        return relative === '' ? undefined : { rootFd: root[1], relative }
      }
    }
    return undefined
  }

  /** Sets the size of a regular file (a sparse extension or a cut). ENOENT when it does not exist. */
  async truncate(path: string, size: number): Promise<void> {
    await this.#sys.fs('truncate', path, (call) => this.#io.run(['truncate', path, size], call))
  }

  // ---- mounts ----

  async mount(request: MountRequest): Promise<void> {
    const calls = planMount(request)
    // A hung mount blocks on its source (a dead NFS server), not on the directory it mounts onto.
    const key = request.bind ? this.#keyOf(request.source) : request.remount ? this.#keyOf(request.target) : `mount:${request.source}`
    try {
      for (const [index, call] of calls.entries()) {
        try {
          await this.#mountCall(call, key)
        } catch (err) {
          // A bind that was meant to be read-only must not stay writable.
          if (index > 0 && request.bind && !request.remount) await this.#detach(request.target)
          throw err
        }
      }
    } finally {
      this.#table.invalidate()
    }
  }

  async unmount(target: string, options?: UnmountOptions): Promise<void> {
    const flags = (options?.lazy ? c.MNT_DETACH : 0) | (options?.noFollow === false ? 0 : c.UMOUNT_NOFOLLOW)
    try {
      await this.#sys.call('umount', target, (_, call) => this.#io.run(['umount2', target, flags], call))
    } finally {
      this.#table.invalidate()
    }
  }

  /** The whole mount table (`/proc/self/mountinfo`), in mount order, with Linux's optional fields. */
  mounts(): Promise<readonly LinuxMountEntry[]> {
    return this.#table.entries()
  }

  /**
   * True when `path` is a mount point. A path the mount table lists is one, answered without
   * touching the filesystem mounted there (a hung NFS mount point answers at once); the table is
   * read again first when it may be out of date, since the mount may be gone. A path the table
   * does not list is looked at with one statx(2) on its parent's filesystem: the kernel resolves
   * the path (a parent that is a symlink included), and STATX_ATTR_MOUNT_ROOT (Linux 5.8) also sees
   * a mount made since the table was read, binds of the same filesystem included. ENOENT when
   * missing.
   *
   * Callers do not wait for a table read to say no: during a burst of mounts the table is out of
   * date nearly all the time, and every set-up's check used to queue behind a read of it.
   */
  async isMountPoint(path: string): Promise<boolean> {
    const normalized = normalPath(path)
    let last = this.#table.lastTargets() ?? { targets: await this.#table.targets(), current: true }
    // A target in the table is a real path (the kernel prints the directories it is mounted
    // below): the path as given naming one is that mount point, with no call at all.
    if (last.targets.has(normalized)) {
      if (!last.current) last = { targets: await this.#table.targets(), current: true }
      if (last.targets.has(normalized)) return true
    }
    const { ret, errno, buf } = (await this.#sys.raw('statx', normalized, (_, call) =>
      this.#io.run<SysResult>(['statx', normalized, c.AT_SYMLINK_NOFOLLOW | c.AT_STATX_DONT_SYNC, c.STATX_TYPE], call),
    )) as SysResult & { readonly buf?: Uint8Array }
    if (ret < 0) {
      if (errno === osErrno.ENOENT) throw new HostError('ENOENT', 'isMountPoint', path, 'no such file or directory')
      throw errnoError(errno, 'statx', normalized)
    }
    const found = readStatx(buf as Uint8Array)
    if ((found.stx_mode & c.S_IFMT) === c.S_IFLNK) {
      // Beneath the root a symlink is never followed: it is no mount point itself.
      if (this.#isBeneathRoot(normalized)) return false
      // Elsewhere, the last component is a symlink: a mount point only if what it names is one.
      const resolved = await this.#realpath(normalized)
      return (await this.#table.targets()).has(resolved)
    }
    if ((found.stx_attributes_mask & MOUNT_ROOT) !== 0n) return (found.stx_attributes & MOUNT_ROOT) !== 0n
    // An older kernel: the table, read again, or a device number that differs from the parent's
    // (mount-utils' IsLikelyNotMountPoint test).
    const where = await this.#canonical(normalized)
    if ((await this.#table.targets()).has(where)) return true
    const info = await this.lstat(where)
    const parent = where === '/' ? null : await this.lstat(where.slice(0, where.lastIndexOf('/')) || '/')
    return info !== null && parent !== null && parent.dev !== info.dev
  }

  /**
   * The other mount points that show `path` (see the Host port; mount-utils `GetMountRefs`). A
   * mount point in the table is answered from it without touching its filesystem (a hung one
   * included); any other path is resolved first. Missing, or on a filesystem that no longer
   * answers (EIO, EACCES, ENODEV): no references, as mount-utils says.
   */
  async mountReferences(path: string): Promise<readonly string[]> {
    const normalized = normalPath(path)
    let where = normalized
    if (!(await this.#table.targets()).has(normalized)) {
      try {
        where = await this.#realpath(normalized)
      } catch (err) {
        if (isHostError(err, 'ENOENT', 'EIO', 'EACCES', 'ENODEV')) return []
        throw err
      }
    }
    return mountReferencesIn(await this.#table.entries(), where)
  }

  /** The mounts of the filesystem on `device` (a block device node), by its `major:minor`. */
  async mountsOfDevice(device: string): Promise<readonly MountEntry[]> {
    const info = await this.#sys.fs('stat', device, () => stat(device))
    if (!info.isBlockDevice()) throw new HostError('ENOTBLK', 'stat', device, 'not a block device')
    return mountsOfDevice(await this.#table.entries(), deviceNumber(info.rdev))
  }

  async statfs(path: string): Promise<FsStats> {
    return toFsStats(await this.#statfs(path))
  }

  // ---- internals ----

  async #statfs(path: string): Promise<Partial<StatfsResult>> {
    const buf: Partial<StatfsResult> = {}
    const at = this.#beneathRoot(path)
    if (at === undefined) {
      await this.#sys.call('statfs', path, (l) => l.statfs(path, buf))
      return buf
    }
    // Beneath the root: the path opened with no symlink at any level, then fstatfs(2) of that descriptor.
    const fd = await openBeneathRoot(this.#sys, at, path, c.O_PATH | c.O_CLOEXEC, 'statfs')
    try {
      await this.#sys.call('statfs', path, (l) => l.fstatfs(fd, buf))
    } finally {
      this.#sys.libc().sync.close(fd)
    }
    return buf
  }

  async #mountCall(call: MountCall, key: string): Promise<void> {
    let flags = call.flags
    if (call.keepLockedFlags) flags |= lockedFlags(Number((await this.#statfs(call.target)).f_flags ?? 0))
    const planned = { ...call, flags }
    await this.#sys.call('mount', call.target, (_, ctx) => this.#io.run(['mount', planned.source, planned.target, planned.fstype, planned.flags, planned.data], ctx), {
      key,
      detail: () => describeMountCall(planned),
    })
  }

  async #remountReadOnly(source: string, target: string): Promise<void> {
    try {
      await this.#mountCall({ source, target, fstype: null, flags: c.MS_BIND | c.MS_REMOUNT | c.MS_RDONLY, data: null, keepLockedFlags: true }, this.#keyOf(target))
    } catch (err) {
      await this.#detach(target)
      throw err
    } finally {
      this.#table.invalidate()
    }
  }

  async #detach(target: string): Promise<void> {
    await this.#sys.call('umount', target, (_, call) => this.#io.run(['umount2', target, c.MNT_DETACH | c.UMOUNT_NOFOLLOW], call)).catch(() => undefined)
  }

  // `path` with every symlink resolved; beneath the root, `path` itself when it has none (else ELOOP).
  #realpath(path: string): Promise<string> {
    return this.#sys.fs('realpath', path, (call) => this.#io.run<string>(['realpath', path], call))
  }

  // `path` with its parent directory resolved; the last component is not followed.
  async #canonical(path: string): Promise<string> {
    const normalized = normalPath(path)
    if (normalized === '/') return '/'
    const parent = dirname(normalized)
    const resolvedParent = await this.#realpath(parent)
    return joinPath(resolvedParent, basename(normalized))
  }

  // The filesystem a path is on, for quarantine: the target of the mount holding it in the last snapshot.
  #keyOf(path: string): string {
    // The nearest ancestor that is a mount target: O(depth), whatever the size of the table. Asked
    // on every call, so a path already absolute and normal is walked up as it is, by slicing.
    const targets = this.#table.peekTargets()
    let p = normalPath(path)
    for (;;) {
      if (targets.has(p)) return p
      const slash = p.lastIndexOf('/')
      if (slash <= 0) return '/'
      p = p.slice(0, slash)
    }
  }
}
