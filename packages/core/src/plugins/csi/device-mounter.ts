/**
 * The device step of CSI persistent volumes (MountDevice → NodeStageVolume, UnmountDevice →
 * NodeUnstageVolume; see stage.ts). Every CSI PV has one, block ones too, so all pods of one volume
 * share one NodeStage.
 */
import { type VolumeSpec, isBlockSpec } from '../../api/volume-spec.js'
import type { DeviceMountCapability } from '../plugin.js'
import { mountReferences } from '../util/cleanup-mount-point.js'
import { blockPaths } from './block.js'
import { csiSourceOf } from './requests.js'
import { type CsiRuntime, stagingPath } from './runtime.js'
import { prepareStageVolume, prepareUnstageVolume, stageVolume, unstageVolume } from './stage.js'

/** The staging path is `<driver>/<sha256(handle)>/globalmount` for file systems, `volumeDevices/staging/<spec>` for raw block. */
export function createCsiDeviceMounter(rt: CsiRuntime, canDeviceMount: (spec: VolumeSpec) => boolean): DeviceMountCapability {
  return {
    canDeviceMount,
    getDeviceMountPath(spec) {
      const source = csiSourceOf(spec)
      if (!source || source.ephemeral) throw new Error(`volume ${spec.name} is not a CSI persistent volume`)
      if (isBlockSpec(spec)) return blockPaths(rt, spec.name).staging
      return stagingPath(rt, source.driver, source.volumeHandle)
    },
    mountDevice: (spec, _devicePath, deviceMountPath, args) => stageVolume(rt, spec, deviceMountPath, args),
    prepareMountDevice: (spec, _devicePath, deviceMountPath, args) => prepareStageVolume(rt, spec, deviceMountPath, args),
    unmountDevice: (deviceMountPath) => unstageVolume(rt, deviceMountPath),
    prepareUnmountDevice: (deviceMountPath, spec) => prepareUnstageVolume(rt, deviceMountPath, spec),
    getDeviceMountRefs: (deviceMountPath) => mountReferences(rt.context().host, deviceMountPath),
  }
}

