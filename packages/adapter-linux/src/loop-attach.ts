/**
 * Attaching a file to a free loop device: LOOP_CTL_GET_FREE on /dev/loop-control, then
 * LOOP_CONFIGURE (Linux ≥ 5.8) or LOOP_SET_FD + LOOP_SET_STATUS64 before it. A disk image
 * (`regularFile`) is opened once with openat2, no symlink followed at any level, checked and
 * attached through that one descriptor. The write side of `loop-devices.ts`.
 */
import { stat } from 'node:fs/promises'
import { HostError } from '@kubevol/core'
import * as c from './constants.js'
import { errnoError } from './errno.js'
import type { LoopInfo64 } from './libc.js'
import { STATX_SIZE, readStatx } from './libc.js'
import { type FileIdentity, type LoopLookup, withFd } from './loop-lookup.js'
import type { Sys } from './sys.js'

const LOOP_CONTROL = '/dev/loop-control'
// Another process may take the free device between GET_FREE and CONFIGURE (EBUSY): try again.
const ATTACH_ATTEMPTS = 16
const EINVAL = 22
const EBUSY = 16
const ENOTTY = 25

/** The file name the kernel keeps for `losetup -l` (at most 63 bytes, NUL-terminated). */
export function loopFileName(file: string): Uint8Array {
  const bytes = new Uint8Array(c.LO_NAME_SIZE)
  bytes.set(new TextEncoder().encode(file).subarray(0, c.LO_NAME_SIZE - 1))
  return bytes
}

/** glibc `makedev`. */
export function makedev(major: number, minor: number): number {
  return Number(
    ((BigInt(major) & 0xfffn) << 8n) |
      ((BigInt(major) & ~0xfffn) << 32n) |
      (BigInt(minor) & 0xffn) |
      ((BigInt(minor) & ~0xffn) << 12n),
  )
}

/**
 * The loop device of `file`: the first one `find` names, else a free one attached now. Refuses
 * what is neither a regular file nor a block device, and a block device in use (EBUSY). With
 * `regularFile`, see {@link attachImageFile}.
 */
export async function attachLoop(sys: Sys, lookup: Pick<LoopLookup, 'find' | 'findBacking'>, file: string, readOnly: boolean, regularFile: boolean): Promise<string> {
  if (regularFile) return attachImageFile(sys, lookup.findBacking, file, readOnly)
  const [existing] = await lookup.find(file)
  if (existing) return existing
  const info = await sys.fs('stat', file, () => stat(file))
  if (!info.isFile() && !info.isBlockDevice()) throw new HostError('EINVAL', 'losetup', file, 'not a regular file or a block device')
  // A block device is opened exclusively: the kernel refuses (EBUSY) while a mounted filesystem
  // or another exclusive holder claims it, so a filesystem in use is never attached a second time.
  const flags = (readOnly ? c.O_RDONLY : c.O_RDWR) | (info.isBlockDevice() ? c.O_EXCL : 0)
  const opened = withFd(sys, file, flags, async (fileFd) => {
    // What was opened, not what was looked at: the path may have been swapped in between.
    const { type } = await identityOf(sys, fileFd, file)
    if (type !== c.S_IFREG && type !== c.S_IFBLK) throw new HostError('EINVAL', 'losetup', file, 'not a regular file or a block device')
    if (type === c.S_IFBLK && !info.isBlockDevice()) throw new HostError('EINVAL', 'losetup', file, 'replaced by a block device while being attached')
    return attachFd(sys, file, fileFd, readOnly)
  })
  return opened.catch((err: unknown) => {
    if (err instanceof HostError && err.code === 'EBUSY' && err.syscall === 'open') {
      throw new HostError('EBUSY', 'losetup', file, 'the block device is in use (mounted, or held open exclusively elsewhere)', { cause: err })
    }
    throw err
  })
}

