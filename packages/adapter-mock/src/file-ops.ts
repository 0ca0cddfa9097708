/**
 * File operations over the mount table: stat, mkdir, readdir, read/write, symlinks, modes and
 * owners. Each is synchronous and throws a HostError with the errno the kernel would give.
 */
import type { FileInfo, FileStep } from '@kubevol/core'
import { HostError } from '@kubevol/core'
import { dirname } from '@kubevol/core/host'
import type { HostState } from './host-state.js'
import { assertWritable } from './host-state.js'
import { type MissingAt, beneathRootAt, lookup, lookupExisting, lookupOrMissing, tryLookup } from './lookup.js'
import type { Mount } from './mount-table.js'
import type { DirNode, FileNode, SpecialNodeType } from './nodes.js'
import { fileInfo, noBytes } from './nodes.js'
import { encodeText } from './text.js'

/** `lstat` (`follow` false) or `stat`: null when the path or a symlink's target does not exist. */
export function statPath(state: HostState, path: string, follow: boolean): FileInfo | null {
  const result = tryLookup(state, path, { follow, syscall: follow ? 'stat' : 'lstat' })
  return result?.found ? fileInfo(result.found.node) : null
}

function makeDir(state: HostState, path: string, mode: number): void {
  const result = lookup(state, path, { follow: false, syscall: 'mkdir' })
  if (result.entry?.type === 'symlink' && beneathRootAt(state, path) >= 0) {
    // Beneath the root a symlink in mkdir's way is refused as one at any other level, not EEXIST.
    throw new HostError('ELOOP', 'mkdir', path, `refusing to follow a symlink beneath the root: ${path} is a symlink`)
  }
  if (result.entry || !result.parent) throw new HostError('EEXIST', 'mkdir', path, 'file exists')
  makeDirIn(result.parent.mount, result.parent.node, result.name, path, mode)
}

/** Makes directory `name` in `parent` (seen through `mount`), which has no entry of that name; `path` names it in errors. */
function makeDirIn(mount: Mount, parent: DirNode, name: string, path: string, mode: number): DirNode {
  assertWritable(mount, 'mkdir', path)
  const fs = parent.fs
  if (!fs.hasRoom(0, 1)) throw new HostError('ENOSPC', 'mkdir', path, 'no space left on device')
  const dir = fs.newDir(mode)
  fs.link(parent, name, dir)
  return dir
}

/**
 * `mkdir -p` from where a walk found a directory missing: the components left are made one inside
 * the other, with no lookup (a directory made just now is empty and nothing is mounted on it).
 * False, having made nothing, when a component left is `.` or `..`: those lead elsewhere, and the
 * caller makes the path prefix by prefix.
 */
function makeDirsFrom(from: MissingAt, path: string, mode: number): boolean {
  const names = from.rest.slice(from.at).split('/').filter((name) => name !== '')
  if (names.some((name) => name === '.' || name === '..')) return false
  let dir = from.node
  for (const name of names) dir = makeDirIn(from.mount, dir, name, path, mode)
  return true
}

