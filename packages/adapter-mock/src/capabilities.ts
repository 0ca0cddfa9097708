/**
 * The optional Host members of the memory host (loop devices, block devices, filesystem tools,
 * statfs), each call routed through the host's interceptor chain under `capability.member`.
 */
import type { BlockDevices, Filesystems, FsStats, LoopDevices } from '@kubevol/core'
import * as devices from './device-ops.js'
import type { HostState } from './host-state.js'

/** Runs `run` as the host call `method` about `path` (interceptors first, settling asynchronously). */
export type CallRunner = <T>(method: string, args: readonly unknown[], path: string | undefined, run: () => T) => Promise<T>

/** `host.loopDevices`. */
export function createLoopDevices(state: HostState, call: CallRunner): LoopDevices {
  return {
    attach: (file, options) => call('loopDevices.attach', [file, options], file, () => devices.attachLoop(state, file, options?.readOnly === true, options?.regularFile === true)),
    detach: (device) => call('loopDevices.detach', [device], device, () => devices.detachLoop(state, device)),
    find: (file) => call('loopDevices.find', [file], file, () => devices.findLoops(state, file)),
    refreshCapacity: (device) => call('loopDevices.refreshCapacity', [device], device, () => devices.refreshLoopCapacity(state, device)),
    status: (device) => call('loopDevices.status', [device], device, () => devices.loopStatus(state, device)),
  }
}

/** `host.blockDevices`. */
export function createBlockDevices(state: HostState, call: CallRunner): BlockDevices {
  return {
    size: (device) => call('blockDevices.size', [device], device, () => devices.blockDeviceSize(state, device)),
    isOpen: (device) => call('blockDevices.isOpen', [device], device, () => devices.isBlockDeviceOpen(state, device)),
  }
}

/** `host.filesystems`. */
export function createFilesystems(state: HostState, call: CallRunner): Filesystems {
  return {
    detect: (device) => call('filesystems.detect', [device], device, () => devices.detectFilesystem(state, device)),
    format: (device, fstype, options) => call('filesystems.format', [device, fstype, options], device, () => devices.formatDevice(state, device, fstype)),
    check: (device, fstype) => call('filesystems.check', [device, fstype], device, () => devices.checkFilesystem(state, device, fstype)),
    resize: (device, fstype, mountPath) =>
      call('filesystems.resize', [device, fstype, mountPath], device, () => devices.resizeFilesystem(state, device, fstype, mountPath)),
    size: (device, fstype, mountPath) =>
      call('filesystems.size', [device, fstype, mountPath], device, () => devices.filesystemSize(state, device, fstype, mountPath)),
    needResize: (device, mountPath) => call('filesystems.needResize', [device, mountPath], device, () => devices.needResize(state, device, mountPath)),
  }
}

/** `host.statfs`. */
export function createStatfs(state: HostState, call: CallRunner): (path: string) => Promise<FsStats> {
  return (path) => call('statfs', [path], path, () => devices.statfs(state, path))
}
