/**
 * The image and loop device bookkeeping of the fileDisk plugin (`file-disk.ts`): the volume's image
 * and file system type from its PV, whether the node attaches it (the CSIDriver object's
 * `attachRequired`), kubevol's loop device of the image, and the attach a device step makes for a
 * volume the node need not attach. The plugin's capabilities are built over this.
 */
import { storageOf } from '../api/quantity.js'
import type { VolumeSpec } from '../api/volume-spec.js'
import { HostError, errorMessage } from '../errors.js'
import type { LoopDevices } from '../host/host.js'
import { joinPath } from '../paths.js'
import { createCsiDriverObjects } from './csi/driver-objects.js'
import { type FileDiskLoops, type OwnUse, type StagedImages, createFileDiskLoops, createStagedImages } from './file-disk-loops.js'
import type { VolumePluginContext } from './plugin.js'

export const FILE_DISK_PLUGIN_NAME = 'kubevol.io/file-disk'
/** The CSI driver name a PV uses to ask for a fileDisk volume. */
export const FILE_DISK_DRIVER = 'filedisk.kubevol.io'

/** The image and file system type of a fileDisk volume; undefined for any other volume. */
export function imageOf(spec: VolumeSpec): { image: string; fsType: string } | undefined {
  const csi = spec.persistentVolume?.spec?.csi
  if (csi?.driver !== FILE_DISK_DRIVER) return undefined
  return { image: csi.volumeHandle, fsType: csi.fsType || 'ext4' }
}

/** {@link imageOf}, throwing for any other volume and for a handle that is not an absolute path without `..`. */
export function requireImage(spec: VolumeSpec): { image: string; fsType: string } {
  const source = imageOf(spec)
  if (!source) throw new Error(`volume ${spec.name} is not a ${FILE_DISK_DRIVER} volume`)
  if (!source.image.startsWith('/') || source.image.split('/').includes('..')) {
    throw new Error(`invalid ${FILE_DISK_DRIVER} volumeHandle "${source.image}": must be an absolute path without '..'`)
  }
  return source
}

/** 1 MiB: the slack every image gets over its capacity, whatever the capacity (alignment of small images). */
const IMAGE_SLACK_BYTES = 2 ** 20

/**
 * The largest image (or loop device) a fileDisk volume of `capacity` bytes accepts: the capacity
 * plus a quarter plus 1 MiB. The image is the volume, so it should be the PV's size (expansion
 * grows it to the new capacity, never beyond); the quarter covers a capacity written in decimal
 * units for an image sized in binary ones or the reverse (`1G` against `1Gi` is 7%, `1P` against
 * `1Pi` 13%), the MiB the rounding of small images. Anything larger is refused before it is
 * attached, formatted or handed to a pod: mkfs would span the whole image, and a sparse one far
 * larger than its PV fills the node's disk behind a small claim.
 */
function maxImageBytes(capacity: number): number {
  return capacity + Math.floor(capacity / 4) + IMAGE_SLACK_BYTES
}

/** Throws when `size` (the image's, or its loop device's) is beyond {@link maxImageBytes} of the PV's capacity; a PV without a capacity is not checked. */
export function refuseOversizedImage(spec: VolumeSpec, size: number, what: 'is' | 'is attached as a loop device of'): void {
  const capacity = storageOf(spec.persistentVolume?.spec?.capacity)
  if (capacity === undefined || size <= maxImageBytes(capacity)) return
  const { image } = requireImage(spec)
  throw new Error(
    `${FILE_DISK_DRIVER} volumeHandle ${image} ${what} ${size} bytes, far larger than the capacity of PersistentVolume ${spec.persistentVolume?.metadata?.name ?? spec.name} (${capacity} bytes; at most ${maxImageBytes(capacity)} accepted): refusing to attach, format or mount it; make the image the PV's size, or give the PV the image's size`,
  )
}

/**
 * An attach refusal of the host (a symlink on the way, not a regular file) in the fileDisk volume's
 * words; anything else as it came. A symlink refused on kubevol's own records (beneath the root) is
 * not the handle's: it keeps the host's message, which names that path.
 */
function refusedHandle(image: string, err: unknown): unknown {
  if (!(err instanceof HostError)) return err
  const onTheHandle = err.path === image || image.startsWith(err.path.endsWith('/') ? err.path : `${err.path}/`)
  if (err.code === 'ELOOP' && onTheHandle) {
    return new Error(`${FILE_DISK_DRIVER} volumeHandle ${image} has a symlink in its path: a fileDisk image is opened without following a symlink at any level (${errorMessage(err)})`, { cause: err })
  }
  if (err.code === 'EINVAL' && err.syscall === 'losetup') {
    return new Error(`${FILE_DISK_DRIVER} volumeHandle ${image} is not a regular file: a fileDisk volume must name its disk image file itself (${errorMessage(err)})`, { cause: err })
  }
  return err
}