/** mkdir(2), or `mkdir -p` with `recursive`; `mode` (default 0o777) is masked by the umask. */
export function mkdir(state: HostState, path: string, options: { readonly recursive?: boolean; readonly mode?: number } = {}): void {
  const mode = (options.mode ?? 0o777) & ~state.umask
  if (!options.recursive) {
    makeDir(state, path, mode)
    return
  }
  if (!path.startsWith('/')) throw new HostError('EINVAL', 'mkdir', path, 'path is not absolute')
  // The common cases in one lookup: the directory exists, or only its last component is missing.
  // A missing component on the way is an expected answer here, so it comes back as no result
  // rather than as an error.
  const result = lookupOrMissing(state, path, { follow: true, syscall: 'mkdir' })
  if (result && 'missing' in result) {
    if (makeDirsFrom(result, path, mode)) return
  } else if (result?.found) {
    if (result.found.node.type !== 'directory') throw new HostError('EEXIST', 'mkdir', path, 'file exists')
    return
  } else if (result?.parent && !result.entry) {
    // Looked up again without following: the last component may be a link to a missing path.
    makeDir(state, path, mode)
    return
  }
  // A dangling component on the way, or one left that is `.` or `..`: the parents one by one.
  const parts = path.split('/').filter((part) => part !== '')
  let created = false
  for (let i = 1; i <= parts.length; i++) {
    const prefix = `/${parts.slice(0, i).join('/')}`
    // Below a directory made just now nothing exists yet (it is empty and nothing is mounted on
    // it), so the only lookup needed is makeDir's own; `.` and `..` lead elsewhere and are looked up.
    const part = parts[i - 1]
    if (part === '.' || part === '..') created = false
    else if (created) {
      makeDir(state, prefix, mode)
      continue
    }
    const found = lookup(state, prefix, { follow: true, syscall: 'mkdir' }).found
    if (!found) {
      makeDir(state, prefix, mode)
      created = true
    } else if (found.node.type !== 'directory') {
      throw new HostError(i === parts.length ? 'EEXIST' : 'ENOTDIR', 'mkdir', path, i === parts.length ? 'file exists' : 'not a directory')
    }
  }
}

/** The names in a directory, sorted. */
export function readdir(state: HostState, path: string): string[] {
  const { node } = lookupExisting(state, path, { follow: true, syscall: 'scandir' }).found
  if (node.type !== 'directory') throw new HostError('ENOTDIR', 'scandir', path, 'not a directory')
  return [...node.children.keys()].sort()
}

/** A copy of a regular file's bytes (a sparse tail reads as zeros). */
export function readFile(state: HostState, path: string): Uint8Array {
  const { node } = lookupExisting(state, path, { follow: true, syscall: 'open' }).found
  if (node.type === 'directory') throw new HostError('EISDIR', 'read', path, 'is a directory')
  if (node.type !== 'file') throw new HostError('EINVAL', 'read', path, 'not a regular file')
  const bytes = new Uint8Array(node.size)
  bytes.set(node.data)
  return bytes
}

function writeInto(file: FileNode, bytes: Uint8Array, path: string): void {
  const fs = file.fs
  // The content is replaced, so a filesystem image on it is gone (mkfs would have to run again).
  file.image = null
  if (fs.hasRoom(bytes.length - file.data.length)) {
    fs.setData(file, bytes)
    return
  }
  // Like write(2) after O_TRUNC: the file keeps what fit, then ENOSPC.
  fs.setData(file, noBytes)
  fs.setData(file, bytes.slice(0, Math.max(0, fs.capacityBytes - fs.usedBytes)))
  throw new HostError('ENOSPC', 'write', path, 'no space left on device')
}

/** Creates or replaces a regular file (following a symlink at `path`); `mode` applies on creation only. */
export function writeFile(state: HostState, path: string, data: Uint8Array | string, options: { readonly mode?: number } = {}): void {
  const bytes = data.length === 0 ? noBytes : typeof data === 'string' ? encodeText(data) : data.slice()
  const result = lookup(state, path, { follow: true, syscall: 'open' })
  if (result.found) {
    const { node, mount } = result.found
    if (node.type === 'directory') throw new HostError('EISDIR', 'open', path, 'is a directory')
    if (node.type !== 'file') throw new HostError('EINVAL', 'open', path, 'not a regular file')
    assertWritable(mount, 'open', path)
    writeInto(node, bytes, path)
    return
  }
  if (!result.parent) throw new HostError('ENOENT', 'open', path, 'no such file or directory')
  assertWritable(result.parent.mount, 'open', path)
  const fs = result.parent.node.fs
  if (!fs.hasRoom(0, 1)) throw new HostError('ENOSPC', 'open', path, 'no space left on device')
  const file = fs.newFile((options.mode ?? 0o666) & ~state.umask, noBytes)
  fs.link(result.parent.node, result.name, file)
  writeInto(file, bytes, path)
}

