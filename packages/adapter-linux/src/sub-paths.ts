/**
 * Safe subPath binds (the kubelet's fix for CVE-2017-1002101 and CVE-2021-25741), with the kernel
 * keeping the sub path inside its volume: the volume is opened once as a directory descriptor
 * (beneath the root with no symlink at any level; a hostPath volume by its name, which may be a
 * symlink as with the kubelet), and the sub path is resolved from that descriptor with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS): a symlink that stays inside the volume is
 * followed, one that leaves it (an absolute one included) fails the call, whatever is swapped in
 * meanwhile. A missing sub path is made first. The descriptor found is bind-mounted through /proc/self/fd/<fd> onto a target the host
 * resolves beneath the root. A missing sub path is created first, as safely ({@link makeSubPathDirs}).
 */
import { readlinkSync } from 'node:fs'
import { chmod, mkdir, realpath } from 'node:fs/promises'
import { dirname } from 'node:path'
import type { FileInfo, SubPaths } from '@kubevol/core'
import { HostError, isHostError } from '@kubevol/core'
import { joinPath } from '@kubevol/core/host'
import * as c from './constants.js'
import { STATX_SIZE, readStatx } from './libc.js'
import { isPathWithin } from './mountinfo.js'
import type { Sys } from './sys.js'

/** What a descriptor opened beneath a directory refers to. */
type OpenedType = 'directory' | 'file' | 'other'

/** Where a path beneath the host's root is: the root's descriptor and the path relative to it. */
export interface BeneathRoot {
  readonly rootFd: number
  readonly relative: string
}

const STRICT = c.RESOLVE_BENEATH | c.RESOLVE_NO_SYMLINKS | c.RESOLVE_NO_MAGICLINKS
/** Inside a volume: symlinks that stay inside are followed, as the kubelet's subPath check allows. */
const IN_VOLUME = c.RESOLVE_BENEATH | c.RESOLVE_NO_MAGICLINKS
const O_PATH = c.O_PATH | c.O_CLOEXEC

async function typeOf(sys: Sys, fd: number, path: string): Promise<OpenedType> {
  const buf = new Uint8Array(STATX_SIZE)
  await sys.call('statx', path, (l) => l.statx(fd, '', c.AT_EMPTY_PATH | c.AT_SYMLINK_NOFOLLOW, c.STATX_TYPE | c.STATX_MODE, buf))
  const mode = readStatx(buf).stx_mode & c.S_IFMT
  return mode === c.S_IFDIR ? 'directory' : mode === c.S_IFREG ? 'file' : 'other'
}

async function modeOf(sys: Sys, fd: number, path: string): Promise<number> {
  const buf = new Uint8Array(STATX_SIZE)
  await sys.call('statx', path, (l) => l.statx(fd, '', c.AT_EMPTY_PATH, c.STATX_TYPE | c.STATX_MODE, buf))
  return readStatx(buf).stx_mode
}

function close(sys: Sys, fd: number): void {
  sys.libc().sync.close(fd)
}

/** The path with its symlinks resolved, for a message only (the decision is the kernel's). */
async function shown(path: string): Promise<string> {
  return realpath(path).catch(() => path)
}

/**
 * The kubelet's text for a sub path that leaves its volume: "not within volume path" when the sub
 * path exists (through its symlinks), "outside of allowed base" for the existing part of one to be
 * made. For the message only: the kernel's resolution made the decision.
 */
async function outsideText(volumePath: string, components: readonly string[]): Promise<string> {
  const base = await shown(volumePath)
  for (let n = components.length; n > 0; n--) {
    const resolved = await realpath(joinPath(volumePath, ...components.slice(0, n))).catch(() => undefined)
    if (resolved === undefined) continue
    return n === components.length ? `subpath "${resolved}" not within volume path "${base}"` : `path "${resolved}" is outside of allowed base "${base}"`
  }
  // Not even its first level resolves (a dangling symlink out of the volume).
  return `path "${joinPath(volumePath, ...components.slice(0, 1))}" is outside of allowed base "${base}"`
}

