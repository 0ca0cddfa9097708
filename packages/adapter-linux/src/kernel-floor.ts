/**
 * The kernel features the Linux host stands on, probed for real rather than read from the version
 * (distributions backport, and a seccomp profile may hide a call): `openat2(2)` (Linux 5.6), which
 * resolves a path beneath the root descriptor without following a symlink at any level, and the new
 * mount API, `open_tree(2)`/`move_mount(2)`/`fsopen(2)` (Linux 5.2), which mounts onto a descriptor.
 *
 * Each call is made through libc's variadic `syscall(2)` (glibc has no wrapper for some of them).
 * A call is missing when it fails with ENOSYS; any other outcome (a descriptor, EPERM for a
 * non-root `fsopen`, EINVAL for the deliberately invalid `move_mount`) means the kernel has it.
 */
import { createRequire } from 'node:module'
import { release as osRelease } from 'node:os'

/** What {@link probeKernelFloor} found. */
export interface KernelFloor {
  /** `uname -r`. */
  readonly release: string
  /** `openat2(2)` exists (Linux 5.6). */
  readonly openat2: boolean
  /** `open_tree(2)`, `move_mount(2)` and `fsopen(2)` exist (Linux 5.2). */
  readonly newMountApi: boolean
}

// x86_64 and aarch64 share these numbers (the generic table since 5.x: every new call has one number).
const SYS_OPEN_TREE = 428
const SYS_MOVE_MOUNT = 429
const SYS_FSOPEN = 430
const SYS_OPENAT2 = 437
const AT_FDCWD = -100
const ENOSYS = 38
const O_PATH = 0o10000000
const O_CLOEXEC = 0o2000000
const OPEN_TREE_CLOEXEC = O_CLOEXEC
const FSOPEN_CLOEXEC = 1

/**
 * Probes the running kernel: opens `/` with `openat2` and `open_tree` (an `O_PATH` descriptor each,
 * closed at once; neither needs a privilege), opens a tmpfs context with `fsopen` (EPERM when not
 * root still proves the call exists) and calls `move_mount` with invalid flags (EINVAL). Mounts
 * nothing. Loads the FFI library (koffi); throws when it cannot be loaded.
 */
export function probeKernelFloor(): KernelFloor {
  const koffi = createRequire(import.meta.url)('koffi') as typeof import('koffi')
  const lib = koffi.load('libc.so.6')
  const syscall = lib.func('long syscall(long, ...)') as (...args: unknown[]) => number
  const close = lib.func('int close(int)') as (fd: number) => number
  // True unless the kernel does not know the call; a descriptor it returned is closed.
  const exists = (...args: unknown[]): boolean => {
    const ret = Number(syscall(...args))
    if (ret >= 0) {
      close(ret)
      return true
    }
    return koffi.errno() !== ENOSYS
  }
  // struct open_how { u64 flags; u64 mode; u64 resolve; }
  const how = Buffer.alloc(24)
  how.writeBigUInt64LE(BigInt(O_PATH | O_CLOEXEC), 0)
  const openat2 = exists(SYS_OPENAT2, 'int', AT_FDCWD, 'str', '/', 'void *', how, 'size_t', how.length)
  const newMountApi =
    exists(SYS_OPEN_TREE, 'int', AT_FDCWD, 'str', '/', 'unsigned int', OPEN_TREE_CLOEXEC) &&
    exists(SYS_MOVE_MOUNT, 'int', -1, 'str', '', 'int', -1, 'str', '', 'unsigned int', 0xffffffff) &&
    exists(SYS_FSOPEN, 'str', 'tmpfs', 'unsigned int', FSOPEN_CLOEXEC)
  return { release: osRelease(), openat2, newMountApi }
}

/**
 * Why the Linux host cannot run on a kernel with `floor`, in one line naming the release and each
 * missing feature with the version that brought it; undefined when nothing is missing.
 */
export function kernelFloorRefusal(floor: KernelFloor): string | undefined {
  const missing = [
    ...(floor.openat2 ? [] : ['openat2 (Linux 5.6)']),
    ...(floor.newMountApi ? [] : ['the new mount API: open_tree, move_mount, fsopen (Linux 5.2)']),
  ]
  if (missing.length === 0) return undefined
  return `the kernel (Linux ${floor.release}) is too old for the Linux host: it lacks ${missing.join(' and ')}; kubevol resolves every path beneath its root with openat2 and mounts onto descriptors: run it on Linux 5.6 or later`
}