/** Spare room kept after appended data, so a file appended to in small pieces is not copied each time. */
const appendRoom = new WeakMap<FileNode, Uint8Array>()

/** Appends to a regular file, creating it with mode 0600 (open with O_APPEND|O_CREAT). Amortized O(appended bytes). */
export function appendFile(state: HostState, path: string, data: Uint8Array | string): void {
  const bytes = typeof data === 'string' ? encodeText(data) : data
  const result = lookup(state, path, { follow: true, syscall: 'open' })
  if (!result.found) {
    writeFile(state, path, bytes, { mode: 0o600 })
    return
  }
  const { node, mount } = result.found
  if (node.type === 'directory') throw new HostError('EISDIR', 'open', path, 'is a directory')
  if (node.type !== 'file') throw new HostError('EINVAL', 'open', path, 'not a regular file')
  assertWritable(mount, 'write', path)
  if (!node.fs.hasRoom(bytes.length)) throw new HostError('ENOSPC', 'write', path, 'no space left on device')
  const old = node.data
  const needed = old.length + bytes.length
  let room = appendRoom.get(node)
  if (!room || room.buffer !== old.buffer || room.length < needed) {
    room = new Uint8Array(Math.max(needed, old.length * 2, 4096))
    room.set(old)
    appendRoom.set(node, room)
  }
  room.set(bytes, old.length)
  node.image = null
  node.fs.setData(node, room.subarray(0, needed))
}

/** pwrite(2) into an existing regular file (following a symlink): the bytes at `offset` replaced, the file grown only past its end. */
export function writeFileAt(state: HostState, path: string, offset: number, data: Uint8Array): void {
  if (!Number.isSafeInteger(offset) || offset < 0) throw new HostError('EINVAL', 'pwrite', path, `invalid offset ${offset}`)
  const { node, mount } = lookupExisting(state, path, { follow: true, syscall: 'open' }).found
  if (node.type === 'directory') throw new HostError('EISDIR', 'open', path, 'is a directory')
  if (node.type !== 'file') throw new HostError('EINVAL', 'open', path, 'not a regular file')
  assertWritable(mount, 'write', path)
  const old = node.data
  const end = offset + data.length
  node.image = null
  if (end <= old.length) {
    // In place: the bytes are the file's own (readFile and writeFile copy), as pwrite into blocks
    // the file has. A journal writing into its room does this for every record.
    old.set(data, offset)
    node.fs.touch(node)
    return
  }
  if (!node.fs.hasRoom(end - old.length)) throw new HostError('ENOSPC', 'write', path, 'no space left on device')
  // Past the end: into the spare room appends keep, so a file grown in small writes is not copied each time.
  let room = appendRoom.get(node)
  if (!room || room.buffer !== old.buffer || room.length < end) {
    room = new Uint8Array(Math.max(end, old.length * 2, 4096))
    room.set(old)
    appendRoom.set(node, room)
  }
  // A hole between the end and the offset reads as zeros.
  room.fill(0, old.length, offset)
  room.set(data, offset)
  node.fs.setData(node, room.subarray(0, end))
}

/** symlink(2): `target` is stored verbatim and may dangle. */
export function symlink(state: HostState, target: string, path: string): void {
  if (target === '') throw new HostError('ENOENT', 'symlink', path, 'empty symlink target')
  const result = lookup(state, path, { follow: false, syscall: 'symlink' })
  if (result.entry || !result.parent) throw new HostError('EEXIST', 'symlink', path, 'file exists')
  assertWritable(result.parent.mount, 'symlink', path)
  const fs = result.parent.node.fs
  if (!fs.hasRoom(0, 1)) throw new HostError('ENOSPC', 'symlink', path, 'no space left on device')
  fs.link(result.parent.node, result.name, fs.newSymlink(target))
}

