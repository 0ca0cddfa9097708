/**
 * Which loop device of a fileDisk image is kubevol's own, and refusing an image someone else uses.
 *
 * An image attached to a loop device by someone else, mounted or not, is not kubevol's to mount:
 * mounting its filesystem a second time shares it with a foreign user, runs fsck under them, and
 * leaves a global mount UnmountDevice will never remove (the foreign mount counts as a reference).
 * So a loop device backed by the image is kubevol's only when
 * - the attach record under the plugin directory names it, with the same attachment (the host's
 *   value for one attach: a later attach of the same device does not match), or
 * - its filesystem is mounted, and only at this volume's device mount path or in pods' directories
 *   (kubevol's own mount, adopted after a crash that lost the record), or
 * - the record says an attach was under way and the device is neither mounted nor held open
 *   (kubevol was killed between the attach and writing its record), or
 * - it is the device path reported as this volume's attachment (by the attach/detach controller in
 *   controller mode, or by kubevol's journal), it is neither mounted nor held open, and kubevol's
 *   own last word on the image was not that it detached it (a tombstone record: a journal entry
 *   left stale by a crash right after the detach must not claim someone else's attach).
 * Any other loop device backed by the image, or a mount of it anywhere else, makes the image "in use".
 */
import { HostError } from '../errors.js'
import type { LoopDeviceStatus, LoopDevices } from '../host/host.js'
import { joinPath } from '../paths.js'
import { decodeUtf8, encodeUtf8 } from '../text.js'
import type { VolumePluginContext } from './plugin.js'

/** What kubevol last did with an image: attaching it, attached it (device and attachment), or detached it. */
type AttachRecord =
  | { readonly image: string; readonly state: 'attaching' | 'detached' }
  | { readonly image: string; readonly state: 'attached'; readonly device: string; readonly attachment: string }

/** What a check may count as the volume's own. */
export interface OwnUse {
  /** True for a mount point of the device that is kubevol's own for this volume. */
  readonly ownMount: (target: string) => boolean
  /** The device path the volume's attach reported (node status or journal); empty or absent when none. */
  readonly reported?: string
}

/** The loop devices kubevol attached for fileDisk images, told apart from everyone else's. */
export interface FileDiskLoops {
  /**
   * The image's loop device that is kubevol's, attaching one when there is none. Throws the
   * "is in use" error when another loop device is backed by the image or its filesystem is mounted
   * anywhere but `use.ownMount` allows.
   */
  attach(image: string, use: OwnUse): Promise<string>
  /** kubevol's loop device of the image, if any (same checks as `attach`, without attaching). */
  find(image: string, use: OwnUse): Promise<string | undefined>
  /** Detaches kubevol's loop devices of the image and records that it did; anyone else's stay. */
  detach(image: string): Promise<void>
}

/** 64-bit FNV-1a of `text`, in hex: a file name for an image path of any length. */
function fnv1a64(text: string): string {
  let hash = 0xcbf29ce484222325n
  for (const byte of encodeUtf8(text)) hash = ((hash ^ BigInt(byte)) * 0x100000001b3n) & 0xffffffffffffffffn
  return hash.toString(16).padStart(16, '0')
}

/** The "in use" error, with what the image is used by. */
function inUse(driver: string, image: string, device: string, how: string): Error {
  return new Error(`${driver} volumeHandle ${image} is in use: attached as ${device} ${how}; kubevol mounts only an image no one else has attached`)
}

/** The attach records of fileDisk images, one file per image in `<pluginDir>/loops`. */
interface AttachRecords {
  /** The image's record; undefined when there is none or it cannot be read (logged). */
  read(image: string): Promise<AttachRecord | undefined>
  /** Replaces the image's record. */
  write(record: AttachRecord): Promise<void>
}

