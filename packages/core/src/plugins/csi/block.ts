/**
 * Raw block CSI volumes (PVs with `volumeMode: Block` and `spec.csi`), as the kubelet's CSI block
 * mapper does it (SPEC §7.7, §6.5 MapVolume):
 *
 * ```
 * plugins/kubernetes.io/csi/volumeDevices/staging/<spec>          NodeStageVolume (a directory)
 * plugins/kubernetes.io/csi/volumeDevices/publish/<spec>/<podUID> NodePublishVolume (the driver binds the device onto this file)
 * plugins/kubernetes.io/csi/volumeDevices/<spec>/dev/<podUID>     the global map path: one bind per pod (reference count)
 * plugins/kubernetes.io/csi/volumeDevices/<spec>/data/vol_data.json  driver and handle, for unmap and reconstruction
 * pods/<uid>/volumeDevices/kubernetes.io~csi/<spec>                 the pod's link to the published device
 * ```
 *
 * Both calls ask for the `block` access type. The operation executor does the rest (links, the
 * per-pod bind, reference counting) as for every block volume. Unmap runs in reverse: NodeUnpublish
 * per pod, NodeUnstage after the last pod, then the volume's directories are removed.
 */
import type { Pod } from '../../api/kubernetes.js'
import type { VolumeSpec } from '../../api/volume-spec.js'
import { isHostError } from '../../errors.js'
import { dirname, joinPath } from '../../paths.js'
import type { BlockCapability, BlockVolumeMapper, BlockVolumeUnmapper } from '../plugin.js'
import { waitForVolumeAttachment } from './attachment.js'
import type { CsiVolumeCapability } from './csi-driver.js'
import { classifyCsiError, csiStepError, isFinalCsiError } from './csi-error.js'
import { accessModeOf, attachmentName, csiSourceOf, podInfoAttributes, readSecrets } from './requests.js'
import { CSI_PLUGIN_NAME, type CsiRuntime, call, capabilitiesOf, driverObject, driverOf } from './runtime.js'
import { nodeUnpublish } from './publish.js'
import { removeMountDir } from './stage.js'
import { type VolData, loadVolData, makeDirWithVolData } from './vol-data.js'

/** The block paths of one volume (`specName` is the PV name). */
export interface CsiBlockPaths {
  /** `volumeDevices/staging/<spec>`: the staging directory NodeStageVolume gets. */
  readonly staging: string
  /** `volumeDevices/publish/<spec>`: the parent of the per-pod publish files. */
  readonly publishDir: string
  /** `volumeDevices/<spec>`: holds `dev/` and `data/`. */
  readonly volumeDir: string
  /** `volumeDevices/<spec>/dev`: the global map path. */
  readonly globalMapPath: string
  /** `volumeDevices/<spec>/data`: where vol_data.json lives. */
  readonly dataDir: string
}

export function blockPaths(rt: CsiRuntime, specName: string): CsiBlockPaths {
  const base = rt.context().paths.volumeDevicePluginDir(CSI_PLUGIN_NAME)
  const volumeDir = joinPath(base, specName)
  return {
    staging: joinPath(base, 'staging', specName),
    publishDir: joinPath(base, 'publish', specName),
    volumeDir,
    globalMapPath: joinPath(volumeDir, 'dev'),
    dataDir: joinPath(volumeDir, 'data'),
  }
}

/** `volumeDevices/publish/<spec>/<podUID>`: the file the driver makes the device. */
export function blockPublishPath(rt: CsiRuntime, specName: string, podUID: string): string {
  return joinPath(blockPaths(rt, specName).publishDir, podUID)
}

function blockCapability(spec: VolumeSpec, capabilities: Parameters<typeof accessModeOf>[1]): CsiVolumeCapability {
  return { block: {}, accessMode: accessModeOf(spec, capabilities) }
}

/** The PV's CSI source; block volumes are never inline. */
function persistentSource(spec: VolumeSpec) {
  const source = csiSourceOf(spec)
  if (!source || source.ephemeral) throw new Error(`volume ${spec.name} is not a CSI persistent volume`)
  return source
}

/** Removes a file or an empty directory unless it is a mount point; absent is fine, a non-empty directory stays. */
async function removeIfUnused(rt: CsiRuntime, path: string): Promise<void> {
  try {
    await removeMountDir(rt, path)
  } catch (err) {
    if (!isHostError(err, 'ENOTEMPTY', 'EEXIST')) throw err
  }
}

