/**
 * The `loopDevices` capability through the loop ioctls: LOOP_CTL_GET_FREE on /dev/loop-control,
 * LOOP_CONFIGURE (Linux ≥ 5.8) or LOOP_SET_FD + LOOP_SET_STATUS64 before it, LOOP_CLR_FD,
 * LOOP_SET_CAPACITY, and LOOP_GET_STATUS64 to learn which file backs a device. A device's status
 * adds its `diskseq` from sysfs, the mount table's mounts of it and an exclusive-open probe.
 * Attaching is in `loop-attach.ts`, finding and status in `loop-lookup.ts`.
 */
import type { LoopDevices } from '@kubevol/core'
import * as c from './constants.js'
import { attachLoop } from './loop-attach.js'
import { type LoopLookupEnv, createLoopLookup, withFd } from './loop-lookup.js'
import type { Sys } from './sys.js'

/** What the loop devices need from the rest of the host. */
export type LoopDeviceEnv = LoopLookupEnv

/** The `loopDevices` capability over `sys`. */
export function createLoopDevices(sys: Sys, env: LoopDeviceEnv): LoopDevices {
  const pending = new Map<string, Promise<string>>()
  const lookup = createLoopLookup(sys, env)
  const { find, status } = lookup
  return {
    attach(file, options) {
      // One attach per file at a time, so two callers get the same device.
      const running = pending.get(file)
      if (running) return running
      const started = attachLoop(sys, lookup, file, options?.readOnly === true, options?.regularFile === true).finally(() => pending.delete(file))
      pending.set(file, started)
      return started
    },
    find,
    async detach(device) {
      await withFd(sys, device, c.O_RDONLY, (fd) => sys.call('ioctl', device, (l) => l.ioctl(fd, c.LOOP_CLR_FD, 0), { detail: 'LOOP_CLR_FD' }))
    },
    async refreshCapacity(device) {
      await withFd(sys, device, c.O_RDONLY, (fd) => sys.call('ioctl', device, (l) => l.ioctl(fd, c.LOOP_SET_CAPACITY, 0), { detail: 'LOOP_SET_CAPACITY' }))
    },
    status,
  }
}
