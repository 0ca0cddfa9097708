/**
 * Reconstruction after a restart (SPEC §5.4), with kubevol's journal first: the journal says what
 * kubevol set out to do and how far it got (attachments and device mounts the disk layout cannot
 * show included), the disk scan adds what the journal does not know (a journal lost, a volume from
 * before the journal), and everything found is marked uncertain, so the normal reconcile pass
 * mounts again what pods still want (set-up is idempotent) and tears down the rest.
 */
import type { UniqueVolumeName } from '../api/names.js'
import type { VolumeSpec } from '../api/volume-spec.js'
import type { ActualStateOfWorld } from '../cache/actual-state.js'
import { errorMessage } from '../errors.js'
import type { Host } from '../host/host.js'
import type { VolumeJournal } from '../journal/journal.js'
import type { Logger, Metrics } from '../observability.js'
import type { Paths } from '../paths.js'
import { type PluginManager, uniqueVolumeNameOf } from '../plugins/plugin-manager.js'
import { renameJournaledVolumes } from './journal-names.js'
import { checkJournaledPods } from './journaled-pods.js'
import { type PodVolumeOnDisk, scanPodVolumes } from './scan.js'

export interface ReconstructionContext {
  readonly host: Host
  readonly paths: Paths
  readonly plugins: PluginManager
  readonly asw: ActualStateOfWorld
  readonly logger: Logger
  readonly metrics: Metrics
  readonly journal?: VolumeJournal
}

export interface ReconstructionResult {
  /** Volumes put into the actual state (their device paths may need node status). */
  readonly reconstructed: UniqueVolumeName[]
  /** Volume directories that could not be reconstructed: cleaned up once sources are ready. */
  readonly failed: PodVolumeOnDisk[]
}

/** Rebuilds the actual state. Never throws: what cannot be read is logged and left to cleanup. */
export async function reconstructVolumes(ctx: ReconstructionContext): Promise<ReconstructionResult> {
  const { asw, logger } = ctx
  const reconstructed = new Set<UniqueVolumeName>()
  const failed: PodVolumeOnDisk[] = []

  // 0. Volumes journaled under a unique name their plugin no longer gives them take the current one.
  if (ctx.journal) await renameJournaledVolumes(ctx.journal, ctx.plugins, logger)

  // 1. The journal: complete specs, device paths, attachments. A set-up whose pod directories are
  // not real directories (a symlink swapped in while kubevol was down) is left out: its tear-down
  // would follow the link. The journal keeps it, so it is reported at every start until the
  // directory is put right, and then torn down.
  for (const checked of await checkJournaledPods(ctx, ctx.journal?.volumes().values() ?? [])) {
    const v = checked.volume
    if ('error' in checked) {
      logger.error('Could not reconstruct a journaled volume', { volume: v.volume, err: errorMessage(checked.error) })
      continue
    }
    if (checked.pods.length === 0 && !v.attached && !v.device) continue
    try {
      asw.addAttachUncertainReconstructedVolume(v.volume, v.spec, v.attached?.devicePath ?? v.device?.devicePath ?? '')
      if (v.attached) asw.updateReconstructedVolumeAttachability(v.volume, true)
      if (v.device) {
        asw.markDeviceAsUncertain(v.volume, v.device.devicePath, v.device.path)
        asw.markDeviceFoundDuringReconstruction(v.volume)
      }
      for (const [podName, p] of checked.pods) {
        asw.checkAndMarkVolumeAsUncertainViaReconstruction({
          podName,
          podUID: p.podUID,
          volumeName: v.volume,
          outerVolumeSpecName: p.outerName,
          volumeGidValue: p.gid,
          spec: p.spec,
        })
      }
      reconstructed.add(v.volume)
    } catch (err) {
      logger.error('Could not reconstruct a journaled volume', { volume: v.volume, err: errorMessage(err) })
    }
  }

  // 2. The disk: pod volume directories the journal did not explain.
  let onDisk: PodVolumeOnDisk[] = []
  try {
    onDisk = await scanPodVolumes(ctx.host, ctx.paths, logger)
  } catch (err) {
    logger.error('Cannot get volumes from disk, skip sync states for volume reconstruction', { err: errorMessage(err) })
  }
  for (const podVolume of onDisk) {
    if (asw.volumeExistsWithSpecName(podVolume.podName, podVolume.volumeSpecName)) continue
    ctx.metrics.inc('reconstruct_volume_operations_total')
    try {
      reconstructed.add(await reconstructOne(ctx, podVolume))
    } catch (err) {
      ctx.metrics.inc('reconstruct_volume_operations_errors_total')
      logger.warn('Could not construct volume spec', { path: podVolume.volumePath, err: errorMessage(err) })
      failed.push(podVolume)
    }
  }
  logger.info('Volume reconstruction finished', { reconstructed: reconstructed.size, failed: failed.length })
  return { reconstructed: [...reconstructed], failed }
}

