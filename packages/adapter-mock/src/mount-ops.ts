/**
 * mount(2) and umount2(2) over the mount table: memory filesystems (tmpfs), block devices with a
 * filesystem, bind mounts (recursive or not), remounts that change flags; unmount with busy checks.
 */
import type { MountRequest, UnmountOptions } from '@kubevol/core'
import { HostError, isHostError } from '@kubevol/core'
import { imageOf } from './devices.js'
import { Filesystem } from './filesystem.js'
import type { HostState } from './host-state.js'
import { releaseAutoclearLoops } from './host-state.js'
import type { Location } from './lookup.js'
import { beneathRootAt, lookup, lookupExisting } from './lookup.js'
import type { Mount, MountInit, MountTable } from './mount-table.js'
import { splitMountOptions } from './mount-table.js'
import type { Inode } from './nodes.js'
import { isWithin } from './nodes.js'
import { parseTmpfsOptions } from './tmpfs-options.js'

/** Filesystem types that live in memory: a fresh empty tree on every mount. */
const memoryFilesystems = new Set(['tmpfs', 'ramfs', 'hugetlbfs'])

function wantsReadOnly(request: MountRequest): boolean {
  return request.readOnly === true || (request.options ?? []).includes('ro')
}

function resolveTarget(state: HostState, request: MountRequest): Location {
  // The kernel follows symlinks in the target: the mount lands on the resolved path.
  return lookupExisting(state, request.target, { follow: true, syscall: 'mount' }).found
}

/** Mounts as mount(2) would. */
export function mount(state: HostState, request: MountRequest): void {
  if (request.remount) {
    remount(state, request)
    return
  }
  const target = resolveTarget(state, request)
  if (request.bind) {
    bindMount(state, request, target)
    return
  }
  if (target.node.type !== 'directory') throw new HostError('ENOTDIR', 'mount', request.target, 'not a directory')
  const { flags, superOptions } = splitMountOptions(request.options ?? [])
  const readOnly = wantsReadOnly(request)
  const propagation = request.propagation ?? 'private'
  const fstype = request.fstype ?? ''
  if (memoryFilesystems.has(fstype)) {
    const options = parseTmpfsOptions(fstype === 'ramfs' ? [] : superOptions, state.memoryBytes, undefined, request.target)
    const fs = new Filesystem({
      fstype,
      major: 0,
      minor: state.nextAnonMinor(),
      capacityBytes: options.capacityBytes,
      inodeLimit: options.inodeLimit,
      rootMode: options.mode,
      superOptions,
      clock: state.clock,
    })
    fs.root.uid = options.uid
    fs.root.gid = options.gid
    // Fields spelled out rather than spread from a shared base: a memory filesystem is what most
    // mounts are, and the spread cost more than the rest of the mount.
    state.table.add({ parent: target.mount, mountpoint: target.node, fs, root: fs.root, source: request.source, device: null, flags, readOnly, propagation })
    return
  }
  if (!request.source.startsWith('/')) throw new HostError('ENODEV', 'mount', request.target, `unknown filesystem type '${fstype}'`)
  deviceMount(state, request, { parent: target.mount, mountpoint: target.node, flags, readOnly, propagation }, superOptions)
}

function deviceMount(
  state: HostState,
  request: MountRequest,
  base: Pick<MountInit, 'parent' | 'mountpoint' | 'flags' | 'readOnly' | 'propagation'>,
  superOptions: readonly string[],
): void {
  const { node } = lookupExisting(state, request.source, { follow: true, syscall: 'mount' }).found
  if (node.type !== 'block-device') throw new HostError('EINVAL', 'mount', request.source, 'not a block device')
  const device = state.devices.get(node.rdev)
  const image = device && imageOf(device)
  if (!device || !image) throw new HostError('ENXIO', 'mount', request.source, 'no such device or address')
  const fs = image.fs
  if (!fs || !image.signature || (request.fstype && request.fstype !== image.signature)) {
    throw new HostError('EINVAL', 'mount', request.source, 'wrong fs type, bad option, bad superblock')
  }
  const readOnly = base.readOnly || device.loop?.readOnly === true
  if (!state.table.all.some((m) => m.fs === fs)) {
    // First mount of this superblock: it takes the device's number and the requested options.
    fs.major = device.major
    fs.minor = device.minor
    fs.readOnly = readOnly
    fs.superOptions = superOptions
  }
  state.table.add({ ...base, readOnly, fs, root: fs.root, source: request.source, device })
}