function createAttachRecords(context: VolumePluginContext, pluginDir: string): AttachRecords {
  const recordDir = () => joinPath(pluginDir, 'loops')
  const recordPath = (image: string) => joinPath(recordDir(), `${fnv1a64(image)}.json`)
  return {
    async read(image) {
      const { host } = context
      if (!(await host.lstat(recordPath(image)))) return undefined
      // A read that fails (a level swapped for a symlink meanwhile: ELOOP) says nothing of whose the
      // device is: it fails the step, to be tried again. Only a record that reads and is not a
      // record is ignored.
      const text = decodeUtf8(await host.readFile(recordPath(image)))
      try {
        const record = JSON.parse(text) as AttachRecord
        return record.image === image ? record : undefined
      } catch (err) {
        context.logger.warn('Ignoring an unreadable fileDisk attach record', { image, path: recordPath(image), err: String(err) })
        return undefined
      }
    },
    // Written whole and renamed into place: a record is never half there after a kill.
    async write(record) {
      const { host } = context
      await host.mkdir(recordDir(), { recursive: true, mode: 0o750 })
      const path = recordPath(record.image)
      await host.writeFile(`${path}.tmp`, JSON.stringify(record), { mode: 0o600 })
      await host.rename(`${path}.tmp`, path)
    },
  }
}

/**
 * Detaches the loop device of an attach that fails after it was made, and records so. When the
 * detach fails too, the record still says "under way": the next attach adopts the idle device.
 */
async function undoAttach(
  context: VolumePluginContext,
  loops: LoopDevices,
  writeRecord: AttachRecords['write'],
  { image, device, cause }: { image: string; device: string; cause: unknown },
): Promise<void> {
  try {
    await loops.detach(device)
  } catch (err) {
    context.logger.warn('Could not detach the loop device of a failed fileDisk attach', { image, device, err: String(err), cause: String(cause) })
    return
  }
  await writeRecord({ image, state: 'detached' }).catch(() => undefined)
}

/** Loop device bookkeeping of the fileDisk plugin; records live in `<pluginDir>/loops`. */
export function createFileDiskLoops(context: VolumePluginContext, options: { readonly driver: string; readonly pluginDir: string; readonly loops: () => LoopDevices }): FileDiskLoops {
  const { driver, loops } = options
  const records = createAttachRecords(context, options.pluginDir)
  const readRecord = records.read
  const writeRecord = records.write

  const isRecorded = (record: AttachRecord | undefined, device: string, status: LoopDeviceStatus) =>
    record?.state === 'attached' && record.device === device && record.attachment === status.attachment

  /** kubevol's loop device for the image, after checking every device backed by it. */
  async function own(image: string, use: OwnUse): Promise<string | undefined> {
    const record = await readRecord(image)
    let ours: { device: string; status: LoopDeviceStatus; recorded: boolean } | undefined
    for (const device of await loops().find(image)) {
      const status = await loops().status(device)
      if (!status) continue
      const foreign = status.mountPoints.filter((target) => !use.ownMount(target))
      if (foreign.length > 0) throw inUse(driver, image, device, `and mounted at ${foreign.join(', ')}`)
      const recorded = isRecorded(record, device, status)
      const idle = status.mountPoints.length === 0 && !status.held
      const cutOff = record?.state === 'attaching' && idle
      const reported = use.reported === device && record?.state !== 'detached' && idle
      if (ours === undefined && (recorded || status.mountPoints.length > 0 || cutOff || reported)) {
        ours = { device, status, recorded }
        continue
      }
      if (status.held) throw inUse(driver, image, device, 'and held open exclusively elsewhere (mounted in another mount namespace, or a device mapper on it)')
      throw inUse(driver, image, device, ours ? `besides kubevol's ${ours.device}` : 'by someone else, not by kubevol for this volume')
    }
    if (ours && !ours.recorded) {
      context.logger.info('Adopted the loop device of a fileDisk image', { image, device: ours.device })
      await writeRecord({ image, state: 'attached', device: ours.device, attachment: ours.status.attachment })
    }
    return ours?.device
  }

  return {
    find: own,
    async attach(image, use) {
      const existing = await own(image, use)
      if (existing) return existing
      await writeRecord({ image, state: 'attaching' })
      let device: string
      try {
        // The adapter checks the type again on what it opens, without following a symlink swapped in since.
        device = await loops().attach(image, { regularFile: true })
      } catch (err) {
        // Not left saying "under way" after a plain failure: a loop device someone attaches later
        // must not pass for this one. A call that timed out may have attached, so that one stays.
        if (!(err instanceof HostError && err.code === 'ETIMEDOUT')) await writeRecord({ image, state: 'detached' }).catch(() => undefined)
        throw err
      }
      try {
        const status = await loops().status(device)
        if (!status) throw new Error(`loop device ${device} of ${image} was detached right after the attach`)
        await writeRecord({ image, state: 'attached', device, attachment: status.attachment })
      } catch (err) {
        // The step fails, so no one will detach what it attached: undone here. Nothing uses the
        // device yet. If the undo fails too, the record still says "under way", and the next
        // attach of the image adopts the idle device (or its detach removes it).
        await undoAttach(context, loops(), writeRecord, { image, device, cause: err })
        throw err
      }
      return device
    },
    async detach(image) {
      const record = await readRecord(image)
      for (const device of await loops().find(image)) {
        const status = await loops().status(device)
        if (!status) continue
        const cutOff = record?.state === 'attaching' && status.mountPoints.length === 0 && !status.held
        if (isRecorded(record, device, status) || cutOff) await loops().detach(device)
        else context.logger.info('Left a loop device of a fileDisk image that kubevol did not attach', { image, device })
      }
      // A tombstone, not nothing: a device path the journal still reports after a crash right
      // here must not make someone else's later attach of the image pass for kubevol's.
      await writeRecord({ image, state: 'detached' })
    },
  }
}

