/**
 * SetUp → NodePublishVolume and TearDown → NodeUnpublishVolume (SPEC §7.7), into
 * `pods/<uid>/volumes/kubernetes.io~csi/<name>/mount` with vol_data.json beside `mount`.
 */
import type { Pod } from '../../api/kubernetes.js'
import type { VolumeSpec } from '../../api/volume-spec.js'
import { accessModesOf, mountOptionsOf } from '../../api/volume-spec.js'
import { errorMessage, uncertainProgress } from '../../errors.js'
import { dirname, joinPath } from '../../paths.js'
import type { MounterArgs } from '../plugin.js'
import { applyFsGroup } from '../util/fs-group.js'
import { waitForVolumeAttachment } from './attachment.js'
import { classifyCsiError, csiStepError, isFinalCsiError } from './csi-error.js'
import { accessModeOf, attachmentName, csiSourceOf, ephemeralVolumeHandle, lifecycleModesOf, podInfoAttributes, readSecrets, serviceAccountTokens } from './requests.js'
import { CSI_PLUGIN_NAME, type CsiRuntime, call, capabilitiesOf, driverObject, driverOf, stagingPath } from './runtime.js'
import { removeVolumeDirs } from './stage.js'
import { type VolData, loadVolData, makeDirWithVolData } from './vol-data.js'

/** The pod's volume directory and its `mount` target. */
export function publishPaths(rt: CsiRuntime, podUID: string, specName: string): { dir: string; target: string } {
  const dir = rt.context().paths.podVolumeDir(podUID, CSI_PLUGIN_NAME, specName)
  return { dir, target: joinPath(dir, 'mount') }
}

/** NodePublishVolume for one pod, then fsGroup ownership when the CSIDriver's policy asks for it. */
export async function publishVolume(rt: CsiRuntime, spec: VolumeSpec, pod: Pod, args: MounterArgs): Promise<void> {
  const source = csiSourceOf(spec)
  if (!source) throw new Error(`volume ${spec.name} is not a CSI volume`)
  const context = rt.context()
  const { host } = context
  const podUID = pod.metadata.uid ?? ''
  const { dir, target } = publishPaths(rt, podUID, spec.name)
  const driver = driverOf(rt, source.driver, 'mounter.SetUpAt failed to get CSI client')
  const object = await driverObject(rt, source.driver)
  const mode = source.ephemeral ? 'Ephemeral' : 'Persistent'
  const modes = lifecycleModesOf(object)
  if (!modes.includes(mode)) {
    throw new Error(`volume mode "${mode}" not supported by driver ${source.driver} (only supports ${JSON.stringify(modes.join(','))})`)
  }
  const volumeHandle = source.ephemeral ? ephemeralVolumeHandle(podUID, spec.name) : source.volumeHandle
  const attachRequired = !source.ephemeral && object?.spec?.attachRequired !== false
  // Changes nothing, so asked while the directory and vol_data.json are made; a failure is still
  // reported after them, as before.
  const asked = capabilitiesOf(rt, source.driver)
  asked.catch(() => undefined)
  await makeDirWithVolData(host, dir, dir, {
    specVolID: spec.name,
    volumeHandle,
    driverName: source.driver,
    nodeName: context.nodeName,
    attachmentID: attachRequired ? attachmentName(volumeHandle, source.driver, context.nodeName) : '',
    volumeLifecycleMode: mode,
    ...(args.seLinuxLabel ? { seLinuxMountContext: args.seLinuxLabel } : {}),
  })
  // Before the call: failures here changed nothing on the node and are final as they are.
  const capabilities = await asked
  const staged = !source.ephemeral && capabilities.includes('STAGE_UNSTAGE_VOLUME')
  const publishContext = attachRequired ? { ...((await waitForVolumeAttachment(rt, source.driver, volumeHandle, rt.timeoutMs)).status?.attachmentMetadata ?? {}) } : {}
  const volumeContext: Record<string, string> = { ...source.volumeAttributes }
  if (object?.spec?.podInfoOnMount) Object.assign(volumeContext, podInfoAttributes(pod, source.ephemeral))
  const tokens = await serviceAccountTokens(context.tokens, object, pod)
  if (tokens !== undefined) volumeContext['csi.storage.k8s.io/serviceAccount.tokens'] = tokens
  const secrets = await readSecrets(context.objects, source.nodePublishSecretRef, pod.metadata.namespace ?? 'default')
  const mountFlags = mountOptionsOf(spec)
  if (args.seLinuxLabel && object?.spec?.seLinuxMount) mountFlags.push(`context="${args.seLinuxLabel}"`)
  const delegated = args.fsGroup !== undefined && capabilities.includes('VOLUME_MOUNT_GROUP') && object?.spec?.fsGroupPolicy === 'File'
  try {
    await call(rt, source.driver, '/csi.v1.Node/NodePublishVolume', (o) =>
      driver.nodePublishVolume(
        {
          volumeId: volumeHandle,
          publishContext,
          stagingTargetPath: staged ? stagingPath(rt, source.driver, volumeHandle) : '',
          targetPath: target,
          volumeCapability: {
            mount: { fsType: source.fsType, mountFlags, ...(delegated ? { volumeMountGroup: String(args.fsGroup) } : {}) },
            accessMode: accessModeOf(spec, capabilities),
          },
          readonly: source.readOnly,
          secrets,
          volumeContext,
        },
        o,
      ),
    )
  } catch (err) {
    // As the kubelet's removeMountDir: nothing while the target is mounted (an earlier attempt may
    // have published it, and its unpublish needs vol_data.json).
    if (isFinalCsiError(err)) await removeVolumeDirs(rt, target, dir).catch(() => undefined)
    throw classifyCsiError('rpc NodePublishVolume', err)
  }
  if (delegated) return
  if (!fsGroupApplies(object?.spec?.fsGroupPolicy, source.fsType, spec)) return
  try {
    await applyFsGroup(context, { pluginName: CSI_PLUGIN_NAME, dir: target, fsGroup: args.fsGroup, policy: args.fsGroupChangePolicy, readOnly: source.readOnly, pod })
  } catch (err) {
    throw uncertainProgress(`applyFSGroup failed for vol ${volumeHandle}: ${errorMessage(err)}`, err)
  }
}

