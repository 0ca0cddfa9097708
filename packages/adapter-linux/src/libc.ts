/**
 * The C library through koffi, loaded on first use: importing this package never loads the FFI
 * library, so its pure parts (the mountinfo parser, option parsing) run anywhere.
 *
 * Every call that can block on I/O has an `async` form that runs on a libuv threadpool thread
 * (koffi's `fn.async()` queues a napi async work item) and resolves with the return value and
 * errno of that thread. koffi hands the worker's errno to the main thread before the callback runs;
 * this was checked with hundreds of interleaved calls failing with different errnos.
 *
 * `ioctl` and `open` are variadic in C; koffi cannot call variadic functions asynchronously, so
 * they are bound with a fixed third argument. That is sound on the 64-bit Linux ABIs (x86_64,
 * aarch64, riscv64, ppc64le): the extra argument travels in the same register either way.
 */
import { createRequire } from 'node:module'
import type * as Koffi from 'koffi'

/**
 * Async koffi calls in flight at once; the rest queue here. koffi keeps 8 sets of call memory
 * (`resident_async_pools`) and maps a new set, stack and heap, for every call beyond them, then
 * unmaps it: 2,000 statx calls issued 64 at a time took 141–174 ms with 32 in flight and 49 ms
 * with 8 (node:fs lstat: 17–31 ms). So 8, or more with a bigger threadpool: a call stuck in the
 * kernel keeps its place for good, and the host refuses new calls only once all threads but one
 * are stuck, so there must be room for more stuck calls than that (koffi allows 256 in all).
 */
export function maxAsyncCalls(threadPoolSize = Number(process.env.UV_THREADPOOL_SIZE) || 4): number {
  return Math.min(256, Math.max(8, threadPoolSize + 4))
}

/** What a system call returned: `ret` < 0 means failure, and `errno` says why. */

export interface SysResult {
  readonly ret: number
  readonly errno: number
}

/** `struct loop_info64` (linux/loop.h) as koffi decodes it. */
export interface LoopInfo64 {
  lo_device: number | bigint
  lo_inode: number | bigint
  lo_rdevice: number | bigint
  lo_offset: number | bigint
  lo_sizelimit: number | bigint
  lo_number: number
  lo_encrypt_type: number
  lo_encrypt_key_size: number
  lo_flags: number
  lo_file_name: Uint8Array
  lo_crypt_name: Uint8Array
  lo_encrypt_key: Uint8Array
  lo_init: (number | bigint)[]
}

/** `struct statfs` (64-bit layout). */
export interface StatfsResult {
  f_type: number
  f_bsize: number
  f_blocks: number | bigint
  f_bfree: number | bigint
  f_bavail: number | bigint
  f_files: number | bigint
  f_ffree: number | bigint
  f_frsize: number
  f_flags: number
}

/** The fields of `struct statx` kubevol reads. */
export interface StatxResult {
  readonly stx_mask: number
  readonly stx_attributes: bigint
  readonly stx_mode: number
  readonly stx_ino: bigint
  readonly stx_dev_major: number
  readonly stx_dev_minor: number
  readonly stx_rdev_major: number
  readonly stx_rdev_minor: number
  readonly stx_attributes_mask: bigint
}

/** Size of `struct statx`: the buffer {@link Libc.statx} fills. */
export const STATX_SIZE = 256

/**
 * Reads a `struct statx` the kernel wrote into `buf` (x86_64/aarch64 layout, little-endian as the
 * machines kubevol supports). Passing a plain buffer, rather than a koffi struct decoded into an
 * object, took the main thread's share of an async statx from about 20 µs to 8.
 */