/**
 * A disk image, opened once and used through that descriptor: `openat2` with
 * RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS, so a symlink at any level of the path (a symlinked
 * directory, `/proc/self`, a `/proc/<pid>/fd/N` magic link) fails the open with ELOOP and nothing is
 * followed; then the descriptor must be a regular file (EINVAL otherwise) on a filesystem that
 * stores data: a file of a kernel pseudo-filesystem (`/proc/<pid>/mem`, sysfs, debugfs...) says it
 * is regular but is not a disk image (EINVAL). The loop device that already serves that very file
 * is returned; else the same descriptor is handed to LOOP_CONFIGURE, so what was checked is what
 * is attached.
 */
async function attachImageFile(sys: Sys, findBacking: LoopLookup['findBacking'], file: string, readOnly: boolean): Promise<string> {
  const flags = (readOnly ? c.O_RDONLY : c.O_RDWR) | c.O_CLOEXEC
  const opened = await sys.raw('openat2', file, (l) => l.openat2(AT_FDCWD, file, flags, 0, c.RESOLVE_NO_SYMLINKS | c.RESOLVE_NO_MAGICLINKS))
  if (opened.ret < 0) throw imageOpenError(opened.errno, file)
  const fd = opened.ret
  try {
    const identity = await identityOf(sys, fd, file)
    if (identity.type !== c.S_IFREG) throw new HostError('EINVAL', 'losetup', file, `not a regular file (${typeName(identity.type)})`)
    const fs: { f_type?: number } = {}
    await sys.call('fstatfs', file, (l) => l.fstatfs(fd, fs))
    const pseudo = PSEUDO_FILESYSTEMS.get(Number(fs.f_type ?? 0) >>> 0)
    if (pseudo) throw new HostError('EINVAL', 'losetup', file, `not a regular file: a file of ${pseudo}, a kernel pseudo-filesystem, is not a disk image`)
    const [existing] = await findBacking(identity)
    if (existing) return existing
    return await attachFd(sys, file, fd, readOnly)
  } finally {
    await sys.call('close', file, (l) => l.close(fd)).catch(() => undefined)
  }
}

/** The open's failure, saying why a fileDisk image is refused. */
function imageOpenError(errno: number, file: string): HostError {
  if (errno === ELOOP) return errnoError(errno, 'openat2', file, 'a symlink at some level of the path: a disk image is opened without following any symlink')
  // A directory cannot be opened for writing; a socket cannot be opened at all.
  if (errno === EISDIR) return new HostError('EINVAL', 'losetup', file, 'not a regular file (a directory)', { cause: errnoError(errno, 'openat2', file) })
  if (errno === ENXIO) return new HostError('EINVAL', 'losetup', file, 'not a regular file', { cause: errnoError(errno, 'openat2', file) })
  if (errno === ENOSYS) return new HostError('ENOTSUP', 'openat2', file, 'the kernel has no openat2 (Linux 5.6): a disk image cannot be opened without following symlinks')
  return errnoError(errno, 'openat2', file)
}

const AT_FDCWD = -100
const ELOOP = 40
const ENOSYS = 38
const EISDIR = 21
const ENXIO = 6
const STATX_INO = 0x100

/** Kernel pseudo-filesystems (linux/magic.h) whose files may say they are regular. */
const PSEUDO_FILESYSTEMS: ReadonlyMap<number, string> = new Map([
  [0x9fa0, 'proc'],
  [0x62656572, 'sysfs'],
  [0x64626720, 'debugfs'],
  [0x74726163, 'tracefs'],
  [0x73636673, 'securityfs'],
  [0x27e0eb, 'cgroup'],
  [0x63677270, 'cgroup2'],
  [0x62656570, 'configfs'],
  [0xcafe4a11, 'bpf'],
  [0xde5e81e4, 'efivarfs'],
  [0x6165676c, 'pstore'],
  [0xf97cff8c, 'selinuxfs'],
  [0x65735543, 'fusectl'],
  [0x42494e4d, 'binfmt_misc'],
  [0x6e736673, 'nsfs'],
])

