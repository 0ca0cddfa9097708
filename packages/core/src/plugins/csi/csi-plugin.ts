/**
 * The CSI volume plugin (`kubernetes.io/csi`, node side, SPEC §7.7): PVs with `spec.csi` and inline
 * `csi:` ephemeral volumes, served by the drivers registered in a {@link CsiDriverRegistry}.
 * The reserved driver `filedisk.kubevol.io` belongs to the built-in fileDisk plugin and is never
 * claimed here. Raw block volumes (`volumeMode: Block`) are staged and published with the `block`
 * access type (see block.ts).
 */
import type { VolumeAttachment } from '../../api/kubernetes.js'
import { type VolumeSpec, isBlockSpec } from '../../api/volume-spec.js'
import { ConfigError, errorMessage } from '../../errors.js'
import { basename, dirname } from '../../paths.js'
import { FILE_DISK_DRIVER } from '../file-disk.js'
import type { VolumeMetrics, VolumePlugin, VolumePluginContext } from '../plugin.js'
import { NodeExpansionError } from '../node-expansion-error.js'
import { mountReferences } from '../util/cleanup-mount-point.js'
import { verifyExhaustedResource } from './attach-limit.js'
import { waitForVolumeAttachment } from './attachment.js'
import { blockPaths, blockPublishPath, createCsiBlock } from './block.js'
import { classifyCsiError, hasGrpcCode, rewordedError } from './csi-error.js'
import { CSI_DEFAULT_TIMEOUT_MS } from './deadline.js'
import type { CsiDriverRegistry } from './driver-registry.js'
import { createCsiDriverObjects } from './driver-objects.js'
import { publishPaths, publishVolume, unpublishVolume } from './publish.js'
import { accessModeOf, attachmentName, csiSourceOf, readSecrets } from './requests.js'
import { CSI_PLUGIN_NAME, type CsiRuntime, call, capabilitiesOf, driverObject, driverOf, stagingPath } from './runtime.js'
import { stageVolume, unstageVolume } from './stage.js'
import { loadVolData } from './vol-data.js'

export interface CsiPluginOptions {
  /** The node's registered drivers. */
  readonly drivers: CsiDriverRegistry
  /** Deadline of each CSI call. @default 120_000 (the kubelet's csiTimeout) */
  readonly timeoutMs?: number
  /** Poll interval while waiting for a VolumeAttachment. @default 1_000 */
  readonly attachPollMs?: number
  /**
   * Reads VolumeAttachments (controller attach). @default `context.objects.getVolumeAttachment`
   */
  readonly getVolumeAttachment?: (name: string) => Promise<VolumeAttachment>
}

/** The CSI plugin, with a way to wait until the CSIDriver objects of registered drivers are read. */
export interface CsiVolumePlugin extends VolumePlugin {
  /** Resolves once the CSIDriver object of every registered driver has been read (kubelet `WaitForCacheSync`). */
  syncDriverObjects(): Promise<void>
}

function claimed(spec: VolumeSpec): string | undefined {
  const driver = csiSourceOf(spec)?.driver
  return driver && driver !== FILE_DISK_DRIVER ? driver : undefined
}

