/**
 * Which loop devices serve a file, and the status of one device: LOOP_GET_STATUS64 for the file
 * that backs it, its `diskseq` from sysfs, the mount table's mounts of it and an exclusive-open
 * probe. The read side of `loop-devices.ts`.
 */
import { readFile, readdir, stat } from 'node:fs/promises'
import type { LoopDeviceStatus } from '@kubevol/core'
import { HostError } from '@kubevol/core'
import * as c from './constants.js'
import type { LoopInfo64 } from './libc.js'
import { deviceNumber } from './mountinfo.js'
import type { Sys } from './sys.js'

/** Runs `use` with `path` opened (O_CLOEXEC added); the descriptor is closed after, a failed close ignored. */
export async function withFd<T>(sys: Sys, path: string, flags: number, use: (fd: number) => Promise<T>): Promise<T> {
  const fd = await sys.call('open', path, (l) => l.open(path, flags | c.O_CLOEXEC, 0))
  try {
    return await use(fd)
  } finally {
    await sys.call('close', path, (l) => l.close(fd)).catch(() => undefined)
  }
}

/** A file as the kernel names it: its filesystem's device (`major:minor`) and its inode number. */
export interface FileIdentity {
  readonly dev: string
  readonly ino: bigint
}

/** The read side of the loop devices. */
export interface LoopLookup {
  /** The loop devices attached to `file`, lowest number first; none when the file does not exist. */
  find(file: string): Promise<readonly string[]>
  /** The loop devices backed by the file `file` identifies (an open descriptor's statx), lowest number first. */
  findBacking(file: FileIdentity): Promise<readonly string[]>
  /** The device's attachment, mounts and whether it is held; null when it does not exist or is not attached. */
  status(device: string): Promise<LoopDeviceStatus | null>
}

/** What the lookups need from the rest of the host. */
export interface LoopLookupEnv {
  /** Where the filesystem on `device` is mounted, from the host's mount table. */
  mountPointsOf(device: string): Promise<readonly string[]>
}

/** The loop device lookups over `sys`; the boot id is read once. */
export function createLoopLookup(sys: Sys, env: LoopLookupEnv): LoopLookup {
  let bootId: Promise<string> | undefined

  async function backing(device: string): Promise<FileIdentity | null> {
    const info: Partial<LoopInfo64> = {}
    try {
      await withFd(sys, device, c.O_RDONLY, (fd) => sys.call('ioctl', device, (l) => l.ioctlGetLoopInfo(fd, c.LOOP_GET_STATUS64, info), { detail: 'LOOP_GET_STATUS64' }))
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
    return findBacking({ dev: deviceNumber(st.dev), ino: st.ino })
  }

  async function findBacking(file: FileIdentity): Promise<readonly string[]> {
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
      if (source && source.dev === file.dev && source.ino === file.ino) found.push(`/dev/${name}`)
    }
    return found
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
  async function attachmentOf(rdev: bigint, source: FileIdentity): Promise<string> {
    const read = (path: string) => sys.fs('read', path, () => readFile(path, 'utf8')).then((text) => text.trim(), () => '')
    const seq = await read(`/sys/dev/block/${deviceNumber(rdev)}/diskseq`)
    if (!seq) return `file ${source.dev}:${source.ino}`
    bootId ??= read('/proc/sys/kernel/random/boot_id')
    return `${await bootId} ${seq}`
  }

  // O_EXCL without O_CREAT claims a block device: EBUSY while a mounted filesystem (in any mount
  // namespace), a device mapper or another exclusive opener holds it.
  async function isHeld(device: string): Promise<boolean> {
    return withFd(sys, device, c.O_RDONLY | c.O_EXCL, async () => false).catch((err: unknown) => {
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

  return { find, findBacking, status }
}
