/**
 * The CSI plugin's mounters (SPEC §7.7 `csiMountMgr`): a file system volume is published into the
 * pod's `volumes/kubernetes.io~csi/<name>/mount`; a raw block volume is mapped, never mounted, and
 * its mounter only names the published device (expansion's and NodeGetVolumeStats' volume path).
 * Both answer usage and health through NodeGetVolumeStats.
 */
import type { Pod } from '../../api/kubernetes.js'
import { type VolumeSpec, isBlockSpec } from '../../api/volume-spec.js'
import { dirname } from '../../paths.js'
import type { Mounter, VolumeMetrics } from '../plugin.js'
import { blockPaths, blockPublishPath } from './block.js'
import { publishPaths, publishVolume } from './publish.js'
import { csiSourceOf } from './requests.js'
import { type CsiRuntime, call, capabilitiesOf, driverOf, stagingPath } from './runtime.js'
import { loadVolData } from './vol-data.js'

/** The mounter of a CSI volume the plugin claims, for one pod. */
export function newCsiMounter(rt: CsiRuntime, spec: VolumeSpec, pod: Pod): Mounter {
  const source = csiSourceOf(spec)
  if (isBlockSpec(spec)) {
    const device = blockPublishPath(rt, spec.name, pod.metadata.uid ?? '')
    return {
      getPath: () => device,
      setUp: () => Promise.reject(new Error(`volume ${spec.name} is a raw block volume: it is mapped, not mounted`)),
      getAttributes: () => ({ readOnly: source?.readOnly ?? false, managed: false, seLinuxRelabel: false }),
      getMetrics: () => volumeStats(rt, device, blockPaths(rt, spec.name).staging, blockPaths(rt, spec.name).dataDir),
    }
  }
  const { target } = publishPaths(rt, pod.metadata.uid ?? '', spec.name)
  return {
    getPath: () => target,
    setUp: (args) => publishVolume(rt, spec, pod, args),
    getAttributes: () => ({ readOnly: source?.readOnly ?? false, managed: true, seLinuxRelabel: true }),
    getMetrics: () => volumeStats(rt, target, source && !source.ephemeral ? stagingPath(rt, source.driver, source.volumeHandle) : ''),
  }
}

/**
 * NodeGetVolumeStats when the driver has GET_VOLUME_STATS ("metrics are not supported" otherwise);
 * driver and handle from the vol_data.json in `dataDir` (beside the target for file systems). The
 * volume's condition is kept only from a driver with VOLUME_CONDITION, as the kubelet reads it:
 * another driver's answer may carry a default (healthy) condition that means nothing.
 */
async function volumeStats(rt: CsiRuntime, target: string, staging: string, dataDir = dirname(target)): Promise<VolumeMetrics> {
  const data = await loadVolData(rt.context().host, dataDir)
  if (!data) throw new Error(`no CSI volume at ${target}`)
  const driver = driverOf(rt, data.driverName)
  const capabilities = await capabilitiesOf(rt, data.driverName)
  if (!capabilities.includes('GET_VOLUME_STATS')) throw new Error('metrics are not supported')
  const stats = await call(rt, data.driverName, '/csi.v1.Node/NodeGetVolumeStats', (o) =>
    driver.nodeGetVolumeStats(
      { volumeId: data.volumeHandle, volumePath: target, stagingTargetPath: capabilities.includes('STAGE_UNSTAGE_VOLUME') ? staging : '' },
      o,
    ),
  )
  const { volumeCondition, ...usage } = stats
  return volumeCondition && capabilities.includes('VOLUME_CONDITION')
    ? { ...usage, volumeCondition: { abnormal: volumeCondition.abnormal, message: volumeCondition.message } }
    : usage
}

