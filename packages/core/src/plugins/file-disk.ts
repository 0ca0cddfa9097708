/**
 * fileDisk (`kubevol.io/file-disk`): kubevol's own attachable volume, a disk image file presented
 * as a block device. A PV declares it as
 * `csi: { driver: filedisk.kubevol.io, volumeHandle: <absolute path of the image>, fsType: ext4|xfs }`;
 * this reserved driver name is served by this built-in plugin, never by an external CSI driver.
 *
 * Named and attached as the kubelet's CSI plugin would a PV of that driver: unique name
 * `kubernetes.io/csi/filedisk.kubevol.io^<handle>` (the attach/detach controller's name), and
 * attachable unless the CSIDriver object `filedisk.kubevol.io` says `attachRequired: false`.
 *
 * attach = attach the image to a loop device (reusing only kubevol's own: an image someone else
 * attached or mounted is refused as in use, see `file-disk-loops.ts`); mount device = the same
 * check (the attach itself when the volume is not attachable), then format only if blank, check,
 * mount at `plugins/kubevol.io/file-disk/mounts/<pv>`; set up = bind into the pod; tear down,
 * unmount device (detaching what mount device attached) and detach run in reverse. In block mode the
 * loop device is mapped into the pod. Expansion grows the image, refreshes the loop device and grows
 * the file system (online where the file system allows it).
 */
import type { VolumeSpec } from '../api/volume-spec.js'
import { joinPath } from '../paths.js'
import { createCsiDriverObjects } from './csi/driver-objects.js'
import { type FileDiskLoops, createFileDiskLoops, createStagedImages } from './file-disk-loops.js'
import type { DeviceMountCapability, VolumePlugin, VolumePluginContext } from './plugin.js'
import { createBindMounter, createBindUnmounter } from './util/bind-into-pod.js'
import { globalDeviceMount } from './util/safe-format-and-mount.js'

export const FILE_DISK_PLUGIN_NAME = 'kubevol.io/file-disk'
/** The CSI driver name a PV uses to ask for a fileDisk volume. */
export const FILE_DISK_DRIVER = 'filedisk.kubevol.io'
/**
 * The plugin part of a fileDisk volume's unique name: the kubelet's CSI plugin name, so that a
 * volume is `kubernetes.io/csi/filedisk.kubevol.io^<volumeHandle>`, the name the attach/detach
 * controller lists in `status.volumesAttached` and expects in `status.volumesInUse`.
 */
const UNIQUE_NAME_PREFIX = 'kubernetes.io/csi'

function imageOf(spec: VolumeSpec): { image: string; fsType: string } | undefined {
  const csi = spec.persistentVolume?.spec?.csi
  if (csi?.driver !== FILE_DISK_DRIVER) return undefined
  return { image: csi.volumeHandle, fsType: csi.fsType || 'ext4' }
}

function requireImage(spec: VolumeSpec): { image: string; fsType: string } {
  const source = imageOf(spec)
  if (!source) throw new Error(`volume ${spec.name} is not a ${FILE_DISK_DRIVER} volume`)
  if (!source.image.startsWith('/') || source.image.split('/').includes('..')) {
    throw new Error(`invalid ${FILE_DISK_DRIVER} volumeHandle "${source.image}": must be an absolute path without '..'`)
  }
  return source
}

