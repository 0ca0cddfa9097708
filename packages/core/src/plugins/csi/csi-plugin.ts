/**
 * The CSI volume plugin (`kubernetes.io/csi`, node side, SPEC §7.7): PVs with `spec.csi` and inline
 * `csi:` ephemeral volumes, served by the drivers registered in a {@link CsiDriverRegistry}.
 * The reserved driver `filedisk.kubevol.io` belongs to the built-in fileDisk plugin and is never
 * claimed here. Raw block volumes (`volumeMode: Block`) are staged and published with the `block`
 * access type (see block.ts).
 */
import type { VolumeAttachment } from '../../api/kubernetes.js'
import type { VolumeSpec } from '../../api/volume-spec.js'
import { ConfigError } from '../../errors.js'
import { FILE_DISK_DRIVER } from '../file-disk.js'
import type { VolumePlugin, VolumePluginContext } from '../plugin.js'
import { createCsiAttacher } from './attachment.js'
import { createCsiDeviceMounter } from './device-mounter.js'
import { createCsiBlock } from './block.js'
import { CSI_DEFAULT_TIMEOUT_MS } from './deadline.js'
import type { CsiDriverRegistry } from './driver-registry.js'
import { createCsiDriverObjects } from './driver-objects.js'
import { createCsiExpander } from './expand.js'
import { newCsiMounter } from './mounter.js'
import { prepareUnpublishVolume, publishPaths, unpublishVolume } from './publish.js'
import { csiSourceOf } from './requests.js'
import { CSI_PLUGIN_NAME, type CsiRuntime } from './runtime.js'
import { volumeSpecFromVolData } from './vol-data.js'

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
      return newCsiMounter(rt, spec, pod)
    },
    newUnmounter(innerName, podUID) {
      return {
        getPath: () => publishPaths(rt, podUID, innerName).target,
        tearDown: () => unpublishVolume(rt, podUID, innerName),
        prepareTearDown: () => prepareUnpublishVolume(rt, podUID, innerName),
      }
    },
    constructVolumeSpec: (innerName, mountPath) => volumeSpecFromVolData(ctx().host, innerName, mountPath),
    attach: createCsiAttacher(rt, (spec) => claimed(spec) !== undefined && attachRequired(spec)),
    deviceMount: createCsiDeviceMounter(rt, isPersistent),
    block,
    nodeExpand: createCsiExpander(rt),
  }
}