export function readStatx(buf: Uint8Array): StatxResult {
  const view = new DataView(buf.buffer, buf.byteOffset, STATX_SIZE)
  return {
    stx_mask: view.getUint32(0, true),
    stx_attributes: view.getBigUint64(8, true),
    stx_mode: view.getUint16(28, true),
    stx_ino: view.getBigUint64(32, true),
    stx_attributes_mask: view.getBigUint64(56, true),
    stx_rdev_major: view.getUint32(128, true),
    stx_rdev_minor: view.getUint32(132, true),
    stx_dev_major: view.getUint32(136, true),
    stx_dev_minor: view.getUint32(140, true),
  }
}

/** A `struct pollfd` for one descriptor, kept in a buffer koffi passes as is (no struct marshaling). */
export class PollFd {
  readonly buffer = new Uint8Array(8)
  readonly #view = new DataView(this.buffer.buffer)

  constructor(fd: number, events: number) {
    this.#view.setInt32(0, fd, true)
    this.#view.setInt16(4, events, true)
  }

  /** What the last poll returned for it. */
  get revents(): number {
    return this.#view.getInt16(6, true)
  }

  clear(): void {
    this.#view.setInt16(6, 0, true)
  }
}

type Out<T> = Partial<T>

/** openat2's number; the same on every architecture (new system calls share one table). */
const SYS_OPENAT2 = 437

/** The bindings kubevol uses. Async members never block the event loop. */
export interface Libc {
  mount(source: string | null, target: string, fstype: string | null, flags: number, data: string | null): Promise<SysResult>
  umount2(target: string, flags: number): Promise<SysResult>
  open(path: string, flags: number, mode: number): Promise<SysResult>
  openat(dirfd: number, path: string, flags: number, mode: number): Promise<SysResult>
  /**
   * openat2(2) (Linux 5.6): `path` resolved from `dirfd` under the RESOLVE_* flags `resolve`.
   * glibc has no wrapper; this is syscall(SYS_openat2) with a `struct open_how` built per call.
   */
  openat2(dirfd: number, path: string, flags: number, mode: number, resolve: number): Promise<SysResult>
  close(fd: number): Promise<SysResult>
  ioctl(fd: number, request: number, arg: number): Promise<SysResult>
  ioctlGetLoopInfo(fd: number, request: number, info: Out<LoopInfo64>): Promise<SysResult>
  ioctlSetLoopInfo(fd: number, request: number, info: Partial<LoopInfo64>): Promise<SysResult>
  ioctlLoopConfig(fd: number, request: number, config: { fd: number; block_size: number; info: Partial<LoopInfo64> }): Promise<SysResult>
  ioctlGetU64(fd: number, request: number, value: [number | bigint]): Promise<SysResult>
  statfs(path: string, buf: Out<StatfsResult>): Promise<SysResult>
  fstatfs(fd: number, buf: Out<StatfsResult>): Promise<SysResult>
  /** Fills `buf` ({@link STATX_SIZE} bytes); read it with {@link readStatx}. */
  statx(dirfd: number, path: string, flags: number, mask: number, buf: Uint8Array): Promise<SysResult>
  mknod(path: string, mode: number, dev: number): Promise<SysResult>
  /** Synchronous forms of calls that never block (poll with timeout 0) or that benchmarks compare. */
  readonly sync: {
    /** `fds`: a {@link PollFd}'s buffer. */
    poll(fds: Uint8Array, nfds: number, timeoutMs: number): SysResult
    close(fd: number): SysResult
    getpid(): number
    statfs(path: string, buf: Out<StatfsResult>): SysResult
    mount(source: string | null, target: string, fstype: string | null, flags: number, data: string | null): SysResult
    umount2(target: string, flags: number): SysResult
    unshare(flags: number): SysResult
    /** flock(2); with LOCK_NB it never blocks. */
    flock(fd: number, operation: number): SysResult
  }
  /** The async form of getpid, to measure the cost of one trip through the threadpool. */
  getpidAsync(): Promise<number>
}

type KoffiModule = typeof Koffi
type KoffiFunction = ReturnType<Koffi.LibraryHandle['func']>

let loaded: Libc | undefined