/** readlink(2): EINVAL when `path` is not a symlink. */
export function readlink(state: HostState, path: string): string {
  const { node } = lookupExisting(state, path, { follow: false, syscall: 'readlink' }).found
  if (node.type !== 'symlink') throw new HostError('EINVAL', 'readlink', path, 'not a symbolic link')
  return node.target
}

/** chmod(2), following a symlink. */
export function chmod(state: HostState, path: string, mode: number): void {
  const { node, mount } = lookupExisting(state, path, { follow: true, syscall: 'chmod' }).found
  assertWritable(mount, 'chmod', path)
  node.mode = mode & 0o7777
}

/** lchown(2): -1 keeps a value. */
export function lchown(state: HostState, path: string, uid: number, gid: number): void {
  const { node, mount } = lookupExisting(state, path, { follow: false, syscall: 'lchown' }).found
  assertWritable(mount, 'lchown', path)
  if (uid !== -1) node.uid = uid
  if (gid !== -1) node.gid = gid
}

/** Creates a character device, socket or fifo at `path` (test setup: parents are created). */
export function mknod(state: HostState, path: string, type: SpecialNodeType, mode = 0o644): void {
  mkdir(state, dirname(path), { recursive: true })
  const result = lookup(state, path, { follow: false, syscall: 'mknod' })
  if (result.entry || !result.parent) throw new HostError('EEXIST', 'mknod', path, 'file exists')
  const fs = result.parent.node.fs
  const node = type === 'char-device' ? fs.newDevice(type, 0, mode) : fs.newSpecial(type, mode)
  fs.link(result.parent.node, result.name, node)
}

/**
 * Creates a regular file of `sizeBytes` (or resizes one, like `truncate -s`), holding no data: it
 * reads as zeros and takes no space. For loop-device backing files (test setup: parents are created).
 */
export function allocateFile(state: HostState, path: string, sizeBytes: number): void {
  mkdir(state, dirname(path), { recursive: true })
  const result = lookup(state, path, { follow: true, syscall: 'truncate' })
  if (result.found) {
    const { node } = result.found
    if (node.type !== 'file') throw new HostError('EINVAL', 'truncate', path, 'not a regular file')
    node.fs.setData(node, node.data.slice(0, sizeBytes), sizeBytes)
    return
  }
  if (!result.parent) throw new HostError('ENOENT', 'truncate', path, 'no such file or directory')
  const fs = result.parent.node.fs
  const file = fs.newFile(0o644, noBytes)
  file.size = sizeBytes
  fs.link(result.parent.node, result.name, file)
}

/**
 * The Host's `fileSteps` in one go, as `fileStepsOneByOne` makes them through the separate calls:
 * the index of the `lstat` with `stopIfFound` that found something, else the number of steps; the
 * first step that throws ends it with that step's error.
 */
export function fileSteps(state: HostState, steps: readonly FileStep[], mountUnlessMountPoint: (step: FileStep & { readonly op: 'mountUnlessMountPoint' }) => void): number {
  for (let i = 0; i < steps.length; i++) {
    const step = steps[i] as FileStep
    switch (step.op) {
      case 'lstat':
        if (statPath(state, step.path, false) && step.stopIfFound) return i
        break
      case 'mkdir':
        mkdir(state, step.path, { recursive: step.recursive, mode: step.mode })
        break
      case 'setPermissions': {
        const info = statPath(state, step.path, true)
        if (info && (info.mode & 0o777) !== step.permissions) chmod(state, step.path, (info.mode & ~0o777) | step.permissions)
        break
      }
      case 'writeFile':
        writeFile(state, step.path, step.data, step.mode === undefined ? undefined : { mode: step.mode })
        break
      case 'mountUnlessMountPoint':
        mountUnlessMountPoint(step)
        break
    }
  }
  return steps.length
}