export function createCsiPlugin(options: CsiPluginOptions): CsiVolumePlugin {
  let context: VolumePluginContext | undefined
  const ctx = (): VolumePluginContext => {
    if (!context) throw new ConfigError('the CSI plugin was not initialized')
    return context
  }
  const objects = createCsiDriverObjects(() => ctx().objects)
  const rt: CsiRuntime = {
    context: ctx,
    registry: options.drivers,
    objects,
    timeoutMs: options.timeoutMs ?? CSI_DEFAULT_TIMEOUT_MS,
    attachPollMs: options.attachPollMs ?? 1_000,
    getVolumeAttachment: options.getVolumeAttachment,
  }
  // What syncDriverObjects waits for; results are dropped so the chain holds nothing.
  let pending: Promise<void> = Promise.resolve()
  const track = (work: Promise<unknown>[]): void => {
    pending = Promise.allSettled([pending, ...work]).then(() => undefined)
  }
  const prefetch = (names: readonly string[]): void => track(names.map((n) => objects.fetch(n)))
  /** kubelet `skipAttach`: attach unless the CSIDriver says `attachRequired: false`. */
  const attachRequired = (spec: VolumeSpec): boolean => {
    const source = csiSourceOf(spec)
    if (!source || source.ephemeral) return false
    const object = objects.peek(source.driver)
    if (object === undefined) prefetch([source.driver])
    return object?.spec?.attachRequired !== false
  }
  // Every CSI PV has a device step, block ones too (kubelet: CanDeviceMount is true for non-inline
  // volumes), so all pods of one volume share one unique name and one NodeStage.
  const isPersistent = (spec: VolumeSpec): boolean => claimed(spec) !== undefined && !!spec.persistentVolume
  const block = createCsiBlock(rt)

  return {
    name: CSI_PLUGIN_NAME,
    init(c) {
      context = c
      prefetch(options.drivers.list().map((d) => d.name))
      options.drivers.subscribe((name) => prefetch([name]))
      c.objects.subscribe?.(() => track([objects.refreshAll()]))
    },
    async syncDriverObjects() {
      prefetch(options.drivers.list().map((d) => d.name))
      await pending
    },
    canSupport: (spec) => claimed(spec) !== undefined,
    getVolumeName(spec) {
      const source = csiSourceOf(spec)
      if (!source) throw new Error(`volume ${spec.name} is not a CSI volume`)
      return `${source.driver}^${source.ephemeral ? spec.name : source.volumeHandle}`
    },
    requiresRemount(spec) {
      const driver = claimed(spec)
      return driver !== undefined && objects.peek(driver)?.spec?.requiresRepublish === true
    },
    supportsMountOption: () => true,
    supportsSELinuxContextMount(spec) {
      const driver = claimed(spec)
      return driver !== undefined && objects.peek(driver)?.spec?.seLinuxMount === true
    },
    newMounter(spec, pod) {
      if (!claimed(spec)) throw new Error(`volume ${spec.name} is not a CSI volume`)
      const source = csiSourceOf(spec)
      if (isBlockSpec(spec)) {
        // A raw block volume is mapped, never mounted; its path is the published device (expansion's
        // and NodeGetVolumeStats' volume path).
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
    },
    newUnmounter(innerName, podUID) {
      return { getPath: () => publishPaths(rt, podUID, innerName).target, tearDown: () => unpublishVolume(rt, podUID, innerName) }
    },
    async constructVolumeSpec(innerName, mountPath) {
      const dir = basename(mountPath) === 'mount' ? dirname(mountPath) : mountPath
      const data = await loadVolData(ctx().host, dir)
      if (!data) throw new Error(`failed to reconstruct CSI volume ${innerName}: no vol_data.json in ${dir}`)
      const name = data.specVolID || innerName
      if (data.volumeLifecycleMode === 'Ephemeral') return { name, volume: { name, csi: { driver: data.driverName } }, readOnly: false }
      return {
        name,
        persistentVolume: { metadata: { name }, spec: { csi: { driver: data.driverName, volumeHandle: data.volumeHandle } } },
        readOnly: false,
      }
    },
    attach: {
      canAttach: (spec) => claimed(spec) !== undefined && attachRequired(spec),
      // kubevol does not create VolumeAttachments: the external attacher does; waiting for it is attaching.
      async attach(spec) {
        const source = csiSourceOf(spec)
        if (!source) throw new Error(`volume ${spec.name} is not a CSI volume`)
        // canAttach answered before the CSIDriver was read: nothing to wait for after all.
        if ((await driverObject(rt, source.driver))?.spec?.attachRequired === false) return ''
        await waitForVolumeAttachment(rt, source.driver, source.volumeHandle, rt.timeoutMs)
        return attachmentName(source.volumeHandle, source.driver, ctx().nodeName)
      },
      async waitForAttach(spec, _devicePath, _pod, timeoutMs) {
        const source = csiSourceOf(spec)
        if (!source) throw new Error(`volume ${spec.name} is not a CSI volume`)
        if ((await driverObject(rt, source.driver))?.spec?.attachRequired === false) return ''
        await waitForVolumeAttachment(rt, source.driver, source.volumeHandle, timeoutMs)
        return attachmentName(source.volumeHandle, source.driver, ctx().nodeName)
      },
      async detach(volumeName) {
        ctx().logger.info('CSI detach is the external attacher\'s: nothing to do on the node', { volume: volumeName })
      },
      verifyExhaustedResource: (spec) => verifyExhaustedResource(rt, spec),
    },
    deviceMount: {
      canDeviceMount: isPersistent,
      getDeviceMountPath(spec) {
        const source = csiSourceOf(spec)
        if (!source || source.ephemeral) throw new Error(`volume ${spec.name} is not a CSI persistent volume`)
        if (isBlockSpec(spec)) return blockPaths(rt, spec.name).staging
        return stagingPath(rt, source.driver, source.volumeHandle)
      },
      mountDevice: (spec, _devicePath, deviceMountPath, args) => stageVolume(rt, spec, deviceMountPath, args),
      unmountDevice: (deviceMountPath) => unstageVolume(rt, deviceMountPath),
      getDeviceMountRefs: (deviceMountPath) => mountReferences(ctx().host, deviceMountPath),
    },
    block,
    nodeExpand: {
      requiresFSResize: () => true,
      async nodeExpand(o) {
        const source = csiSourceOf(o.spec)
        if (!source || source.ephemeral) throw new Error(`volume ${o.spec.name} is not a CSI persistent volume`)
        const driver = driverOf(rt, source.driver)
        const capabilities = await capabilitiesOf(rt, source.driver)
        // kubelet: OperationNotSupported, which the resize treats as nothing to do on the node.
        if (!capabilities.includes('EXPAND_VOLUME')) return true
        const secrets = await readSecrets(ctx().objects, source.nodeExpandSecretRef, 'default')
        try {
          await call(rt, source.driver, '/csi.v1.Node/NodeExpandVolume', (co) =>
            driver.nodeExpandVolume(
              {
                volumeId: source.volumeHandle,
                volumePath: o.deviceMountPath,
                stagingTargetPath: capabilities.includes('STAGE_UNSTAGE_VOLUME') ? o.deviceStagePath : '',
                requiredBytes: o.newSize,
                volumeCapability: isBlockSpec(o.spec)
                  ? { block: {}, accessMode: accessModeOf(o.spec, capabilities) }
                  : { mount: { fsType: source.fsType, mountFlags: [] }, accessMode: accessModeOf(o.spec, capabilities) },
                secrets,
              },
              co,
            ),
          )
        } catch (err) {
          // kubelet csi_expander / csi_client: FailedPrecondition (the volume cannot grow while in use
          // on this node) and InvalidArgument / OutOfRange (the size is infeasible) are kinds of their own.
          const message = `Expander.NodeExpand failed to expand the volume : ${errorMessage(err)}`
          if (hasGrpcCode(err, 'FailedPrecondition')) throw new NodeExpansionError('failed-precondition', message, { cause: err })
          if (hasGrpcCode(err, 'InvalidArgument', 'OutOfRange')) throw new NodeExpansionError('infeasible', message, { cause: err })
          // Any other failure carries the expander's prefix too, of the kind its code says.
          throw rewordedError(message, classifyCsiError('rpc NodeExpandVolume', err))
        }
        return true
      },
    },
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