/** Writes the volume's vol_data.json (the kubelet writes it when it makes the mapper). Idempotent. */
async function saveBlockVolData(rt: CsiRuntime, spec: VolumeSpec, attachRequired: boolean): Promise<void> {
  const source = persistentSource(spec)
  const { host, nodeName } = rt.context()
  const { dataDir } = blockPaths(rt, spec.name)
  await makeDirWithVolData(host, dataDir, dataDir, {
    specVolID: spec.name,
    volumeHandle: source.volumeHandle,
    driverName: source.driver,
    nodeName,
    attachmentID: attachRequired ? attachmentName(source.volumeHandle, source.driver, nodeName) : '',
  })
}

async function publishContextOf(rt: CsiRuntime, driver: string, volumeHandle: string, attachRequired: boolean): Promise<Record<string, string>> {
  if (!attachRequired) return {}
  const va = await waitForVolumeAttachment(rt, driver, volumeHandle, rt.timeoutMs)
  return { ...(va.status?.attachmentMetadata ?? {}) }
}

/** SetUpDevice → NodeStageVolume (block) into the staging directory; "" when the driver does not stage. */
async function setUpDevice(rt: CsiRuntime, spec: VolumeSpec): Promise<string> {
  const source = persistentSource(spec)
  const context = rt.context()
  const driver = driverOf(rt, source.driver, 'blockMapper.SetUpDevice failed to get CSI client')
  const object = await driverObject(rt, source.driver)
  const attachRequired = object?.spec?.attachRequired !== false
  await saveBlockVolData(rt, spec, attachRequired)
  const capabilities = await capabilitiesOf(rt, source.driver)
  if (!capabilities.includes('STAGE_UNSTAGE_VOLUME')) return ''
  const { staging } = blockPaths(rt, spec.name)
  const publishContext = await publishContextOf(rt, source.driver, source.volumeHandle, attachRequired)
  const secrets = await readSecrets(context.objects, source.nodeStageSecretRef, 'default')
  await context.host.mkdir(staging, { recursive: true, mode: 0o750 })
  try {
    await call(rt, source.driver, '/csi.v1.Node/NodeStageVolume', (o) =>
      driver.nodeStageVolume(
        {
          volumeId: source.volumeHandle,
          publishContext,
          stagingTargetPath: staging,
          volumeCapability: blockCapability(spec, capabilities),
          secrets,
          volumeContext: source.volumeAttributes,
        },
        o,
      ),
    )
  } catch (err) {
    // Final: nothing is staged; the kubelet removes the volume's directories (never across a mount,
    // so a volume other pods still map keeps its vol_data.json).
    if (isFinalCsiError(err)) {
      await removeIfUnused(rt, staging).catch(() => undefined)
      await context.host.removeAll(blockPaths(rt, spec.name).volumeDir).catch(() => undefined)
    }
    throw classifyCsiError('rpc NodeStageVolume', err)
  }
  return staging
}

/** MapPodDevice → NodePublishVolume (block) onto `publish/<spec>/<podUID>`; returns that path. */
async function mapPodDevice(rt: CsiRuntime, spec: VolumeSpec, pod: Pod): Promise<string> {
  const source = persistentSource(spec)
  const context = rt.context()
  const podUID = pod.metadata.uid ?? ''
  const driver = driverOf(rt, source.driver, 'blockMapper.MapPodDevice failed to get CSI client')
  const object = await driverObject(rt, source.driver)
  const attachRequired = object?.spec?.attachRequired !== false
  await saveBlockVolData(rt, spec, attachRequired)
  const capabilities = await capabilitiesOf(rt, source.driver)
  const { staging, publishDir } = blockPaths(rt, spec.name)
  const target = blockPublishPath(rt, spec.name, podUID)
  const publishContext = await publishContextOf(rt, source.driver, source.volumeHandle, attachRequired)
  const volumeContext: Record<string, string> = { ...source.volumeAttributes }
  if (object?.spec?.podInfoOnMount) Object.assign(volumeContext, podInfoAttributes(pod, false))
  const secrets = await readSecrets(context.objects, source.nodePublishSecretRef, pod.metadata.namespace ?? 'default')
  // The parent only: the driver creates the target file (csi-driver-host-path does).
  await context.host.mkdir(publishDir, { recursive: true, mode: 0o750 })
  try {
    await call(rt, source.driver, '/csi.v1.Node/NodePublishVolume', (o) =>
      driver.nodePublishVolume(
        {
          volumeId: source.volumeHandle,
          publishContext,
          stagingTargetPath: capabilities.includes('STAGE_UNSTAGE_VOLUME') ? staging : '',
          targetPath: target,
          volumeCapability: blockCapability(spec, capabilities),
          readonly: source.readOnly,
          secrets,
          volumeContext,
        },
        o,
      ),
    )
  } catch (err) {
    if (isFinalCsiError(err)) await removeIfUnused(rt, target).catch(() => undefined)
    throw classifyCsiError('rpc NodePublishVolume', err)
  }
  return target
}