interface SubmountPlan {
  readonly mount: Mount
  readonly children: readonly SubmountPlan[]
}

// Planned before the new mount exists, so a recursive bind into its own subtree cannot copy itself.
function planSubmounts(table: MountTable, from: Mount, root: Inode): SubmountPlan[] {
  return table
    .children(from)
    .filter((child) => child.mountpoint && isWithin(child.mountpoint, root))
    .map((child) => ({ mount: child, children: planSubmounts(table, child, child.root) }))
}

function copySubmounts(table: MountTable, plans: readonly SubmountPlan[], parent: Mount): void {
  for (const plan of plans) {
    const { id: _id, ...init } = plan.mount
    copySubmounts(table, plan.children, table.add({ ...init, parent }))
  }
}

function bindMount(state: HostState, request: MountRequest, target: Location): void {
  const source = lookupExisting(state, request.source, { follow: true, syscall: 'mount' }).found
  if ((source.node.type === 'directory') !== (target.node.type === 'directory')) {
    throw new HostError('ENOTDIR', 'mount', request.target, 'source and target must both be directories or both not')
  }
  const plans = request.recursive ? planSubmounts(state.table, source.mount, source.node) : []
  const bound = state.table.add({
    parent: target.mount,
    mountpoint: target.node,
    fs: source.mount.fs,
    root: source.node,
    source: source.mount.source,
    device: source.mount.device,
    flags: source.mount.flags,
    // A bind copies the source mount's flags, read-only included.
    readOnly: source.mount.readOnly || wantsReadOnly(request),
    propagation: request.propagation ?? 'private',
  })
  copySubmounts(state.table, plans, bound)
}

function remount(state: HostState, request: MountRequest): void {
  const target = resolveTarget(state, request)
  const mounted = target.mount
  if (target.node !== mounted.root) throw new HostError('EINVAL', 'mount', request.target, 'not a mount point')
  const readOnly = wantsReadOnly(request)
  if (!request.bind) {
    // Without MS_BIND the superblock changes too, so every mount of the filesystem follows.
    mounted.fs.readOnly = readOnly
    const { superOptions } = splitMountOptions(request.options ?? [])
    if (memoryFilesystems.has(mounted.fs.fstype) && superOptions.some((o) => o.startsWith('size='))) {
      mounted.fs.capacityBytes = parseTmpfsOptions(superOptions, state.memoryBytes, undefined, request.target).capacityBytes
    }
  }
  mounted.readOnly = readOnly
  if (request.propagation) mounted.propagation = request.propagation
}

function isMarkedBusy(state: HostState, mounted: Mount): boolean {
  for (const path of state.busy) {
    try {
      const found = lookup({ table: state.table }, path, { follow: true, syscall: 'umount' }).found
      if (found?.mount === mounted && found.node === mounted.root) return true
    } catch (err) {
      if (!isHostError(err)) throw err
    }
  }
  return false
}

function detach(table: MountTable, mounted: Mount): void {
  for (const child of table.children(mounted)) detach(table, child)
  table.remove(mounted)
}

/**
 * umount2(2) of the topmost mount at `target`: EINVAL when it is not a mount point, EBUSY when a
 * mount sits below it or a test marked it busy; `lazy` detaches it and everything below regardless.
 */
export function unmount(state: HostState, target: string, options: UnmountOptions = {}): void {
  // Beneath the locked root a symlink at `target` is never followed, whatever the options say.
  const follow = options.noFollow === false && beneathRootAt(state, target) < 0
  const found = lookupExisting(state, target, { follow, syscall: 'umount' }).found
  const mounted = found.mount
  if (found.node !== mounted.root) throw new HostError('EINVAL', 'umount', target, 'not mounted')
  if (!mounted.parent) throw new HostError('EBUSY', 'umount', target, 'target is busy')
  if (options.lazy) detach(state.table, mounted)
  else if (state.table.children(mounted).length > 0 || isMarkedBusy(state, mounted)) {
    throw new HostError('EBUSY', 'umount', target, 'target is busy')
  } else state.table.remove(mounted)
  releaseAutoclearLoops(state)
}

/**
 * True when `path` (following symlinks) is the root of a mount. ENOENT when it does not exist.
 * Beneath the locked root a symlink as the last component is not followed: not a mount point.
 */
export function isMountPoint(state: HostState, path: string): boolean {
  const found = lookupExisting(state, path, { follow: beneathRootAt(state, path) < 0, syscall: 'statx' }).found
  return found.node === found.mount.root
}
