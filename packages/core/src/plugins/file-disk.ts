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
 * check (the attach itself when the volume is not attachable), then refuse a device far larger than
 * the PV's capacity, format only if blank, check (`fsck -a`, read-write mounts of an existing
 * filesystem), mount at `plugins/kubevol.io/file-disk/mounts/<pv>`; set up = bind into the pod; tear down,
 * unmount device (detaching what mount device attached) and detach run in reverse. In block mode the
 * loop device is mapped into the pod. Expansion grows the image, refreshes the loop device and grows
 * the file system (online where the file system allows it).
 */
import { joinPath } from '../paths.js'
import {
  FILE_DISK_DRIVER,
  FILE_DISK_PLUGIN_NAME,
  type FileDiskImages,
  createFileDiskImages,
  imageOf,
  refuseOversizedImage,
  requireImage,
} from './file-disk-images.js'
import type { BlockCapability, DeviceMountCapability, NodeExpandCapability, VolumePlugin } from './plugin.js'
import { createBindMounter, createBindUnmounter } from './util/bind-into-pod.js'
import { globalDeviceMount } from './util/safe-format-and-mount.js'

export { FILE_DISK_DRIVER, FILE_DISK_PLUGIN_NAME } from './file-disk-images.js'

/**
 * The plugin part of a fileDisk volume's unique name: the kubelet's CSI plugin name, so that a
 * volume is `kubernetes.io/csi/filedisk.kubevol.io^<volumeHandle>`, the name the attach/detach
 * controller lists in `status.volumesAttached` and expects in `status.volumesInUse`.
 */
const UNIQUE_NAME_PREFIX = 'kubernetes.io/csi'

/** `<driver>^<handle>`, or a bare handle from a name made before the CSI form. */
const imageOfVolumeName = (volumeName: string): string =>
  volumeName.startsWith(`${FILE_DISK_DRIVER}^`) ? volumeName.slice(FILE_DISK_DRIVER.length + 1) : volumeName

export function createFileDiskPlugin(): VolumePlugin {
  const images = createFileDiskImages()
  let deviceMount: DeviceMountCapability | undefined
  const pluginData = (podUID: string, name: string): string => joinPath(images.context.paths.podPluginDir(podUID, FILE_DISK_PLUGIN_NAME), name)

  return {
    name: FILE_DISK_PLUGIN_NAME,
    init: (ctx) => images.init(ctx),
    canSupport: (spec) => imageOf(spec) !== undefined,
    // As the CSI plugin names a volume: `<driver>^<volumeHandle>`.
    getVolumeName: (spec) => `${FILE_DISK_DRIVER}^${requireImage(spec).image}`,
    uniqueNamePrefix: UNIQUE_NAME_PREFIX,
    requiresRemount: () => false,
    supportsMountOption: () => true,
    supportsSELinuxContextMount: () => true,
    newMounter(spec, pod) {
      requireImage(spec)
      const { context } = images
      const podUID = pod.metadata.uid ?? ''
      return createBindMounter({
        context,
        pluginName: FILE_DISK_PLUGIN_NAME,
        pod,
        source: () => images.globalPath(spec),
        dir: context.paths.podVolumeDir(podUID, FILE_DISK_PLUGIN_NAME, spec.name),
        readOnly: spec.readOnly,
        mountOptions: [],
        fsGroupRecord: joinPath(pluginData(podUID, spec.name), 'fsgroup'),
      })
    },
    newUnmounter(innerName, podUID) {
      const { context } = images
      return createBindUnmounter(context, context.paths.podVolumeDir(podUID, FILE_DISK_PLUGIN_NAME, innerName), pluginData(podUID, innerName))
    },
    attach: {
      canAttach: (spec) => imageOf(spec) !== undefined && images.attachRequired(),
      attach: (spec) => images.attachImage(spec),
      // The attachment is local to the node and idempotent: waiting for it is making sure of it. After
      // a crash between the journal's intent and the attach itself, this attaches the image again.
      waitForAttach: (spec, devicePath) => images.attachImage(spec, devicePath),
      detach: (volumeName) => images.attachments().detach(imageOfVolumeName(volumeName)),
    },
    // Made on first use: the host is known only once the plugin manager has called init.
    get deviceMount() {
      return (deviceMount ??= createFileDiskDeviceMount(images))
    },
    block: createFileDiskBlock(images),
    nodeExpand: createFileDiskExpander(images),
  }
}