/** The koffi module, required on first use. */
function loadKoffi(): KoffiModule {
  return createRequire(import.meta.url)('koffi') as KoffiModule
}

/** True once the bindings were created (tests check that importing the package does not). */
export function isLibcLoaded(): boolean {
  return loaded !== undefined
}

/**
 * The bindings, created on first call. Throws when koffi or the C library cannot be loaded (not
 * Linux, no prebuilt binary for this platform).
 */
export function libc(): Libc {
  loaded ??= bind(loadKoffi())
  return loaded
}

/**
 * Declares every C function and struct kubevol calls, in one place. Longer than 80 lines because
 * it is a table: one koffi declaration per line, and splitting it would only scatter the list of
 * what kubevol asks of the C library.
 */
function bind(koffi: KoffiModule): Libc {
  let lib: Koffi.LibraryHandle
  try {
    lib = koffi.load('libc.so.6')
  } catch {
    // musl and others: the symbols of the running program include the C library.
    lib = koffi.load(null)
  }
  const LoopInfo = koffi.struct('kubevol_loop_info64', {
    lo_device: 'uint64_t',
    lo_inode: 'uint64_t',
    lo_rdevice: 'uint64_t',
    lo_offset: 'uint64_t',
    lo_sizelimit: 'uint64_t',
    lo_number: 'uint32_t',
    lo_encrypt_type: 'uint32_t',
    lo_encrypt_key_size: 'uint32_t',
    lo_flags: 'uint32_t',
    lo_file_name: koffi.array('uint8_t', 64, 'Typed'),
    lo_crypt_name: koffi.array('uint8_t', 64, 'Typed'),
    lo_encrypt_key: koffi.array('uint8_t', 32, 'Typed'),
    lo_init: koffi.array('uint64_t', 2, 'Array'),
  })
  const LoopConfig = koffi.struct('kubevol_loop_config', {
    fd: 'uint32_t',
    block_size: 'uint32_t',
    info: LoopInfo,
    reserved: koffi.array('uint64_t', 8, 'Array'),
  })
  const Statfs = koffi.struct('kubevol_statfs', {
    f_type: 'long',
    f_bsize: 'long',
    f_blocks: 'unsigned long',
    f_bfree: 'unsigned long',
    f_bavail: 'unsigned long',
    f_files: 'unsigned long',
    f_ffree: 'unsigned long',
    f_fsid: koffi.array('int', 2, 'Array'),
    f_namelen: 'long',
    f_frsize: 'long',
    f_flags: 'long',
    f_spare: koffi.array('long', 4, 'Array'),
  })
  if (koffi.sizeof(LoopInfo) !== 232 || koffi.sizeof(LoopConfig) !== 304 || koffi.sizeof(Statfs) !== 120) {
    throw new Error('kubevol: unexpected C struct layout (only 64-bit Linux is supported)')
  }

  const f = {
    mount: lib.func('int mount(const char *source, const char *target, const char *fstype, unsigned long flags, const char *data)'),
    umount2: lib.func('int umount2(const char *target, int flags)'),
    open: lib.func('open', 'int', ['const char *', 'int', 'uint32_t']),
    openat: lib.func('openat', 'int', ['int', 'const char *', 'int', 'uint32_t']),
    // syscall(2) is variadic; bound with fixed arguments, sound on the 64-bit ABIs (see the top).
    syscall4: lib.func('syscall', 'long', ['long', 'int', 'const char *', 'void *', 'size_t']),
    close: lib.func('int close(int fd)'),
    ioctl: lib.func('ioctl', 'int', ['int', 'unsigned long', 'unsigned long']),
    ioctlGetLoopInfo: lib.func('ioctl', 'int', ['int', 'unsigned long', koffi.out(koffi.pointer(LoopInfo))]),
    ioctlSetLoopInfo: lib.func('ioctl', 'int', ['int', 'unsigned long', koffi.pointer(LoopInfo)]),
    ioctlLoopConfig: lib.func('ioctl', 'int', ['int', 'unsigned long', koffi.pointer(LoopConfig)]),
    ioctlGetU64: lib.func('ioctl', 'int', ['int', 'unsigned long', koffi.out(koffi.pointer('uint64_t'))]),
    statfs: lib.func('statfs', 'int', ['const char *', koffi.out(koffi.pointer(Statfs))]),
    fstatfs: lib.func('fstatfs', 'int', ['int', koffi.out(koffi.pointer(Statfs))]),
    statx: lib.func('statx', 'int', ['int', 'const char *', 'int', 'unsigned int', 'void *']),
    mknod: lib.func('mknod', 'int', ['const char *', 'uint32_t', 'uint64_t']),
    poll: lib.func('poll', 'int', ['void *', 'unsigned long', 'int']),
    getpid: lib.func('int getpid()'),
    unshare: lib.func('int unshare(int flags)'),
    flock: lib.func('int flock(int fd, int operation)'),
  }

  // koffi refuses new async calls past a fixed number in flight ("Too many asynchronous calls are
  // running"); a node with hundreds of volumes starts more than that at once. Calls beyond the limit
  // wait their turn here instead of failing.
  const limit = maxAsyncCalls()
  let active = 0
  const waiting: (() => void)[] = []
  // A finished call hands its place to the next waiting one, so no more than `limit` ever run.
  const release = (): void => {
    const next = waiting.shift()
    if (next) next()
    else active--
  }
  // One promise per call, settled from koffi's callback (errno is read there, first).
  const run = (fn: KoffiFunction, args: unknown[]): Promise<SysResult> =>
    new Promise((resolve, reject) => {
      try {
        fn.async(...args, (err: unknown, ret: number) => {
          const errno = ret < 0 ? koffi.errno() : 0
          release()
          if (err) reject(err)
          else resolve({ ret, errno })
        })
      } catch (err) {
        release()
        reject(err)
      }
    })
  const async =
    (fn: KoffiFunction) =>
    (...args: unknown[]): Promise<SysResult> => {
      if (active < limit) {
        active++
        return run(fn, args)
      }
      return new Promise<void>((resolve) => waiting.push(resolve)).then(() => run(fn, args))
    }
  const sync =
    (fn: KoffiFunction) =>
    (...args: unknown[]): SysResult => {
      const ret = fn(...args) as number
      return { ret, errno: ret < 0 ? koffi.errno() : 0 }
    }

  return {
    mount: async(f.mount),
    umount2: async(f.umount2),
    open: async(f.open),
    openat: async(f.openat),
    openat2: (dirfd: number, path: string, flags: number, mode: number, resolve: number) =>
      async(f.syscall4)(SYS_OPENAT2, dirfd, path, new BigUint64Array([BigInt(flags), BigInt(mode), BigInt(resolve)]), 24).then((r) => ({ ret: Number(r.ret), errno: r.errno })),
    close: async(f.close),
    ioctl: async(f.ioctl),
    ioctlGetLoopInfo: async(f.ioctlGetLoopInfo),
    ioctlSetLoopInfo: async(f.ioctlSetLoopInfo),
    ioctlLoopConfig: async(f.ioctlLoopConfig),
    ioctlGetU64: async(f.ioctlGetU64),
    statfs: async(f.statfs),
    fstatfs: async(f.fstatfs),
    statx: async(f.statx),
    mknod: async(f.mknod),
    getpidAsync: () => async(f.getpid)().then((r) => r.ret),
    sync: {
      poll: sync(f.poll),
      close: sync(f.close),
      getpid: () => f.getpid() as number,
      statfs: sync(f.statfs),
      mount: sync(f.mount),
      umount2: sync(f.umount2),
      unshare: sync(f.unshare),
      flock: sync(f.flock),
    },
  } as Libc
}
