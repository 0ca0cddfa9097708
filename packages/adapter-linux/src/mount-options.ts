/**
 * From a Host `MountRequest` to the mount(2) calls that carry it out. Pure: tested anywhere.
 *
 * mount(8) turns options such as `ro`, `nosuid` or `noatime` into flags and passes the rest to
 * the filesystem as its data string; calling mount(2) directly, kubevol does the same. A bind
 * with `readOnly` (or other per-mount flags) takes two calls, as on every Linux: the bind, then a
 * remount of the bind with the flags (SPEC §8.2).
 */
import type { MountRequest } from '@kubevol/core'
import * as c from './constants.js'

/** One mount(2) call. `keepLockedFlags`: add the flags the mount already has (see {@link lockedFlags}). */
export interface MountCall {
  readonly source: string | null
  readonly target: string
  readonly fstype: string | null
  readonly flags: number
  readonly data: string | null
  readonly keepLockedFlags?: boolean
}

const SET: Readonly<Record<string, number>> = {
  ro: c.MS_RDONLY,
  nosuid: c.MS_NOSUID,
  nodev: c.MS_NODEV,
  noexec: c.MS_NOEXEC,
  sync: c.MS_SYNCHRONOUS,
  dirsync: c.MS_DIRSYNC,
  mand: c.MS_MANDLOCK,
  noatime: c.MS_NOATIME,
  nodiratime: c.MS_NODIRATIME,
  relatime: c.MS_RELATIME,
  strictatime: c.MS_STRICTATIME,
  lazytime: c.MS_LAZYTIME,
  nosymfollow: c.MS_NOSYMFOLLOW,
  silent: c.MS_SILENT,
  bind: c.MS_BIND,
  rbind: c.MS_BIND | c.MS_REC,
  remount: c.MS_REMOUNT,
}

const CLEAR: Readonly<Record<string, number>> = {
  rw: c.MS_RDONLY,
  suid: c.MS_NOSUID,
  dev: c.MS_NODEV,
  exec: c.MS_NOEXEC,
  async: c.MS_SYNCHRONOUS,
  nomand: c.MS_MANDLOCK,
  atime: c.MS_NOATIME,
  diratime: c.MS_NODIRATIME,
  norelatime: c.MS_RELATIME,
  nostrictatime: c.MS_STRICTATIME,
  nolazytime: c.MS_LAZYTIME,
  loud: c.MS_SILENT,
}

// Options only mount(8) and fstab understand; the kernel would reject them as filesystem data.
const USERSPACE_ONLY = new Set(['defaults', 'auto', 'noauto', 'user', 'nouser', 'users', 'owner', 'group', 'nofail', '_netdev'])

/** Mount options split into mount(2) flags and the filesystem's data string. */
export interface ParsedMountOptions {
  readonly flags: number
  readonly data: string[]
}

/** Splits `options` into flags (`ro`, `nosuid`, ...) and filesystem data (`size=1m`, `context="..."`). */
export function parseMountOptions(options: readonly string[]): ParsedMountOptions {
  let flags = 0
  const data: string[] = []
  for (const option of options) {
    if (option === '') continue
    const set = SET[option]
    const clear = CLEAR[option]
    if (set !== undefined) flags |= set
    else if (clear !== undefined) flags &= ~clear
    else if (USERSPACE_ONLY.has(option) || option.startsWith('x-') || option.startsWith('comment=')) continue
    else data.push(option)
  }
  return { flags, data }
}

const PROPAGATION = { shared: c.MS_SHARED, slave: c.MS_SLAVE, private: c.MS_PRIVATE } as const

/** The mount(2) calls for `request`, in order. */
export function planMount(request: MountRequest): MountCall[] {
  const parsed = parseMountOptions(request.options ?? [])
  const bind = request.bind === true || (parsed.flags & c.MS_BIND) !== 0
  const remount = request.remount === true || (parsed.flags & c.MS_REMOUNT) !== 0
  const recursive = request.recursive === true || (parsed.flags & c.MS_REC) !== 0
  const perMount = (parsed.flags & ~(c.MS_BIND | c.MS_REC | c.MS_REMOUNT)) | (request.readOnly ? c.MS_RDONLY : 0)
  const data = parsed.data.length > 0 ? parsed.data.join(',') : null
  const { source, target } = request
  const calls: MountCall[] = []

  if (remount && bind) {
    // Changes the flags of this one bind mount; the filesystem and its other mounts are unchanged.
    calls.push({ source, target, fstype: null, flags: c.MS_BIND | c.MS_REMOUNT | perMount, data: null, keepLockedFlags: true })
  } else if (remount) {
    calls.push({ source, target, fstype: null, flags: c.MS_REMOUNT | perMount, data })
  } else if (bind) {
    calls.push({ source, target, fstype: null, flags: c.MS_BIND | (recursive ? c.MS_REC : 0), data: null })
    // The kernel ignores flags on the bind itself: they take a remount of the new mount.
    if (perMount !== 0) calls.push({ source, target, fstype: null, flags: c.MS_BIND | c.MS_REMOUNT | perMount, data: null, keepLockedFlags: true })
  } else {
    calls.push({ source, target, fstype: request.fstype ?? null, flags: perMount, data })
  }
  if (request.propagation) calls.push({ source: null, target, fstype: null, flags: PROPAGATION[request.propagation], data: null })
  return calls
}

/**
 * The per-mount flags of a mount, from statfs `f_flags`, that a bind remount must repeat: in a user
 * namespace the kernel refuses to clear a flag locked by the owner of the mount (EPERM), so the
 * kubelet adds them (mount-utils `getBindMountFlags`). Read-only is not carried: the remount decides it.
 */
export function lockedFlags(statfsFlags: number): number {
  let flags = 0
  if (statfsFlags & c.ST_NOSUID) flags |= c.MS_NOSUID
  if (statfsFlags & c.ST_NODEV) flags |= c.MS_NODEV
  if (statfsFlags & c.ST_NOEXEC) flags |= c.MS_NOEXEC
  if (statfsFlags & c.ST_NOATIME) flags |= c.MS_NOATIME
  if (statfsFlags & c.ST_NODIRATIME) flags |= c.MS_NODIRATIME
  if (statfsFlags & c.ST_RELATIME) flags |= c.MS_RELATIME
  return flags
}

/** How a mount(2) call reads in a message: `mount -t tmpfs -o size=1m tmpfs` (flags by name). */
export function describeMountCall(call: MountCall): string {
  const names = Object.entries(SET)
    .filter(([name, bit]) => name !== 'rbind' && (call.flags & bit) === bit)
    .map(([name]) => name)
  for (const [name, bit] of Object.entries(PROPAGATION)) if (call.flags & bit) names.push(`make-${name}`)
  const options = [...names, ...(call.data ? [call.data] : [])].join(',')
  return ['mount', call.fstype ? `-t ${call.fstype}` : '', options ? `-o ${options}` : '', call.source ?? 'none', call.target].filter(Boolean).join(' ')
}
