/**
 * The `loopDevices` capability through the loop ioctls: LOOP_CTL_GET_FREE on /dev/loop-control,
 * LOOP_CONFIGURE (Linux ≥ 5.8) or LOOP_SET_FD + LOOP_SET_STATUS64 before it, LOOP_CLR_FD,
 * LOOP_SET_CAPACITY, and LOOP_GET_STATUS64 to learn which file backs a device. A device's status
 * adds its `diskseq` from sysfs, the mount table's mounts of it and an exclusive-open probe.
 */
import { readFile, readdir, stat } from 'node:fs/promises'
import type { LoopDeviceStatus, LoopDevices } from '@kubevol/core'
import { HostError } from '@kubevol/core'
import * as c from './constants.js'
import { errnoError } from './errno.js'
import type { LoopInfo64 } from './libc.js'
import { STATX_SIZE, readStatx } from './libc.js'
import { deviceNumber } from './mountinfo.js'
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

/** What the loop devices need from the rest of the host. */
export interface LoopDeviceEnv {
  /** Where the filesystem on `device` is mounted, from the host's mount table. */
  mountPointsOf(device: string): Promise<readonly string[]>
}

/** The `loopDevices` capability over `sys`. */
export function createLoopDevices(sys: Sys, env: LoopDeviceEnv): LoopDevices {
  const pending = new Map<string, Promise<string>>()
  let bootId: Promise<string> | undefined

  async function withFd<T>(path: string, flags: number, use: (fd: number) => Promise<T>): Promise<T> {
    const fd = await sys.call('open', path, (l) => l.open(path, flags | c.O_CLOEXEC, 0))
    try {
      return await use(fd)
    } finally {
      await sys.call('close', path, (l) => l.close(fd)).catch(() => undefined)
    }
  }

  async function backing(device: string): Promise<{ dev: string; ino: bigint } | null> {
    const info: Partial<LoopInfo64> = {}
    try {
      await withFd(device, c.O_RDONLY, (fd) => sys.call('ioctl', device, (l) => l.ioctlGetLoopInfo(fd, c.LOOP_GET_STATUS64, info), { detail: 'LOOP_GET_STATUS64' }))
    } catch (err) {
      // ENXIO: not attached (any more); ENOENT: no device node.
      if (err instanceof HostError && (err.code === 'ENXIO' || err.code === 'ENOENT')) return null
      throw err
    }
    return { dev: deviceNumber(info.lo_device ?? 0), ino: BigInt(info.lo_inode ?? 0) }
  }

  async function find(file: string): Promise<readonly string[]> {
    const st = await sys.fs('stat', file, () => stat(file, { bigint: true })).catch((err: unknown) => {
      if (err instanceof HostError && err.code === 'ENOENT') return null
      throw err
    })
    if (!st) return []
    const dev = deviceNumber(st.dev)
    // /sys/block/loopN/loop exists only while loopN is attached: no need to open idle devices.
    const names = await sys.fs('readdir', '/sys/block', () => readdir('/sys/block'))
    const found: string[] = []
    for (const name of names.filter((n) => /^loop\d+$/.test(n)).sort((a, b) => Number(a.slice(4)) - Number(b.slice(4)))) {
      const attached = await sys
        .fs('stat', `/sys/block/${name}/loop`, () => stat(`/sys/block/${name}/loop`))
        .then(() => true)
        .catch(() => false)
      if (!attached) continue
      const source = await backing(`/dev/${name}`)
      if (source && source.dev === dev && source.ino === st.ino) found.push(`/dev/${name}`)
    }
    return found
  }

  // True when `device` now serves the file; false when another process took it first (EBUSY).
  async function configure(device: string, fileFd: number, readOnly: boolean, file: string): Promise<boolean> {
    return withFd(device, readOnly ? c.O_RDONLY : c.O_RDWR, async (loopFd) => {
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

  // In a container /dev may lack the node of the device the kernel just allocated.
  async function ensureNode(device: string, n: number): Promise<void> {
    const exists = await sys.fs('stat', device, () => stat(device)).then(
      () => true,
      (err: unknown) => {
        if (err instanceof HostError && err.code === 'ENOENT') return false
        throw err
      },
    )
    if (!exists) await sys.call('mknod', device, (l) => l.mknod(device, c.S_IFBLK | 0o660, makedev(c.LOOP_MAJOR, n)))
  }

  /** The file type (S_IFMT bits) of an open descriptor. */
  async function typeOf(fd: number, file: string): Promise<number> {
    const buf = new Uint8Array(STATX_SIZE)
    await sys.call('statx', file, (l) => l.statx(fd, '', c.AT_EMPTY_PATH, c.STATX_TYPE, buf))
    return readStatx(buf).stx_mode & c.S_IFMT
  }

  async function attach(file: string, readOnly: boolean, regularFile: boolean): Promise<string> {
    const [existing] = await find(file)
    if (existing) return existing
    const info = await sys.fs('stat', file, () => stat(file))
    if (!info.isFile() && !info.isBlockDevice()) throw new HostError('EINVAL', 'losetup', file, 'not a regular file or a block device')
    if (regularFile && !info.isFile()) throw new HostError('EINVAL', 'losetup', file, 'not a regular file')
    // A block device is opened exclusively: the kernel refuses (EBUSY) while a mounted filesystem
    // or another exclusive holder claims it, so a filesystem in use is never attached a second
    // time. O_NOFOLLOW when only a regular file will do: a symlink swapped in is not followed.
    const flags = (readOnly ? c.O_RDONLY : c.O_RDWR) | (info.isBlockDevice() ? c.O_EXCL : 0) | (regularFile ? c.O_NOFOLLOW : 0)
    const opened = withFd(file, flags, async (fileFd) => {
      // What was opened, not what was looked at: the path may have been swapped in between.
      const type = await typeOf(fileFd, file)
      if (regularFile ? type !== c.S_IFREG : type !== c.S_IFREG && type !== c.S_IFBLK) throw new HostError('EINVAL', 'losetup', file, 'not a regular file')
      if (type === c.S_IFBLK && !info.isBlockDevice()) throw new HostError('EINVAL', 'losetup', file, 'replaced by a block device while being attached')
      return attachFd(file, fileFd, readOnly)
    })
    return opened.catch((err: unknown) => {
      if (err instanceof HostError && err.code === 'EBUSY' && err.syscall === 'open') {
        throw new HostError('EBUSY', 'losetup', file, 'the block device is in use (mounted, or held open exclusively elsewhere)', { cause: err })
      }
      throw err
    })
  }

  function attachFd(file: string, fileFd: number, readOnly: boolean): Promise<string> {
    return withFd(LOOP_CONTROL, c.O_RDWR, async (control) => {
        for (let attempt = 0; attempt < ATTACH_ATTEMPTS; attempt++) {
          const n = await sys.call('ioctl', LOOP_CONTROL, (l) => l.ioctl(control, c.LOOP_CTL_GET_FREE, 0), { detail: 'LOOP_CTL_GET_FREE' })
          const device = `/dev/loop${n}`
          await ensureNode(device, n)
          if (await configure(device, fileFd, readOnly, file)) return device
        }
        throw new HostError('EBUSY', 'losetup', file, `no free loop device after ${ATTACH_ATTEMPTS} attempts`)
    })
  }

  /** Null when the path does not exist. */
  function statOrNull(path: string) {
    return sys.fs('stat', path, () => stat(path, { bigint: true })).catch((err: unknown) => {
      if (err instanceof HostError && err.code === 'ENOENT') return null
      throw err
    })
  }

  // diskseq (Linux ≥ 5.15) is new on every attach and counts from boot: with the boot id it names
  // one attachment for good. Before it, the backing file's identity, which a re-attach repeats.
  async function attachmentOf(rdev: bigint, source: { dev: string; ino: bigint }): Promise<string> {
    const read = (path: string) => sys.fs('read', path, () => readFile(path, 'utf8')).then((text) => text.trim(), () => '')
    const seq = await read(`/sys/dev/block/${deviceNumber(rdev)}/diskseq`)
    if (!seq) return `file ${source.dev}:${source.ino}`
    bootId ??= read('/proc/sys/kernel/random/boot_id')
    return `${await bootId} ${seq}`
  }

  // O_EXCL without O_CREAT claims a block device: EBUSY while a mounted filesystem (in any mount
  // namespace), a device mapper or another exclusive opener holds it.
  async function isHeld(device: string): Promise<boolean> {
    return withFd(device, c.O_RDONLY | c.O_EXCL, async () => false).catch((err: unknown) => {
      if (err instanceof HostError && err.code === 'EBUSY') return true
      throw err
    })
  }

  async function status(device: string): Promise<LoopDeviceStatus | null> {
    const st = await statOrNull(device)
    if (!st) return null
    if (!st.isBlockDevice()) throw new HostError('ENOTBLK', 'stat', device, 'not a block device')
    const source = await backing(device)
    if (!source) return null
    return { attachment: await attachmentOf(st.rdev, source), mountPoints: await env.mountPointsOf(device), held: await isHeld(device) }
  }

  return {
    attach(file, options) {
      // One attach per file at a time, so two callers get the same device.
      const running = pending.get(file)
      if (running) return running
      const started = attach(file, options?.readOnly === true, options?.regularFile === true).finally(() => pending.delete(file))
      pending.set(file, started)
      return started
    },
    find,
    async detach(device) {
      await withFd(device, c.O_RDONLY, (fd) => sys.call('ioctl', device, (l) => l.ioctl(fd, c.LOOP_CLR_FD, 0), { detail: 'LOOP_CLR_FD' }))
    },
    async refreshCapacity(device) {
      await withFd(device, c.O_RDONLY, (fd) => sys.call('ioctl', device, (l) => l.ioctl(fd, c.LOOP_SET_CAPACITY, 0), { detail: 'LOOP_SET_CAPACITY' }))
    },
    status,
  }
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
