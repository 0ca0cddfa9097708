/** The `blockDevices` capability: size through BLKGETSIZE64, "open" through an exclusive open. */
import { open, stat } from 'node:fs/promises'
import type { BlockDevices } from '@kubevol/core'
import { HostError } from '@kubevol/core'
import * as c from './constants.js'
import type { Sys } from './sys.js'

/** The `blockDevices` capability over `sys`. */
export function createBlockDevices(sys: Sys): BlockDevices {
  async function requireBlockDevice(device: string, syscall: string): Promise<void> {
    const info = await sys.fs('stat', device, () => stat(device))
    if (!info.isBlockDevice()) throw new HostError('ENOTBLK', syscall, device, 'not a block device')
  }

  return {
    async size(device) {
      await requireBlockDevice(device, 'ioctl')
      const fd = await sys.call('open', device, (l) => l.open(device, c.O_RDONLY | c.O_CLOEXEC, 0))
      try {
        const size: [number | bigint] = [0]
        await sys.call('ioctl', device, (l) => l.ioctlGetU64(fd, c.BLKGETSIZE64, size), { detail: 'BLKGETSIZE64' })
        return Number(size[0])
      } finally {
        await sys.call('close', device, (l) => l.close(fd)).catch(() => undefined)
      }
    },

    async isOpen(device) {
      await requireBlockDevice(device, 'open')
      // O_EXCL on a block device (without O_CREAT) claims it exclusively: EBUSY while a mounted
      // filesystem, a device mapper or another exclusive opener holds it.
      try {
        const handle = await sys.fs('open', device, () => open(device, c.O_RDONLY | c.O_EXCL))
        await handle.close()
        return false
      } catch (err) {
        if (err instanceof HostError && err.code === 'EBUSY') return true
        throw err
      }
    },
  }
}