/** File: always; None: never; ReadWriteOnceWithFSType (default): with an fs type and RWO access. */
function fsGroupApplies(policy: string | undefined, fsType: string, spec: VolumeSpec): boolean {
  if (policy === 'File') return true
  if (policy === 'None') return false
  if (!fsType) return false
  const modes = accessModesOf(spec)
  return modes.length === 0 || (modes.length === 1 && modes[0] === 'ReadWriteOnce')
}

/**
 * NodeUnpublishVolume of `target` for the volume `data` describes; its error classified and worded
 * as the kubelet's for the caller's `step`: `Unmounter.TearDownAt` (a file system) or
 * `blockMapper.UnmapPodDevice` (a block volume).
 */
export async function nodeUnpublish(rt: CsiRuntime, data: VolData, target: string, step: 'Unmounter.TearDownAt' | 'blockMapper.UnmapPodDevice' = 'Unmounter.TearDownAt'): Promise<void> {
  const driver = driverOf(rt, data.driverName, `${step} failed to get CSI client`)
  try {
    await call(rt, data.driverName, '/csi.v1.Node/NodeUnpublishVolume', (o) => driver.nodeUnpublishVolume({ volumeId: data.volumeHandle, targetPath: target }, o))
  } catch (err) {
    const failed = step === 'Unmounter.TearDownAt' ? 'Unmounter.TearDownAt failed' : 'blockMapper.unpublishVolumeForBlock failed'
    throw csiStepError(failed, classifyCsiError('rpc NodeUnpublishVolume', err))
  }
}

/**
 * {@link unpublishVolume} in two parts (the Unmounter's `prepareTearDown`): vol_data.json is read at
 * once, as the kubelet reads it when it makes the unmounter, while the operation checks the pod's
 * directories; the step returned unpublishes with it. A failed read is reported by the step.
 */
export function prepareUnpublishVolume(rt: CsiRuntime, podUID: string, specName: string): () => Promise<void> {
  const data = loadVolData(rt.context().host, publishPaths(rt, podUID, specName).dir)
  // Looked at only by the step, which may never run (the check refused).
  data.catch(() => undefined)
  return () => unpublishVolume(rt, podUID, specName, data)
}

/** NodeUnpublishVolume, then removes `mount`, vol_data.json and the volume directory. Idempotent. `read`: vol_data.json, already asked. */
export async function unpublishVolume(rt: CsiRuntime, podUID: string, specName: string, read?: Promise<VolData | null>): Promise<void> {
  const { host } = rt.context()
  const { dir, target } = publishPaths(rt, podUID, specName)
  const data = await (read ?? loadVolData(host, dir))
  if (data) {
    await nodeUnpublish(rt, data, target)
  } else if (await host.isMountPoint(target).catch(() => false)) {
    throw new Error(`cannot unpublish ${target}: ${dirname(target)}/vol_data.json is missing`)
  }
  await removeVolumeDirs(rt, target, dir)
}