/** The device step: attach (when the node need not attach the volume) or check the loop device, then format only if blank, check and mount. */
function createFileDiskDeviceMount(images: FileDiskImages): DeviceMountCapability {
  const global = globalDeviceMount(images.context.host, {
    // Block volumes too, as CSI PVs: every pod of a volume shares its unique name and device step.
    canDeviceMount: (spec) => imageOf(spec) !== undefined,
    getDeviceMountPath: images.globalPath,
    device: (_spec, devicePath) => devicePath,
    fstype: (spec) => requireImage(spec).fsType,
  })
  return {
    ...global,
    // Checked again right before fsck and mount: the image may have been taken since the attach,
    // and after a restart the recorded device path may name a loop device that is not ours now.
    async mountDevice(spec, devicePath, deviceMountPath, args) {
      const device = await images.attachInDeviceStep(spec, deviceMountPath, devicePath)
      if (devicePath && device !== devicePath) images.context.logger.info('fileDisk image is attached elsewhere than recorded', { image: requireImage(spec).image, recorded: devicePath, device })
      // What mkfs would span is the device, not the file: the image may have changed since the attach.
      const { blockDevices } = images.context.host
      if (blockDevices) refuseOversizedImage(spec, await blockDevices.size(device), 'is attached as a loop device of')
      return global.mountDevice(spec, device, deviceMountPath, args)
    },
    async unmountDevice(deviceMountPath) {
      await global.unmountDevice(deviceMountPath)
      await images.detachInDeviceStep(deviceMountPath)
    },
  }
}

/** Block mode: the image's loop device is mapped into the pod. */
function createFileDiskBlock(images: FileDiskImages): BlockCapability {
  const podDeviceMapPath = (podUID: string, linkName: string) => ({ dir: images.context.paths.podVolumeDeviceDir(podUID, FILE_DISK_PLUGIN_NAME), linkName })
  return {
    newBlockVolumeMapper(spec, pod) {
      const podUID = pod.metadata.uid ?? ''
      return {
        getGlobalMapPath: images.mapPath,
        getPodDeviceMapPath: () => podDeviceMapPath(podUID, spec.name),
        // The device step: a volume the node need not attach has its loop device attached here.
        setUpDevice: async () => {
          await images.attachInDeviceStep(spec, images.mapPath(spec))
          return images.mapPath(spec)
        },
        // The device to link into the pod: kubevol's loop device of the image (the in-use checks again).
        mapPodDevice: async () => (await images.attachments().find(requireImage(spec).image, images.ownUse(spec))) ?? '',
      }
    },
    newBlockVolumeUnmapper(innerName, podUID) {
      return {
        getGlobalMapPath: images.mapPath,
        getPodDeviceMapPath: () => podDeviceMapPath(podUID, innerName),
        tearDownDevice: (path) => images.detachInDeviceStep(path),
      }
    },
  }
}

/** Expansion grows the image, refreshes the loop device and grows the file system (online where the file system allows it). */
function createFileDiskExpander(images: FileDiskImages): NodeExpandCapability {
  return {
    requiresFSResize: () => true,
    async nodeExpand(options) {
      const { image, fsType } = requireImage(options.spec)
      const { host } = images.context
      if (!host.truncate) throw new Error('the host cannot grow disk images')
      const info = await host.stat(image)
      if (info && info.size < options.newSize) await host.truncate(image, options.newSize)
      const device = await images.attachments().find(image, images.ownUse(options.spec))
      if (!device) throw new Error(`disk image ${image} is not attached`)
      await images.loops().refreshCapacity(device)
      // Block volumes have no file system to grow: the pod sees the bigger device.
      if (options.spec.persistentVolume?.spec?.volumeMode === 'Block') return true
      if (!host.filesystems) throw new Error('the host has no filesystem tools')
      await host.filesystems.resize(device, fsType, options.deviceStagePath || undefined)
      return true
    },
  }
}
