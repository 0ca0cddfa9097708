/**
 * fileDisk (`kubevol.io/file-disk`): kubevol's own attachable volume, a disk image file presented
 * as a block device. A PV declares it as
 * `csi: { driver: filedisk.kubevol.io, volumeHandle: <absolute path of the image>, fsType: ext4|xfs }`;
 * this reserved driver name is served by this built-in plugin, never by an external CSI driver.
 *
 * attach = attach the image to a loop device (reusing only kubevol's own: an image someone else
 * attached or mounted is refused as in use, see `file-disk-loops.ts`); mount device = the same
 * check, then format only if blank, check, mount at `plugins/kubevol.io/file-disk/mounts/<pv>`; set
 * up = bind into the pod; tear down, unmount device and detach run in reverse. In block mode the
 * loop device is mapped into the pod. Expansion grows the image, refreshes the loop device and grows
 * the file system (online where the file system allows it).
 */
import type { VolumeSpec } from '../api/volume-spec.js'
import { joinPath } from '../paths.js'
import { type FileDiskLoops, createFileDiskLoops } from './file-disk-loops.js'
import type { DeviceMountCapability, VolumePlugin, VolumePluginContext } from './plugin.js'
import { createBindMounter, createBindUnmounter } from './util/bind-into-pod.js'
import { globalDeviceMount } from './util/safe-format-and-mount.js'

export const FILE_DISK_PLUGIN_NAME = 'kubevol.io/file-disk'
/** The CSI driver name a PV uses to ask for a fileDisk volume. */
export const FILE_DISK_DRIVER = 'filedisk.kubevol.io'

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
  const loops = () => {
    const loop = context.host.loopDevices
    if (!loop) throw new Error(`${FILE_DISK_DRIVER} volumes need a host that can attach loop devices`)
    return loop
  }
  // Made on first use: the context is known only once the plugin manager has called init.
  const attachments = () =>
    (ownLoops ??= createFileDiskLoops(context, { driver: FILE_DISK_DRIVER, pluginDir: context.paths.pluginDir(FILE_DISK_PLUGIN_NAME), loops }))
  const globalPath = (spec: VolumeSpec): string => joinPath(context.paths.pluginDir(FILE_DISK_PLUGIN_NAME), 'mounts', spec.name)
  /** kubevol's own uses of the volume's device: its device mount path, binds into pods, the reported attach. */
  const ownUse = (spec: VolumeSpec, reported?: string) => ({
    ownMount: (target: string) => target === globalPath(spec) || target.startsWith(`${context.paths.podsDir}/`),
    reported,
  })
  const mapPath = (spec: VolumeSpec): string => joinPath(context.paths.volumeDevicePluginDir(FILE_DISK_PLUGIN_NAME), spec.name)
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

  return {
    name: FILE_DISK_PLUGIN_NAME,
    init(ctx) {
      context = ctx
    },
    canSupport: (spec) => imageOf(spec) !== undefined,
    getVolumeName: (spec) => requireImage(spec).image,
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
      canAttach: (spec) => imageOf(spec) !== undefined,
      attach: (spec) => attachImage(spec),
      // The attachment is local to the node and idempotent: waiting for it is making sure of it. After
      // a crash between the journal's intent and the attach itself, this attaches the image again.
      waitForAttach: (spec, devicePath) => attachImage(spec, devicePath),
      detach: (image) => attachments().detach(image),
    },
    // Made on first use: the host is known only once the plugin manager has called init.
    get deviceMount() {
      if (deviceMount) return deviceMount
      const global = globalDeviceMount(context.host, {
        canDeviceMount: (spec) => imageOf(spec) !== undefined && spec.persistentVolume?.spec?.volumeMode !== 'Block',
        getDeviceMountPath: globalPath,
        device: (_spec, devicePath) => devicePath,
        fstype: (spec) => requireImage(spec).fsType,
      })
      deviceMount = {
        ...global,
        // Checked again right before fsck and mount: the image may have been taken since the attach,
        // and after a restart the recorded device path may name a loop device that is not ours now.
        async mountDevice(spec, devicePath, deviceMountPath, args) {
          const device = await attachImage(spec, devicePath)
          if (device !== devicePath) context.logger.info('fileDisk image is attached elsewhere than recorded', { image: requireImage(spec).image, recorded: devicePath, device })
          return global.mountDevice(spec, device, deviceMountPath, args)
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
        }
      },
      newBlockVolumeUnmapper(innerName, podUID) {
        return {
          getGlobalMapPath: mapPath,
          getPodDeviceMapPath: () => ({ dir: context.paths.podVolumeDeviceDir(podUID, FILE_DISK_PLUGIN_NAME), linkName: innerName }),
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
