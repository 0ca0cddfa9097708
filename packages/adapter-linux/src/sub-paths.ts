/**
 * Safe subPath binds (the kubelet's fix for CVE-2017-1002101 and CVE-2021-25741): resolve the sub
 * path, refuse one that leaves the volume, then walk it again one component at a time with
 * openat(O_PATH|O_NOFOLLOW) from a descriptor of the volume, refuse any symlink met on the way, and
 * bind-mount the final descriptor through /proc/self/fd/<fd>. A symlink swapped in after the check
 * is met by the walk (ELOOP), so the bind can never land outside the volume. A missing sub path is
 * created first, as safely ({@link makeSubPathDirs}).
 */
import { chmod, mkdir, realpath, stat, writeFile } from 'node:fs/promises'
import { dirname } from 'node:path'
import type { SubPaths } from '@kubevol/core'
import { HostError } from '@kubevol/core'
import { joinPath } from '@kubevol/core/host'
import * as c from './constants.js'
import { STATX_SIZE, readStatx } from './libc.js'
import { isPathWithin } from './mountinfo.js'
import type { Sys } from './sys.js'

/** A descriptor opened by {@link openBeneath} and what it refers to. */
export interface OpenedPath {
  readonly fd: number
  readonly type: 'directory' | 'file' | 'other'
}

async function typeOf(sys: Sys, fd: number, path: string): Promise<number> {
  const buf = new Uint8Array(STATX_SIZE)
  await sys.call('statx', path, (l) => l.statx(fd, '', c.AT_EMPTY_PATH | c.AT_SYMLINK_NOFOLLOW, c.STATX_TYPE | c.STATX_MODE, buf))
  return readStatx(buf).stx_mode & c.S_IFMT
}

/**
 * Opens `relative` below the directory `base` without following any symlink: every component is
 * opened with openat(O_PATH|O_NOFOLLOW) relative to the previous one and checked with statx.
 * Fails with ELOOP at the first symlink, ENOTDIR at a non-directory in the middle. The caller
 * closes the returned descriptor.
 */
export async function openBeneath(sys: Sys, base: string, relative: string): Promise<OpenedPath> {
  const flags = c.O_PATH | c.O_NOFOLLOW | c.O_CLOEXEC
  let fd = await sys.call('open', base, (l) => l.open(base, flags | c.O_DIRECTORY, 0))
  let current = base
  try {
    let mode = await typeOf(sys, fd, current)
    for (const component of relative.split('/').filter((s) => s !== '' && s !== '.')) {
      if (component === '..') throw new HostError('EACCES', 'openat', joinPath(current, component), 'path traversal (..) in subpath')
      if (mode !== c.S_IFDIR) throw new HostError('ENOTDIR', 'openat', current, 'not a directory')
      const parent = fd
      current = joinPath(current, component)
      fd = await sys.call('openat', current, (l) => l.openat(parent, component, flags, 0))
      sys.libc().sync.close(parent)
      mode = await typeOf(sys, fd, current)
      if (mode === c.S_IFLNK) throw new HostError('ELOOP', 'openat', current, 'symlink detected in subpath')
    }
    return { fd, type: mode === c.S_IFDIR ? 'directory' : mode === c.S_IFREG ? 'file' : 'other' }
  } catch (err) {
    sys.libc().sync.close(fd)
    throw err
  }
}

const isMissing = (err: unknown): boolean => err instanceof HostError && err.code === 'ENOENT'

/**
 * Creates the missing directories of `subPath` inside `volumePath`, as the kubelet's
 * `doSafeMakeDir`: the longest existing prefix is resolved and must be inside the volume; it is
 * opened from the volume's root without following any symlink ({@link openBeneath}); each missing
 * component is then made with mkdir relative to the open descriptor (through its /proc/self/fd
 * link: mkdirat) and opened again with O_NOFOLLOW|O_DIRECTORY, so a symlink swapped in on the way
 * fails the call instead of being followed. New directories get the permission bits (and setgid)
 * of the volume's root. Nothing to do when the whole path exists.
 */