/**
 * Which image a device mount path (or block map path) attached in its own step: a fileDisk volume
 * the node need not attach (CSIDriver `attachRequired: false`) has its loop device attached when
 * its device is mounted or set up, and detached when that is undone. The undoing step is given
 * only the path, so the path's record names the image. Written before the attach, so a crash
 * right after it still leaves the loop device to be detached; removed once it is.
 */
export interface StagedImages {
  /** Records that the step at `path` attaches `image` (durably, before it does). */
  staged(path: string, image: string): Promise<void>
  /** The image the step at `path` attached, if it did. */
  imageStagedAt(path: string): Promise<string | undefined>
  /** Forgets the record of `path` (its loop device was detached). */
  unstaged(path: string): Promise<void>
}

/** Records live in `<pluginDir>/staged`, one per path. */
export function createStagedImages(context: VolumePluginContext, pluginDir: string): StagedImages {
  const dir = () => joinPath(pluginDir, 'staged')
  const recordPath = (path: string) => joinPath(dir(), `${fnv1a64(path)}.json`)
  return {
    async staged(path, image) {
      const { host } = context
      await host.mkdir(dir(), { recursive: true, mode: 0o750 })
      const file = recordPath(path)
      await host.writeFile(`${file}.tmp`, JSON.stringify({ path, image }), { mode: 0o600 })
      await host.rename(`${file}.tmp`, file)
    },
    async imageStagedAt(path) {
      const { host } = context
      if (!(await host.lstat(recordPath(path)))) return undefined
      // As an attach record: a read that fails fails the step; only content that is no record is ignored.
      const text = decodeUtf8(await host.readFile(recordPath(path)))
      try {
        const record = JSON.parse(text) as { path?: string; image?: string }
        return record.path === path && typeof record.image === 'string' ? record.image : undefined
      } catch (err) {
        context.logger.warn('Ignoring an unreadable fileDisk stage record', { path, err: String(err) })
        return undefined
      }
    },
    async unstaged(path) {
      if (await context.host.lstat(recordPath(path))) await context.host.remove(recordPath(path))
    },
  }
}
