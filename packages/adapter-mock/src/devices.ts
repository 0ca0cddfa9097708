/**
 * Block devices: disks a test adds (major 8, like SCSI disks) and loop devices (major 7). A disk
 * holds its own {@link DiskImage}; a loop device shows the image of its backing file (or device), so a
 * filesystem made through `/dev/loop0` is still there when the same file is attached again.
 */
import { makeDev } from './filesystem.js'
import type { DiskImage, FileNode } from './nodes.js'

/** What a loop device is bound to. */
export interface LoopBinding {
  readonly backing: FileNode | BlockDevice
  readonly readOnly: boolean
  /** Detach was asked while the device was open: it goes away on the last unmount (`LO_FLAGS_AUTOCLEAR`). */
  autoclear: boolean
  /** New for every attach of any loop device (Linux's `diskseq`): tells this attachment from a later one. */
  readonly sequence: number
}

/** A block device node's device: a disk or a loop device. */
export interface BlockDevice {
  readonly major: number
  readonly minor: number
  readonly rdev: number
  /** The path it was created at (`/dev/sdb`, `/dev/loop0`). */
  readonly path: string
  /** Size in bytes; a loop device's is read from its backing at attach and `refreshCapacity`. */
  sizeBytes: number
  /** Null for a loop device: its image is its backing's. */
  readonly image: DiskImage | null
  /** Set for a loop device (null when it is not attached). */
  loop: LoopBinding | null
  readonly isLoop: boolean
}

const diskMajor = 8
const loopMajor = 7

/** The block devices of a host, by device number. */
export class DeviceRegistry {
  readonly #byRdev = new Map<number, BlockDevice>()
  readonly #loops: BlockDevice[] = []
  #disks = 0
  #sequence = 0

  /** Registers a disk (each gets 16 minors, as `sda`, `sdb`, ... do). */
  addDisk(path: string, sizeBytes: number, signature: DiskImage['signature'] = null): BlockDevice {
    const minor = 16 * this.#disks++
    const device: BlockDevice = {
      major: diskMajor,
      minor,
      rdev: makeDev(diskMajor, minor),
      path,
      sizeBytes,
      image: { signature, fs: null },
      loop: null,
      isLoop: false,
    }
    this.#byRdev.set(device.rdev, device)
    return device
  }

  /** The lowest loop device not attached, created when all are in use. */
  freeLoop(): BlockDevice {
    const free = this.#loops.find((device) => !device.loop)
    if (free) return free
    const n = this.#loops.length
    const device: BlockDevice = {
      major: loopMajor,
      minor: n,
      rdev: makeDev(loopMajor, n),
      path: `/dev/loop${n}`,
      sizeBytes: 0,
      image: null,
      loop: null,
      isLoop: true,
    }
    this.#loops.push(device)
    this.#byRdev.set(device.rdev, device)
    return device
  }

  /** The next attach's sequence number: increasing, never reused. */
  nextSequence(): number {
    return ++this.#sequence
  }

  get(rdev: number): BlockDevice | undefined {
    return this.#byRdev.get(rdev)
  }

  /** Attached loop devices. */
  attachedLoops(): BlockDevice[] {
    return this.#loops.filter((device) => device.loop)
  }
}

/** The image a device shows; null for a loop device that is not attached. */
export function imageOf(device: BlockDevice): DiskImage | null {
  if (!device.isLoop) return device.image
  const backing = device.loop?.backing
  if (!backing) return null
  if ('isLoop' in backing) return imageOf(backing)
  backing.image ??= { signature: null, fs: null }
  return backing.image
}

/** The size in bytes of a loop device's backing store right now. */
export function backingSize(binding: LoopBinding): number {
  return 'isLoop' in binding.backing ? binding.backing.sizeBytes : binding.backing.size
}
