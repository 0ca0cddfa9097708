/**
 * MountDevice → NodeStageVolume and UnmountDevice → NodeUnstageVolume (SPEC §7.7).
 */
import { type VolumeSpec, mountOptionsOf } from '../../api/volume-spec.js'
import { isHostError } from '../../errors.js'
import { dirname, joinPath } from '../../paths.js'
import type { DeviceMounterArgs, PreparedDeviceMount } from '../plugin.js'
import { removeUnmounted } from '../util/remove-unmounted.js'
import { waitForVolumeAttachment } from './attachment.js'
import { classifyCsiError, csiStepError, isFinalCsiError } from './csi-error.js'
import type { CsiDriver, CsiNodeCapability } from './csi-driver.js'
import { accessModeOf, csiSourceOf, readSecrets } from './requests.js'
import { type CsiRuntime, call, capabilitiesOf, driverObject, driverOf } from './runtime.js'
import { type VolData, loadVolData, makeDirWithVolData, VOL_DATA_FILE } from './vol-data.js'

/** Removes a directory (or file) unless it is a mount point; absent is fine, still mounted is an error. */
export async function removeMountDir(rt: CsiRuntime, path: string): Promise<void> {
  await removeVolumeDirs(rt, path)
}

/**
 * Removes a mount directory, the `vol_data.json` beside it and their directory, in that order (the
 * kubelet's removeMountDir), as one host call where the host can. The mount directory still
 * mounted is an error, and then nothing is removed.
 */
export async function removeVolumeDirs(rt: CsiRuntime, mountDir: string, dataDir?: string): Promise<void> {
  const paths = dataDir === undefined ? [mountDir] : [mountDir, joinPath(dataDir, VOL_DATA_FILE), dataDir]
  try {
    await removeUnmounted(rt.context().host, paths)
  } catch (err) {
    if (isHostError(err, 'EBUSY')) throw new Error(`${err.path} is still mounted`)
    throw err
  }
}

/**
 * {@link stageVolume} in two parts (`prepareMountDevice`): NodeGetCapabilities, which changes
 * nothing, is asked at once, and the staging directory and vol_data.json are made at once (the
 * first step of MountDevice in the kubelet, found by the disk scan without the journal), while the
 * operation makes the device's intent durable; the step returned stages with their answers, and its
 * `abandon` removes the directory and file when the intent fails. On the Linux host the directory,
 * the file and the intent's synced write go to the I/O worker in one trip. The driver sees the
 * kubelet's calls in the kubelet's order; a failed query is reported after the directory and file
 * are made, as before. A driver not registered yet is asked, and the files made, in the step.
 */
export function prepareStageVolume(rt: CsiRuntime, spec: VolumeSpec, deviceMountPath: string, args: DeviceMounterArgs): PreparedDeviceMount {
  const source = csiSourceOf(spec)
  if (!source || source.ephemeral || !rt.registry.get(source.driver)) return () => stageVolume(rt, spec, deviceMountPath, args)
  const capabilities = capabilitiesOf(rt, source.driver)
  const made = makeStagingDir(rt, source, deviceMountPath)
  // Both looked at only by the step, which may never run (the intent failed).
  capabilities.catch(() => undefined)
  made.catch(() => undefined)
  const step = (): Promise<void> => stageVolume(rt, spec, deviceMountPath, args, { capabilities, made })
  step.abandon = () => made.then(() => removeStagingDir(rt, deviceMountPath), () => removeStagingDir(rt, deviceMountPath))
  return step
}

function makeStagingDir(rt: CsiRuntime, source: { readonly driver: string; readonly volumeHandle: string }, deviceMountPath: string): Promise<void> {
  return makeDirWithVolData(rt.context().host, deviceMountPath, dirname(deviceMountPath), { driverName: source.driver, volumeHandle: source.volumeHandle })
}

/**
 * The staging directory, vol_data.json and their directory removed in that order, as the kubelet's
 * removeMountDir: nothing at all while the staging directory is a mount point (an earlier attempt
 * may have staged it, and its unstage needs vol_data.json). Never throws.
 */
async function removeStagingDir(rt: CsiRuntime, deviceMountPath: string): Promise<void> {
  await removeVolumeDirs(rt, deviceMountPath, dirname(deviceMountPath)).catch(() => undefined)
}

/** What {@link prepareStageVolume} started: the driver's capabilities, and the staging directory and vol_data.json. */
interface StageStarted {
  readonly capabilities: Promise<readonly CsiNodeCapability[]>
  readonly made: Promise<void>
}

/**
 * Creates the staging directory and its vol_data.json (always: UnmountDevice needs it), then
 * stages when the driver has STAGE_UNSTAGE_VOLUME. A final failure removes both; an uncertain one
 * keeps them and reports uncertain progress. `started`: what {@link prepareStageVolume} began.
 */