/** The fileDisk plugin's images: what its capabilities share. Every member but `init` is used only after `init`. */
export interface FileDiskImages {
  /** The plugin context; set by `init`. */
  readonly context: VolumePluginContext
  /** Takes the plugin context, starts reading the CSIDriver object and reads it again when objects change. */
  init(ctx: VolumePluginContext): void
  /**
   * The kubelet's CSI rule (`skipAttach`): attach unless the CSIDriver object says
   * `attachRequired: false`. No object, or none readable yet, means attach; a first call starts
   * reading it, and object changes read it again.
   */
  attachRequired(): boolean
  /** The host's loop devices; throws when the host cannot attach any. */
  loops(): LoopDevices
  /** kubevol's loop devices of fileDisk images, made on first use. */
  attachments(): FileDiskLoops
  /** The volume's device mount path: `plugins/kubevol.io/file-disk/mounts/<pv>`. */
  globalPath(spec: VolumeSpec): string
  /** The volume's global block map path. */
  mapPath(spec: VolumeSpec): string
  /** kubevol's own uses of the volume's device: its device mount path, its block map path, binds into pods, the reported attach. */
  ownUse(spec: VolumeSpec, reported?: string): OwnUse
  /**
   * kubevol's loop device of the image, attaching it when there is none. Idempotent. The handle
   * must be a regular file itself: a block device (or a symlink to one) may hold a filesystem
   * mounted elsewhere, and a second loop device over it would let two ext4 mounts write the same
   * blocks. An image someone else attached, or whose loop device is mounted anywhere but here, is
   * refused as in use. The host opens the image without following a symlink at any level (a
   * symlinked directory, `/proc/self/...`) and refuses a file of a kernel pseudo-filesystem; an
   * image larger than {@link maxImageBytes} of the PV's capacity is refused before the attach.
   * `reported`: the device path this volume's attach reported (the controller's in controller
   * mode), which counts as kubevol's when nothing else uses it.
   */
  attachImage(spec: VolumeSpec, reported?: string): Promise<string>
  /**
   * The device step's attach of a volume the node need not attach (SPEC §7.7: the device step of a
   * CSI volume without attach). Recorded first, so that undoing the step at `path` detaches it,
   * after a restart too. An attachable volume was attached by its attach step: only checked again.
   */
  attachInDeviceStep(spec: VolumeSpec, path: string, reported?: string): Promise<string>
  /** Undoes {@link FileDiskImages.attachInDeviceStep} once the device at `path` is unmounted or torn down. */
  detachInDeviceStep(path: string): Promise<void>
}

/** The fileDisk plugin's images, over the context `init` gives. */
export function createFileDiskImages(): FileDiskImages {
  let context: VolumePluginContext
  let ownLoops: FileDiskLoops | undefined
  let ownStaged: StagedImages | undefined
  const driverObjects = createCsiDriverObjects(() => context.objects)
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
  const pluginDir = () => context.paths.pluginDir(FILE_DISK_PLUGIN_NAME)
  const staged = () => (ownStaged ??= createStagedImages(context, pluginDir()))

  const images: FileDiskImages = {
    get context() {
      return context
    },
    init(ctx) {
      context = ctx
      readDriverObject()
      ctx.objects.subscribe?.((changed) => {
        if (!changed || changed.kind === 'CSIDriver') void driverObjects.refreshAll()
      })
    },
    attachRequired() {
      const object = driverObjects.peek(FILE_DISK_DRIVER)
      if (object === undefined) readDriverObject()
      return object?.spec?.attachRequired !== false
    },
    loops() {
      const loop = context.host.loopDevices
      if (!loop) throw new Error(`${FILE_DISK_DRIVER} volumes need a host that can attach loop devices`)
      return loop
    },
    // Made on first use: the context is known only once the plugin manager has called init.
    attachments: () => (ownLoops ??= createFileDiskLoops(context, { driver: FILE_DISK_DRIVER, pluginDir: pluginDir(), loops: images.loops })),
    globalPath: (spec) => joinPath(pluginDir(), 'mounts', spec.name),
    mapPath: (spec) => joinPath(context.paths.volumeDevicePluginDir(FILE_DISK_PLUGIN_NAME), spec.name),
    ownUse: (spec, reported) => ({
      ownMount: (target) => target === images.globalPath(spec) || target.startsWith(`${images.mapPath(spec)}/`) || target.startsWith(`${context.paths.podsDir}/`),
      reported,
    }),
    async attachImage(spec, reported) {
      const { image } = requireImage(spec)
      const info = await context.host.lstat(image)
      if (!info) throw new Error(`disk image ${image} does not exist`)
      if (info.type !== 'file') {
        throw new Error(
          `${FILE_DISK_DRIVER} volumeHandle ${image} is a ${info.type.replace('-', ' ')}, not a regular file: a fileDisk volume must name its disk image file itself (a device or a symlink is refused, so that a filesystem in use elsewhere is never mounted a second time)`,
        )
      }
      // Before anything is attached: a far larger image would be formatted (or handed to the pod) whole.
      refuseOversizedImage(spec, info.size, 'is')
      try {
        return await images.attachments().attach(image, images.ownUse(spec, reported))
      } catch (err) {
        throw refusedHandle(image, err)
      }
    },
    async attachInDeviceStep(spec, path, reported) {
      if (!images.attachRequired()) await staged().staged(path, requireImage(spec).image)
      return images.attachImage(spec, reported)
    },
    async detachInDeviceStep(path) {
      const image = await staged().imageStagedAt(path)
      if (image === undefined) return
      await images.attachments().detach(image)
      await staged().unstaged(path)
    },
  }
  return images
}
