/**
 * Safe subPath binds (the kubelet's fix for CVE-2017-1002101 and CVE-2021-25741): resolve the sub
 * path, refuse one that leaves the volume, then walk it again one component at a time with
 * openat(O_PATH|O_NOFOLLOW) from a descriptor of the volume, refuse any symlink met on the way, and
 * bind-mount the final descriptor through /proc/self/fd/<fd>. A symlink swapped in after the check
 * is met by the walk (ELOOP), so the bind can never land outside the volume.
 */
import { mkdir, realpath, stat, writeFile } from 'node:fs/promises'
import { dirname } from 'node:path'
import type { SubPaths } from '@kubevol/core'
import { HostError, joinPath } from '@kubevol/core'
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