export async function stageVolume(rt: CsiRuntime, spec: VolumeSpec, deviceMountPath: string, args: DeviceMounterArgs, started?: StageStarted): Promise<void> {
  const source = csiSourceOf(spec)
  if (!source || source.ephemeral) throw new Error(`volume ${spec.name} is not a CSI persistent volume`)
  const context = rt.context()
  const cleanup = (): Promise<void> => removeStagingDir(rt, deviceMountPath)
  let driver: CsiDriver
  try {
    driver = driverOf(rt, source.driver, 'attacher.MountDevice failed to create newCsiDriverClient')
  } catch (err) {
    // Unregistered since the preparation made the directory: it goes, as nothing was staged.
    if (started) await started.made.then(cleanup, cleanup)
    throw err
  }
  await (started?.made ?? makeStagingDir(rt, source, deviceMountPath))
  // Before the call: failures here changed nothing on the node and are final as they are.
  const capabilities = await (started?.capabilities ?? capabilitiesOf(rt, source.driver))
  if (!capabilities.includes('STAGE_UNSTAGE_VOLUME')) return
  const object = await driverObject(rt, source.driver)
  let publishContext: Record<string, string> = {}
  if (object?.spec?.attachRequired !== false) {
    const va = await waitForVolumeAttachment(rt, source.driver, source.volumeHandle, rt.timeoutMs)
    publishContext = { ...(va.status?.attachmentMetadata ?? {}) }
  }
  const secrets = await readSecrets(context.objects, source.nodeStageSecretRef, 'default')
  const mountFlags = mountOptionsOf(spec)
  if (args.seLinuxLabel && object?.spec?.seLinuxMount) mountFlags.push(`context="${args.seLinuxLabel}"`)
  const fsGroupDelegated = args.fsGroup !== undefined && capabilities.includes('VOLUME_MOUNT_GROUP') && object?.spec?.fsGroupPolicy === 'File'
  try {
    await call(rt, source.driver, '/csi.v1.Node/NodeStageVolume', (o) =>
      driver.nodeStageVolume(
        {
          volumeId: source.volumeHandle,
          publishContext,
          stagingTargetPath: deviceMountPath,
          volumeCapability: {
            mount: { fsType: source.fsType, mountFlags, ...(fsGroupDelegated ? { volumeMountGroup: String(args.fsGroup) } : {}) },
            accessMode: accessModeOf(spec, capabilities),
          },
          secrets,
          volumeContext: source.volumeAttributes,
        },
        o,
      ),
    )
  } catch (err) {
    if (isFinalCsiError(err)) await cleanup()
    throw classifyCsiError('rpc NodeStageVolume', err)
  }
}

/** The reads an unstage begins with, started before the mount-reference check (see {@link prepareUnstageVolume}). */
interface UnstageReads {
  readonly data: Promise<VolData | null>
  /** The driver's capabilities, asked once `data` named a registered driver; undefined otherwise. */
  readonly capabilities: Promise<readonly CsiNodeCapability[] | undefined>
}

/**
 * {@link unstageVolume} in two parts (`prepareUnmountDevice`): vol_data.json is read at once, and
 * the driver the volume's spec names asked for its capabilities at once too, while the operation
 * checks the device's mount references; the step returned unstages with those answers. Both change
 * nothing. vol_data.json decides, as in the kubelet: when it names another driver, that one is
 * asked once it is read, and when it is missing nothing is unstaged. The driver sees the kubelet's
 * calls in the kubelet's order (NodeUnpublishVolume has returned before this starts); only when
 * the check refuses (other mounts still reference the device), or vol_data.json is missing or
 * names another driver, has it been asked for its capabilities with no NodeUnstageVolume after. A
 * failed read is reported by the step, after the check.
 */
export function prepareUnstageVolume(rt: CsiRuntime, deviceMountPath: string, spec?: VolumeSpec): () => Promise<void> {
  const data = loadVolData(rt.context().host, dirname(deviceMountPath))
  const named = spec ? csiSourceOf(spec)?.driver : undefined
  const early = named !== undefined && rt.registry.get(named) ? capabilitiesOf(rt, named) : undefined
  early?.catch(() => undefined)
  const capabilities = data.then((d) => {
    if (!d || !rt.registry.get(d.driverName)) return undefined
    return d.driverName === named && early ? early : capabilitiesOf(rt, d.driverName)
  })
  // Looked at only by the step, which may never run (the check refused).
  capabilities.catch(() => undefined)
  return () => unstageVolume(rt, deviceMountPath, { data, capabilities })
}

/** Reads vol_data.json next to the staging path, unstages when the driver stages, removes both. `reads`: already started. */
export async function unstageVolume(rt: CsiRuntime, deviceMountPath: string, reads?: UnstageReads): Promise<void> {
  const { host } = rt.context()
  const dataDir = dirname(deviceMountPath)
  const data = await (reads?.data ?? loadVolData(host, dataDir))
  if (data) {
    const driver = driverOf(rt, data.driverName, 'attacher.UnmountDevice failed to create newCsiDriverClient')
    const capabilities = (await reads?.capabilities) ?? (await capabilitiesOf(rt, data.driverName))
    if (capabilities.includes('STAGE_UNSTAGE_VOLUME')) {
      try {
        await call(rt, data.driverName, '/csi.v1.Node/NodeUnstageVolume', (o) =>
          driver.nodeUnstageVolume({ volumeId: data.volumeHandle, stagingTargetPath: deviceMountPath }, o),
        )
      } catch (err) {
        throw csiStepError('attacher.UnmountDevice failed', classifyCsiError('rpc NodeUnstageVolume', err))
      }
    }
  }
  await removeVolumeDirs(rt, deviceMountPath, dataDir)
}