async function reconstructOne(ctx: ReconstructionContext, v: PodVolumeOnDisk): Promise<UniqueVolumeName> {
  const { asw, plugins, host } = ctx
  const plugin = plugins.findPluginByName(v.pluginName)
  const describe = `(spec.Name: "${v.volumeSpecName}") pod "${v.podName}" (UID: "${v.podName}")`
  const block = v.volumeMode === 'Block' ? plugin.block : undefined
  if (v.volumeMode === 'Block' && !block?.constructBlockVolumeSpec) {
    throw new Error(`could not find block volume plugin "${v.pluginName}" ${describe}: block volumes are reconstructed from the journal only`)
  }
  let spec: VolumeSpec
  if (block?.constructBlockVolumeSpec) spec = await block.constructBlockVolumeSpec(v.volumeSpecName, v.volumePath)
  else if (plugin.constructVolumeSpec) spec = await plugin.constructVolumeSpec(v.volumeSpecName, v.volumePath)
  else throw new Error(`failed to reconstruct volume for plugin "${v.pluginName}" ${describe}: got nil`)
  const attachable = plugin.attach?.canAttach(spec) ?? false
  const deviceMountable = plugin.deviceMount?.canDeviceMount(spec) ?? false
  // Only a volume with a device is known to be a mount; others may be plain directories. A block
  // volume exists when its link does (the scan found it).
  if (!block && attachable && !(await host.isMountPoint(v.volumePath).catch(() => false))) throw new Error(`volume: "${v.volumePath}" is not mounted`)
  const volumeName = uniqueVolumeNameOf(plugin, spec, v.podName)
  if (!asw.volumeExists(volumeName)) asw.addAttachUncertainReconstructedVolume(volumeName, spec, '')
  asw.checkAndMarkVolumeAsUncertainViaReconstruction({
    podName: v.podName,
    podUID: v.podName,
    volumeName,
    outerVolumeSpecName: spec.name,
    volumeGidValue: '',
    spec,
  })
  if (block) {
    if (attachable || deviceMountable) asw.checkAndMarkDeviceUncertainViaReconstruction(volumeName, block.newBlockVolumeUnmapper(spec.name, v.podName).getGlobalMapPath(spec))
  } else if (deviceMountable && plugin.deviceMount) {
    // As the kubelet's updateStates: a spec too thin to name its device mount path (a local
    // directory, whose path the pod's bind does not tell) leaves the device unmarked; the pod's
    // volume is still reconstructed, so its tear-down runs.
    let deviceMountPath: string | undefined
    try {
      deviceMountPath = plugin.deviceMount.getDeviceMountPath(spec)
    } catch (err) {
      ctx.logger.info('Could not find device mount path for volume', { volume: volumeName, err: errorMessage(err) })
    }
    if (deviceMountPath) asw.checkAndMarkDeviceUncertainViaReconstruction(volumeName, deviceMountPath)
  }
  return volumeName
}