/** What a subPath bind needs from the host besides system calls. */
export interface SubPathDeps {
  readonly sys: Sys
  /** Where `path` is beneath the host's root; undefined when it is not beneath it (or no root is held). */
  readonly beneathRoot: (path: string) => BeneathRoot | undefined
  /** The host's own calls, which resolve a path beneath the root without following a symlink. */
  readonly stat: (path: string) => Promise<FileInfo | null>
  readonly mkdirAll: (path: string, mode: number) => Promise<void>
  readonly createFile: (path: string, mode: number) => Promise<void>
  /** Binds `source` (a /proc/self/fd link) onto `target`, resolved beneath the root. */
  readonly bind: (source: string, target: string) => Promise<void>
  /** Makes `target` a read-only bind (remount keeping the locked flags). */
  readonly remountReadOnly: (source: string, target: string) => Promise<void>
}

/** Opens the volume's directory: beneath the root with no symlink at any level, elsewhere by name. */
async function openVolume(deps: SubPathDeps, volumePath: string): Promise<number> {
  const { sys } = deps
  const at = deps.beneathRoot(volumePath)
  if (!at) return sys.call('open', volumePath, (l) => l.open(volumePath, O_PATH | c.O_DIRECTORY, 0))
  return openBeneathRoot(sys, at, volumePath, O_PATH | c.O_DIRECTORY, 'openat2')
}

/**
 * Opens `path` (beneath the root: `at`) from the root's descriptor with no symlink followed at any
 * level, on the main thread's call runner; a symlink is refused with ELOOP as the I/O worker refuses it.
 */
export async function openBeneathRoot(sys: Sys, at: BeneathRoot, path: string, flags: number, syscall: string): Promise<number> {
  try {
    return await sys.call(syscall, path, (l) => l.openat2(at.rootFd, at.relative, flags, 0, STRICT))
  } catch (err) {
    if (!isHostError(err, 'ELOOP')) throw err
    throw new HostError('ELOOP', syscall, path, 'refusing to follow a symlink beneath the root (a level of the path is a symlink)', { cause: err })
  }
}

/**
 * Opens `relative` beneath the volume descriptor `volumeFd`. A path that leaves the volume fails
 * with EACCES and `outside` as its text; ELOOP, ENOENT and ENOTDIR as the kernel gives them.
 */
async function openInVolume(sys: Sys, volumeFd: number, relative: string, path: string, flags: number, outside: () => Promise<string>): Promise<number> {
  try {
    return await sys.call('openat2', path, (l) => l.openat2(volumeFd, relative, flags, 0, IN_VOLUME))
  } catch (err) {
    if (!isHostError(err, 'EXDEV')) throw err
    // An absolute symlink is refused by RESOLVE_BENEATH even when it names a place inside the volume,
    // which the kubelet allows: resolved by name, it must be within the volume, and is then opened
    // with no symlink at all, so a swap since the resolution fails (ELOOP) instead of leading out.
    const base = readlinkSync(`/proc/self/fd/${volumeFd}`)
    const resolved = await realpath(path).catch((e: unknown) => e as NodeJS.ErrnoException)
    if (typeof resolved !== 'string') {
      if (resolved.code === 'ENOENT') throw new HostError('ENOENT', 'openat2', path, 'no such file or directory', { cause: err })
    } else if (isPathWithin(resolved, base)) {
      const inside = resolved === base ? '.' : resolved.slice(base.length + 1)
      return sys.call('openat2', path, (l) => l.openat2(volumeFd, inside, flags, 0, STRICT))
    }
    throw new HostError('EACCES', 'subpath', path, await outside(), { cause: err })
  }
}

