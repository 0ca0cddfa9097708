/**
 * Safe subPath binds on the memory host: resolve the sub path inside the volume, refuse what leads
 * outside, then walk the resolved path again without following any symlink and bind it. The whole
 * call runs in one step of the memory kernel, as the descriptor-based walk does on Linux, so a
 * symlink swapped in before the call is caught by the no-follow walk (ELOOP), never followed. A
 * missing sub path is created first, as safely.
 */
import { HostError } from '@kubevol/core'
import { joinPath } from '@kubevol/core/host'
import { chmod, mkdir, readlink, statPath, writeFile } from './file-ops.js'
import type { HostState } from './host-state.js'
import { mount } from './mount-ops.js'
import { beneathRootAt, maxSymlinks, tryLookup } from './lookup.js'

/** The canonical path of `path`: every symlink resolved, `.` and `..` folded. ENOENT when missing. */
function realpath(state: HostState, path: string): string {
  const pending = path.split('/').filter((c) => c !== '' && c !== '.')
  const done: string[] = []
  let links = 0
  while (pending.length > 0) {
    const component = pending.shift() as string
    if (component === '..') {
      done.pop()
      continue
    }
    const current = `/${[...done, component].join('/')}`
    const info = statPath(state, current, false)
    if (!info) throw new HostError('ENOENT', 'realpath', path, 'no such file or directory')
    if (info.type !== 'symlink') {
      done.push(component)
      continue
    }
    if (++links > maxSymlinks) throw new HostError('ELOOP', 'realpath', path, 'too many levels of symbolic links')
    const target = readlink(state, current)
    if (target.startsWith('/')) done.length = 0
    pending.unshift(...target.split('/').filter((c) => c !== '' && c !== '.'))
  }
  return `/${done.join('/')}`
}

function within(path: string, base: string): boolean {
  return path === base || path.startsWith(base === '/' ? '/' : `${base}/`)
}

/** `realpath`, or undefined when something on the way is missing. */
function realpathIfExists(state: HostState, path: string): string | undefined {
  try {
    return realpath(state, path)
  } catch (err) {
    if (err instanceof HostError && err.code === 'ENOENT') return undefined
    throw err
  }
}

/**
 * Creates the missing directories of `subPath` inside `volumePath` as the Linux host does (the
 * kubelet's `doSafeMakeDir`): the longest existing prefix must resolve inside the volume and be
 * reached from the volume's root without a symlink; each missing component is made where that walk
 * ended, never through a symlink, with the permission bits (and setgid) of the volume's root.
 */
function makeSubPathDirs(state: HostState, volumePath: string, subPath: string): void {
  const components = subPath.split('/').filter((c) => c !== '' && c !== '.')
  if (components.includes('..')) throw new HostError('EACCES', 'mkdirat', joinPath(volumePath, subPath), 'path traversal (..) in subpath')
  const base = realpath(state, volumePath)
  let existing = base
  let missing = components.length
  for (let i = 0; i < components.length; i++) {
    const resolved = realpathIfExists(state, joinPath(volumePath, ...components.slice(0, i + 1)))
    if (resolved === undefined) {
      missing = i
      break
    }
    existing = resolved
  }
  if (missing === components.length) return
  if (!within(existing, base)) {
    throw new HostError('EACCES', 'mkdirat', joinPath(volumePath, subPath), `path "${existing}" is outside of allowed base "${base}"`)
  }
  noFollowWalk(state, base, existing)
  if (statPath(state, existing, false)?.type !== 'directory') throw new HostError('ENOTDIR', 'mkdirat', existing, 'not a directory')
  const mode = (statPath(state, base, false)?.mode ?? 0o755) & 0o2777
  let current = existing
  for (const component of components.slice(missing)) {
    current = joinPath(current, component)
    // Non-recursive: a symlink (even a dangling one) in the way is EEXIST, never followed.
    mkdir(state, current, { mode: mode & 0o777 })
    chmod(state, current, mode)
  }
}

/** Every component of `resolved` below `base` must be a real entry, not a symlink (openat O_NOFOLLOW). */
function noFollowWalk(state: HostState, base: string, resolved: string): void {
  let current = base
  for (const component of resolved.slice(base.length).split('/').filter(Boolean)) {
    current = joinPath(current, component)
    const info = statPath(state, current, false)
    if (!info) throw new HostError('ENOENT', 'openat', current, 'no such file or directory')
    if (info.type === 'symlink') throw new HostError('ELOOP', 'openat', current, 'symlink detected in subpath')
  }
}

/**
 * Beneath the locked root `path` is opened with no symlink at any level, its last one included
 * (ELOOP), as the Linux host opens the volume and the target from the root's descriptor.
 */
function refuseSymlinksBeneathRoot(state: HostState, path: string): void {
  if (beneathRootAt(state, path) >= 0) tryLookup(state, path, { follow: true, syscall: 'openat' })
}

/** See the Host port's `SubPaths.bind`. */
export function bindSubPath(state: HostState, volumePath: string, subPath: string, target: string, readOnly: boolean): void {
  refuseSymlinksBeneathRoot(state, volumePath)
  refuseSymlinksBeneathRoot(state, target)
  makeSubPathDirs(state, volumePath, subPath)
  const base = realpath(state, volumePath)
  const resolved = realpath(state, joinPath(volumePath, subPath))
  if (!within(resolved, base)) {
    throw new HostError('EACCES', 'subpath', joinPath(volumePath, subPath), `subpath "${resolved}" not within volume path "${base}"`)
  }
  // The no-follow walk: every component from the volume root down must be a real entry.
  noFollowWalk(state, base, resolved)
  const source = statPath(state, resolved, false)
  const existing = statPath(state, target, false)
  if (!existing) {
    if (source?.type === 'directory') mkdir(state, target, { recursive: true, mode: 0o750 })
    else {
      mkdir(state, target.slice(0, target.lastIndexOf('/')) || '/', { recursive: true, mode: 0o750 })
      writeFile(state, target, '', { mode: 0o640 })
    }
  }
  mount(state, { source: resolved, target, bind: true, readOnly })
}
