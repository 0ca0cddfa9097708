/**
 * The capability operations: loop devices, block devices, filesystem tools and statfs. A filesystem
 * made on a device is a persistent tree kept with the device's image, so its data survives unmount
 * and remount (and, for a loop device, detach and re-attach of the same file).
 */
import type { FsStats, LoopDeviceStatus } from '@kubevol/core'
import { HostError } from '@kubevol/core'
import { dirname } from '@kubevol/core/host'
import type { BlockDevice } from './devices.js'
import { backingSize, imageOf } from './devices.js'
import { mkdir } from './file-ops.js'
import { Filesystem } from './filesystem.js'
import type { HostState } from './host-state.js'
import { isDeviceOpen, recordViolation } from './host-state.js'
import { lookup, lookupExisting } from './lookup.js'
import type { DiskImage, FileNode } from './nodes.js'

// mkfs.ext4's default bytes-per-inode.
const bytesPerInode = 16384

function deviceAt(state: HostState, path: string, syscall: string): BlockDevice {
  const { node } = lookupExisting(state, path, { follow: true, syscall }).found
  if (node.type !== 'block-device') throw new HostError('EINVAL', syscall, path, 'not a block device')
  const device = state.devices.get(node.rdev)
  if (!device) throw new HostError('ENXIO', syscall, path, 'no such device or address')
  return device
}

function imageAt(state: HostState, path: string, syscall: string): { device: BlockDevice; image: DiskImage } {
  const device = deviceAt(state, path, syscall)
  const image = imageOf(device)
  if (!image) throw new HostError('ENXIO', syscall, path, 'loop device is not attached')
  return { device, image }
}

function newDeviceFilesystem(state: HostState, device: BlockDevice, fstype: string): Filesystem {
  const fs = new Filesystem({
    fstype,
    major: device.major,
    minor: device.minor,
    capacityBytes: device.sizeBytes,
    inodeLimit: Math.max(16, Math.floor(device.sizeBytes / bytesPerInode)),
    rootMode: 0o755,
    clock: state.clock,
  })
  // mke2fs makes lost+found; a test that lists a fresh ext mount sees it, as on Linux.
  if (fstype.startsWith('ext')) fs.link(fs.root, 'lost+found', fs.newDir(0o700))
  return fs
}

/** Makes room for a device node at `path` (parents created) and returns a function that links it. */
function deviceNodeSlot(state: HostState, path: string): (device: BlockDevice) => void {
  mkdir(state, dirname(path), { recursive: true })
  const result = lookup(state, path, { follow: false, syscall: 'mknod' })
  const parent = result.parent
  if (result.entry || !parent) throw new HostError('EEXIST', 'mknod', path, 'file exists')
  return (device) => parent.node.fs.link(parent.node, result.name, parent.node.fs.newDevice('block-device', device.rdev, 0o660))
}

/** Test setup: a disk of `sizeBytes` at `path`, blank or already holding a `fstype` filesystem. */
export function addBlockDevice(state: HostState, path: string, sizeBytes: number, fstype?: string): void {
  const link = deviceNodeSlot(state, path)
  const device = state.devices.addDisk(path, sizeBytes)
  link(device)
  if (fstype && device.image) {
    device.image.signature = fstype
    device.image.fs = newDeviceFilesystem(state, device, fstype)
  }
}

/**
 * Attaches a file (or a block device) to the lowest free loop device. A mounted block device is
 * EBUSY, as Linux's exclusive open says; with `regularFile` only a regular file is taken, opened
 * as the Linux host's openat2 does: a symlink at any level of the path is not followed (ELOOP), and
 * a file under `/proc` or `/sys` (kernel pseudo-filesystems on Linux) is not a disk image (EINVAL).
 */
export function attachLoop(state: HostState, file: string, readOnly: boolean, regularFile = false): string {
  if (regularFile) refuseImagePath(state, file)
  const { node } = lookupExisting(state, file, { follow: !regularFile, syscall: 'losetup' }).found
  if (regularFile && node.type !== 'file') throw new HostError('EINVAL', 'losetup', file, `not a regular file (a ${node.type})`)
  let backing: FileNode | BlockDevice
  if (node.type === 'file') backing = node
  else if (node.type === 'block-device') {
    const device = deviceAt(state, file, 'losetup')
    // A mounted filesystem claims its device: Linux's O_EXCL open fails then.
    if (state.table.all.some((mount) => mount.device === device)) throw new HostError('EBUSY', 'open', file, 'the block device is in use (mounted or held open exclusively)')
    backing = device
  } else throw new HostError('EINVAL', 'losetup', file, 'not a regular file or block device')
  const loop = state.devices.freeLoop()
  mkdir(state, '/dev', { recursive: true })
  if (!lookup(state, loop.path, { follow: false, syscall: 'losetup' }).entry) deviceNodeSlot(state, loop.path)(loop)
  loop.loop = { backing, readOnly, autoclear: false, sequence: state.devices.nextSequence() }
  loop.sizeBytes = backingSize(loop.loop)
  return loop.path
}