/** The volume's vol_data.json, or null when there is none. */
async function volDataOf(rt: CsiRuntime, specName: string): Promise<VolData | null> {
  return loadVolData(rt.context().host, blockPaths(rt, specName).dataDir)
}

/** UnmapPodDevice → NodeUnpublishVolume of `publish/<spec>/<podUID>`, then removes what is left of it. */
async function unmapPodDevice(rt: CsiRuntime, specName: string, podUID: string): Promise<void> {
  const { host } = rt.context()
  const target = blockPublishPath(rt, specName, podUID)
  const data = await volDataOf(rt, specName)
  if (data) {
    await nodeUnpublish(rt, data, target, 'blockMapper.UnmapPodDevice')
  } else if ((await host.lstat(target)) && (await host.isMountPoint(target))) {
    throw new Error(`cannot unpublish ${target}: ${blockPaths(rt, specName).dataDir}/vol_data.json is missing`)
  }
  await removeMountDir(rt, target)
  await removeIfUnused(rt, dirname(target))
}

/**
 * TearDownDevice → NodeUnstageVolume when the driver stages and the staging directory exists, then
 * removes the staging and publish directories and `volumeDevices/<spec>` (never across a mount).
 */
async function tearDownDevice(rt: CsiRuntime, specName: string): Promise<void> {
  const { host } = rt.context()
  const paths = blockPaths(rt, specName)
  const data = await volDataOf(rt, specName)
  if (data && (await host.lstat(paths.staging))) {
    const driver = driverOf(rt, data.driverName, 'blockMapper.TearDownDevice failed to get CSI client')
    const capabilities = await capabilitiesOf(rt, data.driverName)
    if (capabilities.includes('STAGE_UNSTAGE_VOLUME')) {
      try {
        await call(rt, data.driverName, '/csi.v1.Node/NodeUnstageVolume', (o) =>
          driver.nodeUnstageVolume({ volumeId: data.volumeHandle, stagingTargetPath: paths.staging }, o),
        )
      } catch (err) {
        throw csiStepError('blockMapper.unstageVolumeForBlock failed', classifyCsiError('rpc NodeUnstageVolume', err))
      }
    }
  } else if (!data && (await host.lstat(paths.staging)) && (await host.isMountPoint(paths.staging))) {
    throw new Error(`cannot unstage ${paths.staging}: ${paths.dataDir}/vol_data.json is missing`)
  }
  await removeIfUnused(rt, paths.publishDir)
  await removeMountDir(rt, paths.staging)
  await host.removeAll(paths.volumeDir)
}

/** The CSI plugin's block capability. */
export function createCsiBlock(rt: CsiRuntime): BlockCapability {
  const podDeviceMapPath = (podUID: string, specName: string) => ({ dir: rt.context().paths.podVolumeDeviceDir(podUID, CSI_PLUGIN_NAME), linkName: specName })
  const globalMapPath = (spec: VolumeSpec): string => blockPaths(rt, spec.name).globalMapPath
  return {
    newBlockVolumeMapper(spec, pod): BlockVolumeMapper {
      persistentSource(spec)
      return {
        getGlobalMapPath: globalMapPath,
        getPodDeviceMapPath: () => podDeviceMapPath(pod.metadata.uid ?? '', spec.name),
        setUpDevice: () => setUpDevice(rt, spec),
        mapPodDevice: () => mapPodDevice(rt, spec, pod),
      }
    },
    newBlockVolumeUnmapper(innerName, podUID): BlockVolumeUnmapper {
      return {
        getGlobalMapPath: (spec) => blockPaths(rt, spec.name || innerName).globalMapPath,
        getPodDeviceMapPath: () => podDeviceMapPath(podUID, innerName),
        unmapPodDevice: () => unmapPodDevice(rt, innerName, podUID),
        tearDownDevice: () => tearDownDevice(rt, innerName),
      }
    },
    async constructBlockVolumeSpec(innerName) {
      const { dataDir } = blockPaths(rt, innerName)
      const data = await loadVolData(rt.context().host, dataDir)
      if (!data) throw new Error(`failed to reconstruct CSI block volume ${innerName}: no vol_data.json in ${dataDir}`)
      const name = data.specVolID || innerName
      return {
        name,
        persistentVolume: { metadata: { name }, spec: { volumeMode: 'Block', csi: { driver: data.driverName, volumeHandle: data.volumeHandle } } },
        readOnly: false,
      }
    },
  }
}