/**
 * Creates the missing directories of `subPath` inside the volume, as the kubelet's
 * `doSafeMakeDir`: the longest existing prefix is opened beneath the volume's descriptor (so it
 * must be inside the volume); each missing component is then made with mkdir relative to the open
 * descriptor (through its /proc/self/fd link: mkdirat) and opened again with no symlink followed,
 * so a symlink swapped in on the way fails the call instead of being followed. New directories get
 * the permission bits (and setgid) of the volume's root. Nothing to do when the whole path exists.
 */
async function makeSubPathDirs(sys: Sys, volumeFd: number, volumePath: string, components: readonly string[]): Promise<void> {
  let existing = components.length
  let fd = -1
  // The longest existing prefix, from the whole path down: usually the whole path exists.
  for (; existing >= 0; existing--) {
    if (existing === 0) {
      fd = await sys.call('openat2', volumePath, (l) => l.openat2(volumeFd, '.', O_PATH | c.O_DIRECTORY, 0, IN_VOLUME))
      break
    }
    const prefix = components.slice(0, existing).join('/')
    const path = joinPath(volumePath, prefix)
    try {
      fd = await openInVolume(sys, volumeFd, prefix, path, O_PATH, async () => `path "${await shown(path)}" is outside of allowed base "${await shown(volumePath)}"`)
      break
    } catch (err) {
      if (!isHostError(err, 'ENOENT')) throw err
    }
  }
  if (existing === components.length) {
    close(sys, fd)
    return
  }
  try {
    let current = joinPath(volumePath, ...components.slice(0, existing))
    if ((await typeOf(sys, fd, current)) !== 'directory') throw new HostError('ENOTDIR', 'mkdirat', current, 'not a directory')
    const mode = (await modeOf(sys, volumeFd, volumePath)) & 0o2777
    for (const component of components.slice(existing)) {
      current = joinPath(current, component)
      const parent = fd
      // mkdir never follows a last component that is a symlink (EEXIST); the parent is the descriptor.
      await sys.fs('mkdirat', current, () => mkdir(`/proc/self/fd/${parent}/${component}`, { mode: mode & 0o777 }))
      fd = await sys.call('openat2', current, (l) => l.openat2(parent, component, O_PATH | c.O_DIRECTORY, 0, STRICT))
      close(sys, parent)
      // The mode mkdir got went through the umask; set it on the very directory opened.
      await sys.fs('chmod', current, () => chmod(`/proc/self/fd/${fd}`, mode))
    }
  } finally {
    close(sys, fd)
  }
}

/** The `subPaths` capability. */
export function createSubPaths(deps: SubPathDeps): SubPaths {
  const { sys } = deps
  return {
    async bind(volumePath, subPath, target, options) {
      const components = subPath.split('/').filter((s) => s !== '' && s !== '.')
      const joined = joinPath(volumePath, subPath)
      if (components.includes('..')) throw new HostError('EACCES', 'subpath', joined, 'path traversal (..) in subpath')
      const volumeFd = await openVolume(deps, volumePath)
      let sourceFd = -1
      try {
        const relative = components.length === 0 ? '.' : components.join('/')
        const open = () => openInVolume(sys, volumeFd, relative, joined, O_PATH, () => outsideText(volumePath, components))
        try {
          sourceFd = await open()
        } catch (err) {
          // Missing, as the kubelet does: made first (safely), then opened the same way.
          if (!isHostError(err, 'ENOENT')) throw err
          await makeSubPathDirs(sys, volumeFd, volumePath, components)
          sourceFd = await open()
        }
        const type = await typeOf(sys, sourceFd, joined)
        if ((await deps.stat(target)) === null) {
          if (type === 'directory') await deps.mkdirAll(target, 0o750)
          else {
            await deps.mkdirAll(dirname(target), 0o750)
            await deps.createFile(target, 0o640)
          }
        }
        // The magic link names the very inode the kernel resolved, whatever the path says now.
        const source = `/proc/self/fd/${sourceFd}`
        await deps.bind(source, target)
        if (options?.readOnly) await deps.remountReadOnly(source, target)
      } finally {
        if (sourceFd >= 0) close(sys, sourceFd)
        close(sys, volumeFd)
      }
    },
  }
}