export function createFileDiskPlugin(): VolumePlugin {
  let context: VolumePluginContext
  let deviceMount: DeviceMountCapability | undefined
  let ownLoops: FileDiskLoops | undefined
  const driverObjects = createCsiDriverObjects(() => context.objects)
  /**
   * The kubelet's CSI rule (`skipAttach`): attach unless the CSIDriver object says
   * `attachRequired: false`. No object, or none readable yet, means attach; a first call starts
   * reading it, and object changes read it again.
   */
  const attachRequired = (): boolean => {
    const object = driverObjects.peek(FILE_DISK_DRIVER)
    if (object === undefined) readDriverObject()
    return object?.spec?.attachRequired !== false
  }
  // One read at a time: canAttach is asked on every populator pass while the API cannot answer.
  let reading = false
  const readDriverObject = (): void => {
    if (reading) return
    reading = true
    driverObjects
      .fetch(FILE_DISK_DRIVER)
      .catch((err: unknown) => context.logger.warn('Could not read the fileDisk CSIDriver object', { driver: FILE_DISK_DRIVER, err: String(err) }))
      .finally(() => {
        reading = false
      })
  }
  const loops = () => {
    const loop = context.host.loopDevices
    if (!loop) throw new Error(`${FILE_DISK_DRIVER} volumes need a host that can attach loop devices`)
    return loop
  }
  // Made on first use: the context is known only once the plugin manager has called init.
  const attachments = () =>
    (ownLoops ??= createFileDiskLoops(context, { driver: FILE_DISK_DRIVER, pluginDir: context.paths.pluginDir(FILE_DISK_PLUGIN_NAME), loops }))
  let ownStaged: ReturnType<typeof createStagedImages> | undefined
  const staged = () => (ownStaged ??= createStagedImages(context, context.paths.pluginDir(FILE_DISK_PLUGIN_NAME)))
  const globalPath = (spec: VolumeSpec): string => joinPath(context.paths.pluginDir(FILE_DISK_PLUGIN_NAME), 'mounts', spec.name)
  const mapPath = (spec: VolumeSpec): string => joinPath(context.paths.volumeDevicePluginDir(FILE_DISK_PLUGIN_NAME), spec.name)
  /** kubevol's own uses of the volume's device: its device mount path, its block map path, binds into pods, the reported attach. */
  const ownUse = (spec: VolumeSpec, reported?: string) => ({
    ownMount: (target: string) => target === globalPath(spec) || target.startsWith(`${mapPath(spec)}/`) || target.startsWith(`${context.paths.podsDir}/`),
    reported,
  })
  const pluginData = (podUID: string, name: string): string => joinPath(context.paths.podPluginDir(podUID, FILE_DISK_PLUGIN_NAME), name)

  /**
   * kubevol's loop device of the image, attaching it when there is none. Idempotent. The handle
   * must be a regular file itself: a block device (or a symlink to one) may hold a filesystem
   * mounted elsewhere, and a second loop device over it would let two ext4 mounts write the same
   * blocks. An image someone else attached, or whose loop device is mounted anywhere but here, is
   * refused as in use. `reported`: the device path this volume's attach reported (the controller's
   * in controller mode), which counts as kubevol's when nothing else uses it.
   */
  async function attachImage(spec: VolumeSpec, reported?: string): Promise<string> {
    const { image } = requireImage(spec)
    const info = await context.host.lstat(image)
    if (!info) throw new Error(`disk image ${image} does not exist`)
    if (info.type !== 'file') {
      throw new Error(
        `${FILE_DISK_DRIVER} volumeHandle ${image} is a ${info.type.replace('-', ' ')}, not a regular file: a fileDisk volume must name its disk image file itself (a device or a symlink is refused, so that a filesystem in use elsewhere is never mounted a second time)`,
      )
    }
    return attachments().attach(image, ownUse(spec, reported))
  }

  /**
   * The device step's attach of a volume the node need not attach (SPEC §7.7: the device step of a
   * CSI volume without attach). Recorded first, so that undoing the step at `path` detaches it,
   * after a restart too. An attachable volume was attached by its attach step: only checked again.
   */
  async function attachInDeviceStep(spec: VolumeSpec, path: string, reported?: string): Promise<string> {
    if (!attachRequired()) await staged().staged(path, requireImage(spec).image)
    return attachImage(spec, reported)
  }

  /** Undoes {@link attachInDeviceStep} once the device at `path` is unmounted or torn down. */
  async function detachInDeviceStep(path: string): Promise<void> {
    const image = await staged().imageStagedAt(path)
    if (image === undefined) return
    await attachments().detach(image)
    await staged().unstaged(path)
  }

  /** `<driver>^<handle>`, or a bare handle from a name made before the CSI form. */
  const imageOfVolumeName = (volumeName: string): string =>
    volumeName.startsWith(`${FILE_DISK_DRIVER}^`) ? volumeName.slice(FILE_DISK_DRIVER.length + 1) : volumeName

  return {
    name: FILE_DISK_PLUGIN_NAME,
    init(ctx) {
      context = ctx
      readDriverObject()
      ctx.objects.subscribe?.((changed) => {
        if (!changed || changed.kind === 'CSIDriver') void driverObjects.refreshAll()
      })
    },
    canSupport: (spec) => imageOf(spec) !== undefined,
    // As the CSI plugin names a volume: `<driver>^<volumeHandle>`.
    getVolumeName: (spec) => `${FILE_DISK_DRIVER}^${requireImage(spec).image}`,
    uniqueNamePrefix: UNIQUE_NAME_PREFIX,
    requiresRemount: () => false,
    supportsMountOption: () => true,
    supportsSELinuxContextMount: () => true,
    newMounter(spec, pod) {
      requireImage(spec)
      const podUID = pod.metadata.uid ?? ''
      return createBindMounter({
        context,
        pluginName: FILE_DISK_PLUGIN_NAME,
        pod,
        source: () => globalPath(spec),
        dir: context.paths.podVolumeDir(podUID, FILE_DISK_PLUGIN_NAME, spec.name),
        readOnly: spec.readOnly,
        mountOptions: [],
        fsGroupRecord: joinPath(pluginData(podUID, spec.name), 'fsgroup'),
      })
    },
    newUnmounter(innerName, podUID) {
      return createBindUnmounter(context, context.paths.podVolumeDir(podUID, FILE_DISK_PLUGIN_NAME, innerName), pluginData(podUID, innerName))
    },
    attach: {
      canAttach: (spec) => imageOf(spec) !== undefined && attachRequired(),
      attach: (spec) => attachImage(spec),
      // The attachment is local to the node and idempotent: waiting for it is making sure of it. After
      // a crash between the journal's intent and the attach itself, this attaches the image again.
      waitForAttach: (spec, devicePath) => attachImage(spec, devicePath),
      detach: (volumeName) => attachments().detach(imageOfVolumeName(volumeName)),
    },
    // Made on first use: the host is known only once the plugin manager has called init.
    get deviceMount() {
      if (deviceMount) return deviceMount
      const global = globalDeviceMount(context.host, {
        // Block volumes too, as CSI PVs: every pod of a volume shares its unique name and device step.
        canDeviceMount: (spec) => imageOf(spec) !== undefined,
        getDeviceMountPath: globalPath,
        device: (_spec, devicePath) => devicePath,
        fstype: (spec) => requireImage(spec).fsType,
      })
      deviceMount = {
        ...global,
        // Checked again right before fsck and mount: the image may have been taken since the attach,
        // and after a restart the recorded device path may name a loop device that is not ours now.
        async mountDevice(spec, devicePath, deviceMountPath, args) {
          const device = await attachInDeviceStep(spec, deviceMountPath, devicePath)
          if (devicePath && device !== devicePath) context.logger.info('fileDisk image is attached elsewhere than recorded', { image: requireImage(spec).image, recorded: devicePath, device })
          return global.mountDevice(spec, device, deviceMountPath, args)
        },
        async unmountDevice(deviceMountPath) {
          await global.unmountDevice(deviceMountPath)
          await detachInDeviceStep(deviceMountPath)
        },
      }
      return deviceMount
    },
    block: {
      newBlockVolumeMapper(spec, pod) {
        const podUID = pod.metadata.uid ?? ''
        return {
          getGlobalMapPath: mapPath,
          getPodDeviceMapPath: () => ({ dir: context.paths.podVolumeDeviceDir(podUID, FILE_DISK_PLUGIN_NAME), linkName: spec.name }),
          // The device step: a volume the node need not attach has its loop device attached here.
          setUpDevice: async () => {
            await attachInDeviceStep(spec, mapPath(spec))
            return mapPath(spec)
          },
          // The device to link into the pod: kubevol's loop device of the image (the in-use checks again).
          mapPodDevice: async () => (await attachments().find(requireImage(spec).image, ownUse(spec))) ?? '',
        }
      },
      newBlockVolumeUnmapper(innerName, podUID) {
        return {
          getGlobalMapPath: mapPath,
          getPodDeviceMapPath: () => ({ dir: context.paths.podVolumeDeviceDir(podUID, FILE_DISK_PLUGIN_NAME), linkName: innerName }),
          tearDownDevice: (path) => detachInDeviceStep(path),
        }
      },
    },
    nodeExpand: {
      requiresFSResize: () => true,
      async nodeExpand(options) {
        const { image, fsType } = requireImage(options.spec)
        const { host } = context
        if (!host.truncate) throw new Error('the host cannot grow disk images')
        const info = await host.stat(image)
        if (info && info.size < options.newSize) await host.truncate(image, options.newSize)
        const device = await attachments().find(image, ownUse(options.spec))
        if (!device) throw new Error(`disk image ${image} is not attached`)
        await loops().refreshCapacity(device)
        // Block volumes have no file system to grow: the pod sees the bigger device.
        if (options.spec.persistentVolume?.spec?.volumeMode === 'Block') return true
        if (!host.filesystems) throw new Error('the host has no filesystem tools')
        await host.filesystems.resize(device, fsType, options.deviceStagePath || undefined)
        return true
      },
    },
  }
}