function typeName(type: number): string {
  const names: Record<number, string> = { [c.S_IFDIR]: 'a directory', [c.S_IFBLK]: 'a block device', [c.S_IFCHR]: 'a character device', [c.S_IFLNK]: 'a symlink', [c.S_IFSOCK]: 'a socket' }
  return names[type] ?? 'a FIFO'
}

/** The file type (S_IFMT bits) and identity of an open descriptor. */
async function identityOf(sys: Sys, fd: number, file: string): Promise<FileIdentity & { type: number }> {
  const buf = new Uint8Array(STATX_SIZE)
  await sys.call('statx', file, (l) => l.statx(fd, '', c.AT_EMPTY_PATH, c.STATX_TYPE | STATX_INO, buf))
  const st = readStatx(buf)
  return { type: st.stx_mode & c.S_IFMT, dev: `${st.stx_dev_major}:${st.stx_dev_minor}`, ino: st.stx_ino }
}

function attachFd(sys: Sys, file: string, fileFd: number, readOnly: boolean): Promise<string> {
  return withFd(sys, LOOP_CONTROL, c.O_RDWR, async (control) => {
    for (let attempt = 0; attempt < ATTACH_ATTEMPTS; attempt++) {
      const n = await sys.call('ioctl', LOOP_CONTROL, (l) => l.ioctl(control, c.LOOP_CTL_GET_FREE, 0), { detail: 'LOOP_CTL_GET_FREE' })
      const device = `/dev/loop${n}`
      await ensureNode(sys, device, n)
      if (await configure(sys, device, fileFd, readOnly, file)) return device
    }
    throw new HostError('EBUSY', 'losetup', file, `no free loop device after ${ATTACH_ATTEMPTS} attempts`)
  })
}

// In a container /dev may lack the node of the device the kernel just allocated.
async function ensureNode(sys: Sys, device: string, n: number): Promise<void> {
  const exists = await sys.fs('stat', device, () => stat(device)).then(
    () => true,
    (err: unknown) => {
      if (err instanceof HostError && err.code === 'ENOENT') return false
      throw err
    },
  )
  if (!exists) await sys.call('mknod', device, (l) => l.mknod(device, c.S_IFBLK | 0o660, makedev(c.LOOP_MAJOR, n)))
}

// True when `device` now serves the file; false when another process took it first (EBUSY).
async function configure(sys: Sys, device: string, fileFd: number, readOnly: boolean, file: string): Promise<boolean> {
  return withFd(sys, device, readOnly ? c.O_RDONLY : c.O_RDWR, async (loopFd) => {
    const info: Partial<LoopInfo64> = { lo_flags: readOnly ? c.LO_FLAGS_READ_ONLY : 0, lo_file_name: loopFileName(file) }
    const config = { fd: fileFd, block_size: 0, info }
    const configured = await sys.raw('ioctl', device, (l) => l.ioctlLoopConfig(loopFd, c.LOOP_CONFIGURE, config))
    if (configured.ret === 0) return true
    if (configured.errno === EBUSY) return false
    if (configured.errno !== EINVAL && configured.errno !== ENOTTY) throw errnoError(configured.errno, 'ioctl', device, 'LOOP_CONFIGURE')
    // Before Linux 5.8: bind the file, then set the flags and the name.
    const set = await sys.raw('ioctl', device, (l) => l.ioctl(loopFd, c.LOOP_SET_FD, fileFd))
    if (set.errno === EBUSY) return false
    if (set.ret < 0) throw errnoError(set.errno, 'ioctl', device, 'LOOP_SET_FD')
    await sys.call('ioctl', device, (l) => l.ioctlSetLoopInfo(loopFd, c.LOOP_SET_STATUS64, info), { detail: 'LOOP_SET_STATUS64' })
    return true
  })
}