async function makeSubPathDirs(sys: Sys, volumePath: string, subPath: string): Promise<void> {
  const components = subPath.split('/').filter((s) => s !== '' && s !== '.')
  if (components.includes('..')) throw new HostError('EACCES', 'mkdirat', joinPath(volumePath, subPath), 'path traversal (..) in subpath')
  const base = await sys.fs('realpath', volumePath, () => realpath(volumePath))
  let existing = base
  let missing = components.length
  for (let i = 0; i < components.length; i++) {
    const prefix = joinPath(volumePath, ...components.slice(0, i + 1))
    const resolved = await sys.fs('realpath', prefix, () => realpath(prefix)).catch((err: unknown) => {
      if (isMissing(err)) return undefined
      throw err
    })
    if (resolved === undefined) {
      missing = i
      break
    }
    existing = resolved
  }
  if (missing === components.length) return
  if (!isPathWithin(existing, base)) {
    throw new HostError('EACCES', 'mkdirat', joinPath(volumePath, subPath), `path "${existing}" is outside of allowed base "${base}"`)
  }
  const mode = (await sys.fs('stat', base, () => stat(base))).mode & 0o2777
  const opened = await openBeneath(sys, base, existing.slice(base.length))
  let fd = opened.fd
  try {
    if (opened.type !== 'directory') throw new HostError('ENOTDIR', 'mkdirat', existing, 'not a directory')
    let current = existing
    const flags = c.O_PATH | c.O_NOFOLLOW | c.O_DIRECTORY | c.O_CLOEXEC
    for (const component of components.slice(missing)) {
      current = joinPath(current, component)
      const at = `/proc/self/fd/${fd}/${component}`
      // mkdir never follows a last component that is a symlink (EEXIST); the parent is the descriptor.
      await sys.fs('mkdirat', current, () => mkdir(at, { mode: mode & 0o777 }))
      const parent = fd
      fd = await sys.call('openat', current, (l) => l.openat(parent, component, flags, 0))
      sys.libc().sync.close(parent)
      // The mode mkdir got went through the umask; set it on the very directory opened.
      await sys.fs('chmod', current, () => chmod(`/proc/self/fd/${fd}`, mode))
    }
  } finally {
    sys.libc().sync.close(fd)
  }
}

/** What a subPath bind needs from the host besides system calls. */
export interface SubPathDeps {
  readonly sys: Sys
  /** Makes `target` a read-only bind (remount keeping the locked flags). */
  readonly remountReadOnly: (source: string, target: string) => Promise<void>
}

/** The `subPaths` capability. */
export function createSubPaths({ sys, remountReadOnly }: SubPathDeps): SubPaths {
  return {
    async bind(volumePath, subPath, target, options) {
      await makeSubPathDirs(sys, volumePath, subPath)
      const joined = joinPath(volumePath, subPath)
      const base = await sys.fs('realpath', volumePath, () => realpath(volumePath))
      const resolved = await sys.fs('realpath', joined, () => realpath(joined))
      if (!isPathWithin(resolved, base)) {
        throw new HostError('EACCES', 'subpath', joined, `subpath "${resolved}" not within volume path "${base}"`)
      }
      const opened = await openBeneath(sys, base, resolved.slice(base.length))
      try {
        const exists = await sys.fs('stat', target, () => stat(target)).then(
          () => true,
          (err: unknown) => {
            if (err instanceof HostError && err.code === 'ENOENT') return false
            throw err
          },
        )
        if (!exists) {
          if (opened.type === 'directory') await sys.fs('mkdir', target, () => mkdir(target, { recursive: true, mode: 0o750 }))
          else {
            await sys.fs('mkdir', dirname(target), () => mkdir(dirname(target), { recursive: true, mode: 0o750 }))
            await sys.fs('open', target, () => writeFile(target, '', { mode: 0o640, flag: 'wx' }))
          }
        }
        // The magic link names the very inode the walk opened, whatever the path says now.
        const source = `/proc/self/fd/${opened.fd}`
        await sys.call('mount', target, (l) => l.mount(source, target, null, c.MS_BIND, null), { detail: `mount --bind ${resolved}` })
        if (options?.readOnly) await remountReadOnly(source, target)
      } finally {
        sys.libc().sync.close(opened.fd)
      }
    },
  }
}