/** A disk image's path: ELOOP for a symlink at any level, EINVAL under a kernel pseudo-filesystem. */
function refuseImagePath(state: HostState, file: string): void {
  const parts = file.split('/').filter((part) => part !== '' && part !== '.')
  for (let i = 1; i <= parts.length; i++) {
    const prefix = `/${parts.slice(0, i).join('/')}`
    const { entry } = lookup(state, prefix, { follow: false, syscall: 'openat2' })
    if (!entry) break
    if (entry.type === 'symlink') throw new HostError('ELOOP', 'openat2', file, `a symlink at some level of the path (${prefix}): a disk image is opened without following any symlink`)
  }
  const top = parts[0]
  if (top === 'proc' || top === 'sys') throw new HostError('EINVAL', 'losetup', file, `not a regular file: a file of ${top === 'proc' ? 'proc' : 'sysfs'}, a kernel pseudo-filesystem, is not a disk image`)
}

/** Detaches a loop device; while it is open, it goes when its last mount does (autoclear). */
export function detachLoop(state: HostState, path: string): void {
  const loop = deviceAt(state, path, 'losetup')
  if (!loop.isLoop || !loop.loop) throw new HostError('ENXIO', 'losetup', path, 'loop device is not attached')
  if (isDeviceOpen(state, loop)) {
    loop.loop.autoclear = true
    return
  }
  loop.loop = null
  loop.sizeBytes = 0
}

/** The loop devices backed by `file`, lowest first. */
export function findLoops(state: HostState, file: string): string[] {
  const { node } = lookupExisting(state, file, { follow: true, syscall: 'losetup' }).found
  const device = node.type === 'block-device' ? state.devices.get(node.rdev) : undefined
  return state.devices
    .attachedLoops()
    .filter((loop) => loop.loop?.backing === node || (device && loop.loop?.backing === device))
    .map((loop) => loop.path)
}

/** What uses a loop device: its attachment, the mount points of its filesystem, whether it is open. */
export function loopStatus(state: HostState, path: string): LoopDeviceStatus | null {
  let loop: BlockDevice
  try {
    loop = deviceAt(state, path, 'losetup')
  } catch (err) {
    // No device node: not attached, as on Linux.
    if (err instanceof HostError && err.code === 'ENOENT') return null
    throw err
  }
  if (!loop.isLoop || !loop.loop) return null
  return {
    attachment: String(loop.loop.sequence),
    mountPoints: state.table.all.filter((mount) => mount.device === loop).map((mount) => state.table.targetOf(mount)),
    held: isDeviceOpen(state, loop),
  }
}

/** Re-reads the backing size (`LOOP_SET_CAPACITY`). */
export function refreshLoopCapacity(state: HostState, path: string): void {
  const loop = deviceAt(state, path, 'losetup')
  if (!loop.isLoop || !loop.loop) throw new HostError('ENXIO', 'losetup', path, 'loop device is not attached')
  loop.sizeBytes = backingSize(loop.loop)
}

/** The size in bytes (0 for a loop device that is not attached). */
export function blockDeviceSize(state: HostState, path: string): number {
  return deviceAt(state, path, 'ioctl').sizeBytes
}

/** True while the device is mounted or backs a loop device. */
export function isBlockDeviceOpen(state: HostState, path: string): boolean {
  return isDeviceOpen(state, deviceAt(state, path, 'open'))
}

/** The signature on the device, null when blank; ENXIO for a loop device that is not attached. */
export function detectFilesystem(state: HostState, path: string): string | null {
  return imageAt(state, path, 'blkid').image.signature
}

function isMounted(state: HostState, image: DiskImage): boolean {
  return image.fs !== null && state.table.all.some((mount) => mount.fs === image.fs)
}

/**
 * mkfs: records `fstype` and a fresh tree. Refuses nothing itself (the caller must have checked
 * `detect`), but strict mode records formatting over a filesystem or a device in use.
 */
