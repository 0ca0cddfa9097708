/**
 * Attaching a file to a free loop device: LOOP_CTL_GET_FREE on /dev/loop-control, then
 * LOOP_CONFIGURE (Linux ≥ 5.8) or LOOP_SET_FD + LOOP_SET_STATUS64 before it. The write side of
 * `loop-devices.ts`.
 */
import { stat } from 'node:fs/promises'
import { HostError } from '@kubevol/core'
import * as c from './constants.js'
import { errnoError } from './errno.js'
import type { LoopInfo64 } from './libc.js'
import { STATX_SIZE, readStatx } from './libc.js'
import { withFd } from './loop-lookup.js'
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
 * what is neither a regular file nor a block device (with `regularFile`, anything but a regular
 * file), and a block device in use (EBUSY).
 */
export async function attachLoop(sys: Sys, find: (file: string) => Promise<readonly string[]>, file: string, readOnly: boolean, regularFile: boolean): Promise<string> {
  const [existing] = await find(file)
  if (existing) return existing
  const info = await sys.fs('stat', file, () => stat(file))
  if (!info.isFile() && !info.isBlockDevice()) throw new HostError('EINVAL', 'losetup', file, 'not a regular file or a block device')
  if (regularFile && !info.isFile()) throw new HostError('EINVAL', 'losetup', file, 'not a regular file')
  // A block device is opened exclusively: the kernel refuses (EBUSY) while a mounted filesystem
  // or another exclusive holder claims it, so a filesystem in use is never attached a second
  // time. O_NOFOLLOW when only a regular file will do: a symlink swapped in is not followed.
  const flags = (readOnly ? c.O_RDONLY : c.O_RDWR) | (info.isBlockDevice() ? c.O_EXCL : 0) | (regularFile ? c.O_NOFOLLOW : 0)
  const opened = withFd(sys, file, flags, async (fileFd) => {
    // What was opened, not what was looked at: the path may have been swapped in between.
    const type = await typeOf(sys, fileFd, file)
    if (regularFile ? type !== c.S_IFREG : type !== c.S_IFREG && type !== c.S_IFBLK) throw new HostError('EINVAL', 'losetup', file, 'not a regular file')
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

/** The file type (S_IFMT bits) of an open descriptor. */
async function typeOf(sys: Sys, fd: number, file: string): Promise<number> {
  const buf = new Uint8Array(STATX_SIZE)
  await sys.call('statx', file, (l) => l.statx(fd, '', c.AT_EMPTY_PATH, c.STATX_TYPE, buf))
  return readStatx(buf).stx_mode & c.S_IFMT
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
