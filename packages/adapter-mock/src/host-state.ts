/**
 * The state one memory host owns: the mount table (and through it every file tree), the block
 * devices, the strict-mode record, and the mounts a test marked busy. The operation modules are
 * functions over this state; `MemoryHost` wraps them in the Host port.
 */
import type { Clock } from '@kubevol/core'
import { HostError } from '@kubevol/core'
import type { BlockDevice } from './devices.js'
import { DeviceRegistry } from './devices.js'
import { Filesystem } from './filesystem.js'
import type { LockedRoot } from './lookup.js'
import type { Mount } from './mount-table.js'
import { MountTable } from './mount-table.js'

/** The invariant breaches strict mode records. */
export type ViolationKind =
  | 'remove-mount-point'
  | 'rename-mount-point'
  | 'remove-all-across-mount'
  | 'format-over-filesystem'
  | 'format-device-in-use'

/** One recorded breach: what kind, where, and a sentence for the test output. */
export interface Violation {
  readonly kind: ViolationKind
  readonly path: string
  readonly message: string
}

/** The resolved options the state is built from. */
export interface HostStateOptions {
  readonly clock: Clock
  readonly strict: boolean
  readonly umask: number
  readonly memoryBytes: number
  readonly rootCapacityBytes: number
  readonly inodeLimit: number
}

/** Everything one memory host holds. */
export interface HostState extends HostStateOptions {
  readonly table: MountTable
  readonly devices: DeviceRegistry
  readonly violations: Violation[]
  /** Paths a test marked busy; a mount found at one of them refuses a non-lazy unmount. */
  readonly busy: string[]
  /** The next free minor number for an anonymous (`0:N`) filesystem. */
  nextAnonMinor(): number
  /**
   * The host's root while a `lockRoot` holds it (null: none): every path strictly beneath it is
   * resolved following no symlink (see `lookup.ts`).
   */
  lockedRoot: LockedRoot | null
}

/** A fresh host: a root filesystem with `/dev` and `/tmp`. */
export function createHostState(options: HostStateOptions): HostState {
  let anonMinor = 1
  const nextAnonMinor = (): number => anonMinor++
  const rootFs = new Filesystem({
    fstype: 'rootfs',
    major: 0,
    minor: nextAnonMinor(),
    capacityBytes: options.rootCapacityBytes,
    inodeLimit: options.inodeLimit,
    rootMode: 0o755,
    clock: options.clock,
  })
  rootFs.link(rootFs.root, 'dev', rootFs.newDir(0o755))
  rootFs.link(rootFs.root, 'tmp', rootFs.newDir(0o1777))
  return {
    ...options,
    table: new MountTable(rootFs, 'rootfs'),
    devices: new DeviceRegistry(),
    violations: [],
    busy: [],
    nextAnonMinor,
    lockedRoot: null,
  }
}

/** Records a breach when the host is strict. */
export function recordViolation(state: HostState, kind: ViolationKind, path: string, message: string): void {
  if (state.strict) state.violations.push({ kind, path, message })
}

/** EROFS when `mount` (or its filesystem) is read-only. */
export function assertWritable(mount: Mount, syscall: string, path: string): void {
  if (mount.readOnly || mount.fs.readOnly) throw new HostError('EROFS', syscall, path, 'read-only file system')
}

/** True when `device` is mounted (directly or through a bind of its mount) or backs an attached loop device. */
export function isDeviceOpen(state: HostState, device: BlockDevice): boolean {
  if (state.table.all.some((mount) => mount.device === device)) return true
  return state.devices.attachedLoops().some((loop) => loop.loop?.backing === device)
}

/** Frees the loop devices whose detach waited for their last unmount. */
export function releaseAutoclearLoops(state: HostState): void {
  for (const loop of state.devices.attachedLoops()) {
    if (loop.loop?.autoclear && !isDeviceOpen(state, loop)) {
      loop.loop = null
      loop.sizeBytes = 0
    }
  }
}