export function formatDevice(state: HostState, path: string, fstype: string): void {
  const { device, image } = imageAt(state, path, 'mkfs')
  if (device.loop?.readOnly) throw new HostError('EROFS', 'mkfs', path, 'read-only device')
  if (image.signature) {
    recordViolation(state, 'format-over-filesystem', path, `format ${fstype} over the ${image.signature} filesystem on ${path}`)
  }
  if (isDeviceOpen(state, device) || isMounted(state, image)) {
    recordViolation(state, 'format-device-in-use', path, `format of ${path} while it is mounted or open`)
  }
  image.signature = fstype
  image.fs = newDeviceFilesystem(state, device, fstype)
}

/** fsck: EINVAL without a matching filesystem, EBUSY while it is mounted read-write. */
export function checkFilesystem(state: HostState, path: string, fstype: string): void {
  const { image } = imageAt(state, path, 'fsck')
  if (image.signature !== fstype) throw new HostError('EINVAL', 'fsck', path, `no ${fstype} filesystem found`)
  const rw = state.table.all.some((mount) => mount.fs === image.fs && !mount.readOnly && !mount.fs.readOnly)
  if (rw) throw new HostError('EBUSY', 'fsck', path, 'filesystem is mounted read-write')
}

/** resize2fs / xfs_growfs: the capacity becomes the device size. */
export function resizeFilesystem(state: HostState, path: string, fstype: string, mountPath?: string): void {
  const { device, image } = imageAt(state, path, 'resize')
  const fs = image.fs
  if (!fs || image.signature !== fstype) throw new HostError('EINVAL', 'resize', path, `no ${fstype} filesystem found`)
  if (mountPath !== undefined) {
    const found = lookupExisting(state, mountPath, { follow: true, syscall: 'resize' }).found
    if (found.mount.fs !== fs) throw new HostError('EINVAL', 'resize', mountPath, `${path} is not mounted here`)
  }
  if (fs.usedBytes > device.sizeBytes) throw new HostError('ENOSPC', 'resize', path, 'data does not fit the new size')
  fs.capacityBytes = device.sizeBytes
  fs.inodeLimit = Math.max(fs.inodeLimit, Math.floor(device.sizeBytes / bytesPerInode))
}

/** statfs(2) of the filesystem `path` is on. */
export function statfs(state: HostState, path: string): FsStats {
  const { fs } = lookupExisting(state, path, { follow: true, syscall: 'statfs' }).found.node
  return {
    capacityBytes: fs.capacityBytes,
    availableBytes: Math.max(0, fs.capacityBytes - fs.usedBytes),
    usedBytes: fs.usedBytes,
    inodes: fs.inodeLimit,
    inodesFree: Math.max(0, fs.inodeLimit - fs.inodesUsed),
    inodesUsed: fs.inodesUsed,
  }
}

// The block size the mock's filesystems report (mkfs's default for ext4 and xfs above 512 MiB).
const fsBlockSize = 4096

/**
 * dumpe2fs -h / xfs_io -c statfs: the filesystem's blocks × block size. xfs is asked through its
 * mount (EINVAL without a mount path, EIO when the path is not on it); other types are ENOTSUP.
 */
export function filesystemSize(state: HostState, path: string, fstype: string, mountPath?: string): { sizeBytes: number; blockSize: number } {
  if (!fstype.startsWith('ext') && fstype !== 'xfs') {
    throw new HostError('ENOTSUP', 'size', path, `Could not parse fs info on given filesystem format: ${fstype}. Supported fs types are: xfs, ext3, ext4`)
  }
  const { image } = imageAt(state, path, 'size')
  if (fstype === 'xfs' && mountPath === undefined) {
    throw new HostError('EINVAL', 'xfs_io', path, 'the size of an xfs filesystem is read while mounted: a mount path is needed')
  }
  const fs = image.fs
  if (!fs || image.signature !== fstype) throw new HostError('EIO', 'size', path, `failed to read size of filesystem on ${path}: no ${fstype} filesystem found`)
  if (mountPath !== undefined && fstype === 'xfs') {
    const found = lookupExisting(state, mountPath, { follow: true, syscall: 'xfs_io' }).found
    if (found.node.fs !== fs) throw new HostError('EIO', 'xfs_io', path, `could not find block size of device ${path}`)
  }
  return { sizeBytes: Math.floor(fs.capacityBytes / fsBlockSize) * fsBlockSize, blockSize: fsBlockSize }
}

/** mount-utils NeedResize: the device exceeds its filesystem by more than a block; never for a read-only or blank device. */
export function needResize(state: HostState, path: string, mountPath?: string): boolean {
  const { device, image } = imageAt(state, path, 'blockdev')
  if (device.loop?.readOnly || image.signature === null) return false
  const fs = filesystemSize(state, path, image.signature, mountPath)
  return device.sizeBytes > fs.sizeBytes + fs.blockSize
}
