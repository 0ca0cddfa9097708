/**
 * The I/O worker's own code (see io-workers.ts), and the states a call goes through, shared with
 * the main thread in a SharedArrayBuffer: 0 waiting, 1 started, 2 taken back (skipped), 3 answered
 * with the answer kept in the worker's arena, 4 answered with the answer only in a message.
 */

/** A call the worker makes; the answer's shape is given with each. */
export type IoOp =
  /** → FileFields, or null when missing (ENOENT). */
  | readonly ['lstat' | 'stat', path: string]
  /** → undefined. */
  | readonly ['mkdir' | 'chmod', path: string, mode: number]
  /** → true when `path` itself was made, false when it existed. */
  | readonly ['mkdirp', path: string, mode: number]
  /** → undefined. `remove` is unlink(2), then rmdir(2) when it is a directory (EISDIR). */
  | readonly ['rmdir' | 'unlink' | 'remove', path: string]
  /** → the names in the directory (unsorted). */
  | readonly ['readdir', path: string]
  /** → undefined. */
  | readonly ['truncate', path: string, size: number]
  /** fsync(2) of the file → undefined. */
  | readonly ['fsync', path: string]
  /** → undefined. */
  | readonly ['rename', from: string, to: string]
  /** → undefined. */
  | readonly ['symlink', target: string, path: string]
  /** → the link's target. */
  | readonly ['readlink', path: string]
  /** → undefined; never follows `path`. */
  | readonly ['lchown', path: string, uid: number, gid: number]
  /** → the path with every symlink resolved (beneath the root: the path itself, which must have none). */
  | readonly ['realpath', path: string]
  /** The whole file → Uint8Array, or string when `utf8`. */
  | readonly ['readFile', path: string, utf8: boolean]
  /** → undefined. */
  | readonly ['writeFile', path: string, data: Uint8Array | string, mode: number]
  /** Appends (O_APPEND|O_CREAT, 0600), then fdatasync(2) when `sync`. → undefined. */
  | readonly ['append', path: string, data: Uint8Array | string, sync: boolean]
  | readonly ['pwrite', path: string, offset: number, data: Uint8Array, sync: boolean]
  /** → SysResult. */
  | readonly ['mount', source: string | null, target: string, fstype: string | null, flags: number, data: string | null]
  /** → SysResult. */
  | readonly ['umount2', target: string, flags: number]
  /** statx(AT_FDCWD, path, flags, mask) → SysResult with the filled `struct statx` as `buf`. */
  | readonly ['statx', path: string, flags: number, mask: number]
  /**
   * Per path in order: statx(path, flags, mask), skipped when missing; a mount root (`mountRoot` in
   * stx_attributes) stops with EBUSY; else rmdir(2) when statx saw a directory, unlink(2) when
   * anything else, skipped when missing. With `unmountLast`, a mount root at the last path is
   * umount2(2)'d with `umountFlags` first (EINVAL, nothing mounted there by then, is no failure),
   * then rmdir(2)'d (EBUSY for a mount still there); one whose statx fails as a broken mount's does
   * stops it with errno 0, so that the main thread unmounts it under that mount's own deadline and
   * quarantine. → {@link RemoveUnmounted}.
   */
  | readonly [
      'removeUnmounted',
      paths: readonly string[],
      flags: number,
      mask: number,
      mountRoot: number,
      unmountLast: boolean,
      umountFlags: number,
    ]
  /** Each step as the call of the same name (`lstat`, `mkdir`, `mkdirp`, `writeFile`) or a stat and a chmod. → {@link FileStepsDone}. */
  | readonly ['steps', steps: readonly IoStep[]]

/**
 * One step of a `steps` call. `lstat` with `stop` ends the steps when something is there;
 * `setPermissions` is a stat(2) and, when its permission bits are not `permissions`, a chmod(2)
 * to them keeping the setuid, setgid and sticky bits.
 */
export type IoStep =
  | readonly ['lstat', path: string, stop: boolean]
  | readonly ['mkdir' | 'mkdirp', path: string, mode: number]
  | readonly ['setPermissions', path: string, permissions: number]
  | readonly ['writeFile', path: string, data: Uint8Array | string, mode: number]
  /**
   * statx(2) of `path` (not following a symlink); when it is not a mount root, mount(2) of the
   * rest onto it. A symlink there, or a kernel whose statx cannot tell a mount root, ends the steps
   * undecided (`[i, 'undecided']`): the main thread makes that step and the rest.
   */
  | readonly [
      'mountUnlessMountPoint',
      path: string,
      source: string | null,
      fstype: string | null,
      flags: number,
      data: string | null,
      statxFlags: number,
      statxMask: number,
      mountRoot: number,
    ]

/**
 * Where `steps` ended: `[steps.length]` when every step was made, `[i]` at an `lstat` step that
 * found something, `[i, 'undecided']` at a mount step the worker could not decide (see
 * {@link IoStep}), `[i, syscall, failure]` at the step whose call failed (`stat` or `chmod` for
 * `setPermissions`).
 */
export type FileStepsDone = readonly [stoppedAt: number] | readonly [undecidedAt: number, undecided: 'undecided'] | readonly [failedAt: number, syscall: string, failure: IoFailure]

/**
 * Where `removeUnmounted` stopped: at `paths.length` when every path is done; else at the path that
 * ended it, with the errno and call that failed (EBUSY from `statx`: a mount point), or errno 0
 * when this kernel's statx cannot tell a mount root.
 */
export type RemoveUnmounted = readonly [stoppedAt: number, errno: number, syscall: string, detail?: string]

/**
 * The root calls resolve beneath, as a batch carries it: the names the root goes by (as given, and
 * with its symlinks resolved), a directory descriptor of it, and its real path. A path strictly
 * beneath one of the names is resolved from the descriptor with openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS): a symlink at any level below the root fails the
 * call with ELOOP, and the act is made on what that one resolution found.
 */
export type IoRoot = readonly [names: readonly string[], fd: number, realPath: string]

/** A file's fields as the worker sends them: mode (with the type bits), uid, gid, size, dev, ino, mtimeMs, rdev. */
export type FileFields = readonly [number, number, number, number, number, number, number, number]

/** How a call failed in the worker: what node:fs or koffi said. */
export interface IoFailure {
  readonly code: string
  readonly errno?: number
  /** The call that failed (`rmdir` for a `remove` of a directory). */
  readonly syscall?: string
  readonly message: string
  /** What the worker adds to the errno's text (a refused symlink beneath the root). */
  readonly detail?: string
  /** The path the failure is about, when not the call's own (a bind's source). */
  readonly hostPath?: string
}

/** Not started yet: the worker or the main thread may claim it. */
export const WAITING = 0
/** Claimed by the worker, which is making it. */
export const STARTED = 1
/** Claimed back by the main thread: the worker skips it. */
export const TAKEN_BACK = 2
/** Answered; the answer is also serialized in the worker's arena, at the call's span. */
export const KEPT = 3
/** Answered; the answer was too large for the arena and went out in a message at once. */
const POSTED = 4

/** Span lengths below 0: an answer kept without the serializer (see {@link readPlainAnswer}). */
const PLAIN_UNDEFINED = -1
const PLAIN_NULL = -2
/** `PLAIN_NUMBERS - n`: n numbers as float64 at the span's (8-aligned) offset. */
const PLAIN_NUMBERS = -3

/**
 * The answer at a span whose length is below 0, which the worker kept without the serializer:
 * `[0, undefined]`, `[0, null]` or `[0, numbers]`. Undefined for a span of serialized bytes.
 */
export function readPlainAnswer(arena: SharedArrayBuffer, at: number, length: number): readonly [0, unknown] | undefined {
  if (length >= 0) return undefined
  if (length === PLAIN_UNDEFINED) return [0, undefined]
  if (length === PLAIN_NULL) return [0, null]
  return [0, Array.from(new Float64Array(arena, at, PLAIN_NUMBERS - length))]
}

/** Bytes of each worker's arena: answers of one batch, readable while the worker is blocked. */
export const ARENA_BYTES = 1 << 20

/**
 * The worker, as CommonJS source (evaluated by `new Worker(..., { eval: true })`, so it needs no
 * file of its own next to the compiled code). It loads koffi only for the first libc call, as the
 * main thread does: file calls work where the FFI library cannot load.
 *
 * Answers go back in messages every millisecond or so and at the end of the batch. Each answer is
 * also serialized into the arena before the call is marked answered, so that when the worker then
 * blocks in a later call the main thread can read it there: a finished call is never held by a
 * blocked one. An answer too large for what is left of the arena is posted at once instead.
 */
export const WORKER_SOURCE = `
'use strict'
const { parentPort, workerData } = require('node:worker_threads')
const fs = require('node:fs')
const v8 = require('node:v8')
const arena = new Uint8Array(workerData.arena)
let serializer = new v8.DefaultSerializer()
let lib
function libc() {
  if (lib) return lib
  const koffi = require(workerData.koffi)
  const c = koffi.load('libc.so.6')
  lib = {
    koffi,
    mount: c.func('mount', 'int', ['const char *', 'const char *', 'const char *', 'unsigned long', 'const char *']),
    umount2: c.func('umount2', 'int', ['const char *', 'int']),
    statx: c.func('statx', 'int', ['int', 'const char *', 'int', 'unsigned int', 'void *']),
    // glibc has no openat2 wrapper: syscall(SYS_openat2, ...), fixed arguments (the same registers on 64-bit ABIs).
    openat2: c.func('syscall', 'long', ['long', 'int', 'const char *', 'void *', 'size_t']),
    // Descriptors openat2 gave are closed by the C library: node:fs warns on closing one it did not open.
    close: c.func('int close(int)'),
    // The acts on one name in a directory descriptor, without a walk through /proc/self/fd.
    unlinkat: c.func('int unlinkat(int, const char *, int)'),
    mkdirat: c.func('int mkdirat(int, const char *, unsigned int)'),
    renameat2: c.func('int renameat2(int, const char *, int, const char *, unsigned int)'),
    // fchmodat2(2) (Linux 6.6): a chmod that follows no symlink, on a name in a directory.
    fchmodat2: c.func('syscall', 'long', ['long', 'int', 'const char *', 'unsigned int', 'unsigned int']),
  }
  return lib
}
function result(ret) {
  return { ret, errno: ret < 0 ? lib.koffi.errno() : 0 }
}
function fields(s) {
  return s === undefined ? null : [s.mode, s.uid, s.gid, s.size, s.dev, s.ino, s.mtimeMs, s.rdev]
}
const AT_FDCWD = -100
const { ENOENT, EEXIST, EBUSY, EINVAL, ENOTCONN, ESTALE, EIO, EACCES, EHOSTDOWN, ENODEV, ELOOP, EXDEV } = require('node:os').constants.errno
const CORRUPTED = new Set([ENOTCONN, ESTALE, EIO, EACCES, EHOSTDOWN, ENODEV])
const O_WRONLY = 1
const O_CREAT = 0o100
const O_TRUNC = 0o1000
const O_APPEND = 0o2000
const O_DIRECTORY = 0o200000
const O_CLOEXEC = 0o2000000
const O_PATH = 0o10000000
const UMOUNT_NOFOLLOW = 8
// openat2(2): no symlink at any level, no magic link, nothing above the directory it starts from.
const RESOLVE_NO_MAGICLINKS = 0x02
const RESOLVE_NO_SYMLINKS = 0x04
const RESOLVE_BENEATH = 0x08
const how = new BigUint64Array(3)
// The root this batch resolves beneath: [names it goes by, its descriptor], or null (no root yet).
let root = null
// The path relative to the root when 'p' is strictly beneath it, else undefined.
function beneath(p) {
  if (root === null) return undefined
  for (const prefix of root[0]) {
    if (p.length > prefix.length + 1 && p.charCodeAt(prefix.length) === 47 && p.startsWith(prefix)) {
      const rel = p.slice(prefix.length + 1)
      // Empty and '.' components dropped; a '..' stays, for the kernel to refuse when it leaves the root.
      if (!rel.includes('//') && !rel.includes('./') && !rel.endsWith('/') && rel !== '.' && !rel.endsWith('/.')) return rel
      const parts = rel.split('/').filter((part) => part !== '' && part !== '.')
      return parts.length === 0 ? undefined : parts.join('/')
    }
  }
  return undefined
}
function fail(errno, syscall, message, detail) {
  return Object.assign(new Error(message), { code: errnoName(errno), errno: -errno, syscall, detail })
}
let errnoNames
function errnoName(errno) {
  if (!errnoNames) {
    errnoNames = new Map()
    for (const [name, value] of Object.entries(require('node:os').constants.errno)) if (!errnoNames.has(value)) errnoNames.set(value, name)
  }
  return errnoNames.get(errno) ?? 'EIO'
}
// The level of 'rel' that is a symlink (or the first that is not a directory), for a refusal's text.
function refusedLevel(rel) {
  const parts = rel.split('/')
  for (let i = 1; i <= parts.length; i++) {
    const level = parts.slice(0, i).join('/')
    try {
      if (fs.lstatSync('/proc/self/fd/' + root[1] + '/' + level).isSymbolicLink()) return root[0][0] + '/' + level
    } catch {
      return undefined
    }
  }
  return undefined
}
// openat2(dirfd, rel) with no symlink followed at any level: a descriptor the caller closes.
function openBeneath(dirfd, rel, flags, mode, resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH) {
  how[0] = BigInt(flags | O_CLOEXEC)
  how[1] = BigInt(mode)
  how[2] = BigInt(resolve)
  const fd = Number(libc().openat2(437, dirfd, rel, how, 24))
  if (fd >= 0) return fd
  const errno = lib.koffi.errno()
  if (errno === ELOOP && dirfd === root[1]) throw rootError({ errno: -ELOOP }, rel)
  if (errno === EXDEV) throw fail(errno, 'openat2', 'path escapes the root', 'refusing a path that leaves the root')
  throw fail(errno, 'openat2', 'openat2 failed')
}
// openBeneath for 'rel' beneath the root, resolved from the deepest directory above it that this batch
// already holds open (a pod's volumes share theirs): fewer levels for the kernel to walk, with the same
// rules at each (RESOLVE_BENEATH keeps it beneath that directory, itself beneath the root). A path
// with a '..' is resolved from the root, where the kernel judges it against the root itself.
function openBeneathRoot(rel, flags, mode) {
  if (directories.size > 0 && !rel.includes('..')) {
    for (let slash = rel.lastIndexOf('/'); slash > 0; slash = rel.lastIndexOf('/', slash - 1)) {
      const dirfd = directories.get(rel.slice(0, slash))
      if (dirfd === undefined || dirfd === null) continue
      try {
        return openBeneath(dirfd, rel.slice(slash + 1), flags, mode)
      } catch (err) {
        throw err.errno === -ELOOP ? rootError(err, rel) : err
      }
    }
  }
  return openBeneath(root[1], rel, flags, mode)
}
// Runs 'use(dirfd, name)' with the directory holding 'p' open: beneath the root, that directory is
// resolved with no symlink at any level and 'name' is one component the act never follows; a path
// outside the root is used as it is (AT_FDCWD).
function inParent(p, use) {
  const rel = beneath(p)
  if (rel === undefined) return use(AT_FDCWD, p)
  const slash = rel.lastIndexOf('/')
  const name = slash < 0 ? rel : rel.slice(slash + 1)
  if (name === '..' || name === '.' || name === '') throw fail(EINVAL, 'openat2', 'not a name beneath the root')
  if (slash < 0) return use(root[1], name)
  return use(directory(rel.slice(0, slash)), name)
}
// The directories opened beneath the root during this batch, by path relative to it: the calls of a
// batch share their directories (a pod's volumes, a volume's marker and directory), each opened once.
// An entry goes when kubevol removes, renames, mounts on or unmounts it or a directory above it
// (forget), and all of them when the batch ends. A directory someone else renames meanwhile keeps its
// descriptor, as within any one call: the act lands in that very directory, never through a link.
// A directory found missing is kept as null (a pod's volumes ask for the same missing
// volume-subpaths) until a call that may make a directory (forgetMissing).
const directories = new Map()
function directory(rel) {
  let fd = directories.get(rel)
  if (fd === null) throw fail(ENOENT, 'openat2', 'no such file or directory')
  if (fd === undefined) {
    try {
      fd = openBeneathRoot(rel, O_PATH | O_DIRECTORY, 0)
    } catch (err) {
      if (err.code === 'ENOENT') directories.set(rel, null)
      throw err
    }
    directories.set(rel, fd)
  }
  return fd
}
function forget(p) {
  if (directories.size === 0) return
  const rel = beneath(p)
  if (rel === undefined) return
  for (const [key, fd] of directories) {
    if (key === rel || (key.length > rel.length && key.charCodeAt(rel.length) === 47 && key.startsWith(rel))) {
      if (fd !== null) lib.close(fd)
      directories.delete(key)
    }
  }
}
function forgetMissing() {
  for (const [key, fd] of directories) if (fd === null) directories.delete(key)
}
function forgetAll() {
  for (const fd of directories.values()) if (fd !== null) lib.close(fd)
  directories.clear()
}
// The name a node:fs or libc call takes for 'name' in 'dirfd': through the descriptor's magic link.
function at(dirfd, name) {
  return dirfd === AT_FDCWD ? name : '/proc/self/fd/' + dirfd + '/' + name
}
const AT_REMOVEDIR = 0x200
// unlinkat(2) and mkdirat(2) of 'name' in 'dirfd' (AT_FDCWD: a path), failing as node:fs does.
function unlinkAt(dirfd, name, dir) {
  if (libc().unlinkat(dirfd, name, dir ? AT_REMOVEDIR : 0) < 0) {
    const errno = lib.koffi.errno()
    throw fail(errno, dir ? 'rmdir' : 'unlink', dir ? 'rmdir failed' : 'unlink failed')
  }
}
// chmod of 'name' in 'dirfd' that never follows it: fchmodat2(AT_SYMLINK_NOFOLLOW), or on a kernel
// without it the name opened with no symlink followed and chmod'ed through its descriptor.
let noFchmodat2 = false
function chmodAt(dirfd, name, mode) {
  if (!noFchmodat2) {
    if (Number(libc().fchmodat2(452, dirfd, name, mode, 0x100)) >= 0) return
    const errno = lib.koffi.errno()
    if (errno !== 38) throw fail(errno === 95 ? ELOOP : errno, 'chmod', 'chmod failed')
    noFchmodat2 = true
  }
  const fd = openBeneath(dirfd, name, O_PATH, 0)
  try {
    fs.chmodSync('/proc/self/fd/' + fd, mode)
  } finally {
    lib.close(fd)
  }
}
function mkdirAt(dirfd, name, mode) {
  if (libc().mkdirat(dirfd, name, mode) < 0) throw fail(lib.koffi.errno(), 'mkdir', 'mkdir failed')
}
// lstat of 'name' in 'dirfd' by statx(AT_SYMLINK_NOFOLLOW): the fields node:fs would give, or null when missing.
const STATX_BASIC_STATS = 0x7ff
const lstatBuf = new Uint8Array(256)
const lstatView = new DataView(lstatBuf.buffer)
function makedev(major, minor) {
  return (major & 0xfff) * 256 + (minor & 0xff) + (minor >>> 8) * 1048576 + Math.floor(major / 4096) * 4294967296
}
function lstatAt(dirfd, name) {
  if (libc().statx(dirfd, name, 0x100, STATX_BASIC_STATS, lstatBuf) < 0) {
    const errno = lib.koffi.errno()
    if (errno === ENOENT) return null
    throw fail(errno, 'lstat', 'lstat failed')
  }
  const v = lstatView
  const mtimeMs = Number(v.getBigInt64(112, true)) * 1000 + v.getUint32(120, true) / 1e6
  return [v.getUint16(28, true), v.getUint32(20, true), v.getUint32(24, true), Number(v.getBigUint64(40, true)), makedev(v.getUint32(136, true), v.getUint32(140, true)), Number(v.getBigUint64(32, true)), mtimeMs, makedev(v.getUint32(128, true), v.getUint32(132, true))]
}
// Runs 'use(target)' on 'p' itself: beneath the root opened (with no symlink at any level, the last
// one included) and named by its descriptor; outside the root, the path.
function onFile(p, flags, mode, use) {
  const rel = beneath(p)
  if (rel === undefined) return use(p, undefined)
  const fd = openBeneathRoot(rel, flags, mode)
  try {
    return use('/proc/self/fd/' + fd, fd)
  } finally {
    lib.close(fd)
  }
}
// Beneath the root: 'mkdir -p' one level at a time from the root's descriptor, never through a symlink.
function mkdirBeneath(rel, mode) {
  const slash = rel.lastIndexOf('/')
  const name = slash < 0 ? rel : rel.slice(slash + 1)
  // The directory it goes in, as the batch has it (a pod's volumes share theirs), made first when
  // missing, a level at a time, each opened with no symlink followed.
  let parent
  try {
    parent = slash < 0 ? root[1] : directory(rel.slice(0, slash))
  } catch (err) {
    if (err.code !== 'ENOENT') throw err.errno === -ELOOP && !err.detail ? rootError(err, rel) : err
    forgetMissing()
    mkdirBeneath(rel.slice(0, slash), mode)
    parent = directory(rel.slice(0, slash))
  }
  try {
    mkdirAt(parent, name, mode)
    forgetMissing()
    return true
  } catch (err) {
    if (err.code !== 'EEXIST') throw err
  }
  // Already there: a directory is fine; a symlink is refused, anything else is EEXIST (as mkdir -p says).
  const type = (lstatAt(parent, name)?.[0] ?? 0) & 0o170000
  if (type === 0o120000) throw rootError({ errno: -ELOOP }, rel)
  if (type !== 0o040000) throw fail(EEXIST, 'mkdir', 'file exists')
  return false
}
function rootError(err, rel) {
  if (err.errno !== -ELOOP) return err
  const level = refusedLevel(rel)
  const text = 'refusing to follow a symlink beneath the root'
  return fail(ELOOP, 'openat2', text, level ? text + ': ' + level + ' is a symlink' : text)
}
const MS_REMOUNT = 32
const RENAME_NOREPLACE = 1
const MS_PROPAGATION = (1 << 18) | (1 << 19) | (1 << 20) | (1 << 17)
const MNT_DETACH = 2
const STATX_MNT_ID = 0x1000
const AT_EMPTY_PATH = 0x1000
function mountIdOf(fd) {
  const buf = new Uint8Array(256)
  if (libc().statx(fd, '', AT_EMPTY_PATH, STATX_MNT_ID, buf) < 0) return undefined
  const view = new DataView(buf.buffer)
  return (view.getUint32(0, true) & STATX_MNT_ID) === 0 ? undefined : view.getBigUint64(144, true)
}
// A new mount made on the directory 'fd' opened at 'target' must be what 'target' names now: a
// directory renamed aside (and a symlink put in its place) between the open and the mount would
// leave the mount where kubevol never finds it again. The name is resolved again (no symlink at any
// level); when it does not lead into a mount other than the one 'fd' is on, the new mount is undone
// through the descriptor and the call fails.
//
// A mount point cannot be renamed (EBUSY), but a rename that passed that check before the mount
// was attached still moves the directory, mount and all, after mount(2) returned. So the check
// waits first for any rename under way in the directory: renameat2(name, name, RENAME_NOREPLACE)
// takes the directory's rename lock as every rename there (or across it) does, and changes
// nothing (EEXIST, or ENOENT). A rename that starts after it sees the mount point and is refused.
function landedWhereNamed(target, fd, flags) {
  if ((flags & (MS_REMOUNT | MS_PROPAGATION)) !== 0) return
  const before = mountIdOf(fd)
  if (before === undefined) return
  let now
  try {
    inParent(target, (d, n) => libc().renameat2(d, n, d, n, RENAME_NOREPLACE))
    // The name looked up again in its directory, not followed if it is a symlink now: a lookup that
    // lands on the new mount gives its id.
    now = inParent(target, (d, n) => {
      const buf = new Uint8Array(256)
      if (libc().statx(d, n, 0x100, STATX_MNT_ID, buf) < 0) return before
      return new DataView(buf.buffer).getBigUint64(144, true)
    })
  } catch {
    now = before
  }
  if (now !== before) return
  result(libc().umount2('/proc/self/fd/' + fd, MNT_DETACH))
  throw fail(EBUSY, 'mount', 'mount target moved', 'the mount target was moved or replaced while it was mounted; the mount was undone')
}
function mountPath(p, use) {
  return onFile(p, O_PATH, 0, use)
}
// One path of removeUnmounted, 'name' in 'dirfd': undefined when done (or missing), else
// [errno, syscall] where it stops (errno 0: undecided, for the main thread).
function removeOne(dirfd, name, buf, view, flags, mask, mountRoot, unmountIt, umountFlags) {
  // One statx a path: it tells a mount root, and the type the removal goes by.
  const r = result(libc().statx(dirfd, name, flags, mask, buf))
  if (r.ret < 0) {
    if (r.errno === ENOENT) return undefined
    // A mount whose filesystem no longer answers (mount-utils' IsCorruptedMnt) may hang its
    // unmount too: the main thread makes it, under that mount's own deadline.
    if (unmountIt && CORRUPTED.has(r.errno)) return [0, '']
    return [r.errno, 'statx']
  }
  const path = at(dirfd, name)
  // stx_attributes_mask and stx_attributes, low words (the mount-root bit is below 2^32).
  if ((view.getUint32(56, true) & mountRoot) === 0) return [0, '']
  try {
    if ((view.getUint32(8, true) & mountRoot) !== 0) {
      if (!unmountIt) return [EBUSY, 'statx']
      const u = result(libc().umount2(path, dirfd === AT_FDCWD ? umountFlags : umountFlags | UMOUNT_NOFOLLOW))
      if (u.ret < 0 && u.errno !== EINVAL) return [u.errno, 'umount2']
      unlinkAt(dirfd, name, true)
      return undefined
    }
    // By the type statx gave (stx_mask bit 1, stx_mode at 28): one call, not an unlink(2) that
    // fails with EISDIR first. Something else there by now fails the call (EISDIR, ENOTDIR).
    if ((view.getUint32(0, true) & 1) === 0) {
      try {
        unlinkAt(dirfd, name, false)
      } catch (err) {
        if (err.code !== 'EISDIR') throw err
        unlinkAt(dirfd, name, true)
      }
    } else unlinkAt(dirfd, name, (view.getUint16(28, true) & 0o170000) === 0o040000)
  } catch (err) {
    if (err.code === 'ENOENT') return undefined
    return [Math.abs(err.errno), err.syscall]
  }
  return undefined
}
// A missing file (or directory on its way) is null, not an error, for lstat and stat.
function orNull(run) {
  try {
    return run()
  } catch (err) {
    if (err.code === 'ENOENT') return null
    throw err
  }
}
function writeAll(fd, data, position) {
  // write(2) may write less than asked (a filesystem that fills up): the rest is written until all
  // of it is, or a call fails (ENOSPC) and the write fails, never half-done unseen.
  const bytes = typeof data === 'string' ? Buffer.from(data) : data
  for (let done = 0; done < bytes.length; ) {
    const n = fs.writeSync(fd, bytes, done, bytes.length - done, position === undefined ? null : position + done)
    if (n <= 0) throw Object.assign(new Error('write wrote nothing'), { code: 'EIO', syscall: 'write' })
    done += n
  }
}
// Beneath the root each call resolves the directory it acts in with openat2 (no symlink at any
// level) and acts on one name in it, or opens the file itself the same way; outside the root the
// path is used as node:fs takes it.
const calls = {
  lstat: (p) => orNull(() => inParent(p, (d, n) => (d === AT_FDCWD ? fields(fs.lstatSync(p, { throwIfNoEntry: false })) : lstatAt(d, n)))),
  stat: (p) => orNull(() => onFile(p, O_PATH, 0, (_, fd) => fields(fd === undefined ? fs.statSync(p, { throwIfNoEntry: false }) : fs.fstatSync(fd)))),
  mkdir: (p, mode) => inParent(p, (d, n) => {
    try {
      mkdirAt(d, n, mode)
      forgetMissing()
    } catch (err) {
      // Beneath the root a symlink in the way is refused as a symlink, not reported as a directory's name taken.
      if (err.code === 'EEXIST' && d !== AT_FDCWD && ((lstatAt(d, n)?.[0] ?? 0) & 0o170000) === 0o120000) throw rootError(Object.assign(err, { errno: -ELOOP }), beneath(p))
      throw err
    }
  }),
  chmod: (p, mode) => inParent(p, (d, n) => {
    if (d === AT_FDCWD) return void fs.chmodSync(p, mode)
    if (((lstatAt(d, n)?.[0] ?? 0) & 0o170000) === 0o120000) throw rootError({ errno: -ELOOP }, beneath(p))
    chmodAt(d, n, mode)
  }),
  mkdirp: (p, mode) => {
    const rel = beneath(p)
    if (rel === undefined) return fs.mkdirSync(p, { mode, recursive: true }) !== undefined
    // What this batch found missing may be there now.
    forgetMissing()
    return mkdirBeneath(rel, mode)
  },
  rmdir: (p) => {
    inParent(p, (d, n) => unlinkAt(d, n, true))
    forget(p)
  },
  unlink: (p) => inParent(p, (d, n) => unlinkAt(d, n, false)),
  remove: (p) => inParent(p, (d, n) => {
    try {
      unlinkAt(d, n, false)
    } catch (err) {
      if (err.code !== 'EISDIR') throw err
      unlinkAt(d, n, true)
      forget(p)
    }
  }),
  readFile: (p, utf8) => onFile(p, 0, 0, (_, fd) => fs.readFileSync(fd ?? p, utf8 ? 'utf8' : undefined)),
  readdir: (p) => onFile(p, O_DIRECTORY, 0, (target) => fs.readdirSync(target)),
  writeFile: (p, data, mode) => {
    if (beneath(p) === undefined) return void fs.writeFileSync(p, data, { mode })
    onFile(p, O_WRONLY | O_CREAT | O_TRUNC, mode, (_, fd) => writeAll(fd, data))
  },
  append: (p, data, sync) => onFile(p, O_WRONLY | O_APPEND | O_CREAT, 0o600, (_, opened) => {
    const fd = opened ?? fs.openSync(p, 'a', 0o600)
    try {
      writeAll(fd, data)
      if (sync) fs.fdatasyncSync(fd)
    } finally {
      if (opened === undefined) fs.closeSync(fd)
    }
  }),
  pwrite: (p, offset, data, sync) => onFile(p, O_WRONLY, 0, (_, opened) => {
    // No O_CREAT: the file and the room written into were made beforehand (node opens with O_CLOEXEC).
    const fd = opened ?? fs.openSync(p, fs.constants.O_WRONLY)
    try {
      writeAll(fd, data, offset)
      if (sync) fs.fdatasyncSync(fd)
    } finally {
      if (opened === undefined) fs.closeSync(fd)
    }
  }),
  truncate: (p, size) => onFile(p, O_WRONLY, 0, (_, fd) => { fd === undefined ? fs.truncateSync(p, size) : fs.ftruncateSync(fd, size) }),
  fsync: (p) => onFile(p, 0, 0, (_, opened) => {
    const fd = opened ?? fs.openSync(p, 'r')
    try {
      fs.fsyncSync(fd)
    } finally {
      if (opened === undefined) fs.closeSync(fd)
    }
  }),
  rename: (from, to) => {
    inParent(from, (d1, n1) => inParent(to, (d2, n2) => { fs.renameSync(at(d1, n1), at(d2, n2)) }))
    forget(from)
    forget(to)
    forgetMissing()
  },
  symlink: (target, p) => inParent(p, (d, n) => {
    fs.symlinkSync(target, at(d, n))
    forgetMissing()
  }),
  readlink: (p) => inParent(p, (d, n) => fs.readlinkSync(at(d, n))),
  lchown: (p, uid, gid) => inParent(p, (d, n) => { fs.lchownSync(at(d, n), uid, gid) }),
  // The path with every symlink resolved; beneath the root a path that opens with none is its own answer.
  realpath: (p) => {
    const rel = beneath(p)
    if (rel === undefined) return fs.realpathSync(p)
    onFile(p, O_PATH, 0, () => undefined)
    return root[2] + '/' + rel
  },
  mount: (source, target, fstype, flags, data) => {
    // A directory kept from before is the one below the new mount: gone from the batch's list.
    forget(target)
    return mountPath(target, (t, fd) => {
      const made = () => {
        const r = result(libc().mount(sourceName, t, fstype, flags, data))
        if (r.ret >= 0 && fd !== undefined) landedWhereNamed(target, fd, flags)
        return r
      }
      let sourceName = source
      if (source === null || beneath(source) === undefined) return made()
      let opened = false
      try {
        return mountPath(source, (s) => {
          opened = true
          sourceName = s
          return made()
        })
      } catch (err) {
        // The source could not be resolved: the error is about it, not about the target.
        if (!opened) err.hostPath = source
        throw err
      }
    })
  },
  // Beneath the root the last name is never followed, whatever the flags asked.
  umount2: (target, flags) => {
    forget(target)
    return inParent(target, (d, n) => result(libc().umount2(at(d, n), d === AT_FDCWD ? flags : flags | UMOUNT_NOFOLLOW)))
  },
  statx: (p, flags, mask) => inParent(p, (d, n) => {
    const buf = new Uint8Array(256)
    const r = result(libc().statx(d, n, flags, mask, buf))
    return r.ret < 0 ? r : { ret: r.ret, errno: 0, buf }
  }),
  removeUnmounted: (paths, flags, mask, mountRoot, unmountLast, umountFlags) => {
    const buf = new Uint8Array(256)
    const view = new DataView(buf.buffer)
    for (let i = 0; i < paths.length; i++) {
      const unmountIt = unmountLast && i === paths.length - 1
      let stop
      try {
        stop = inParent(paths[i], (d, n) => removeOne(d, n, buf, view, flags, mask, mountRoot, unmountIt, umountFlags))
      } catch (err) {
        // The directory holding it is gone: so is it.
        if (err.code === 'ENOENT') continue
        return [i, Math.abs(err.errno ?? -EIO), err.syscall ?? 'openat2', err.detail]
      } finally {
        forget(paths[i])
      }
      if (stop !== undefined) return [i, ...stop]
    }
    return [paths.length, 0, '']
  },
  steps: (steps) => {
    for (let i = 0; i < steps.length; i++) {
      const [op, p, arg] = steps[i]
      let syscall = op
      try {
        if (op === 'lstat') {
          if (calls.lstat(p) !== null && arg) return [i]
        } else if (op === 'mountUnlessMountPoint') {
          const [, , source, fstype, flags, data, statxFlags, statxMask, mountRoot] = steps[i]
          syscall = 'statx'
          const s = calls.statx(p, statxFlags, statxMask)
          if (s.ret < 0) throw { code: 'ERRNO', errno: s.errno, syscall, message: 'statx failed' }
          const view = new DataView(s.buf.buffer)
          // A symlink (stx_mode at 28), or no mount-root bit in stx_attributes_mask (at 56): undecided.
          if ((view.getUint16(28, true) & 0o170000) === 0o120000 || (view.getUint32(56, true) & mountRoot) === 0) return [i, 'undecided']
          if ((view.getUint32(8, true) & mountRoot) === 0) {
            syscall = 'mount'
            const m = calls.mount(source, p, fstype, flags, data)
            if (m.ret < 0) throw { code: 'ERRNO', errno: m.errno, syscall, message: 'mount failed' }
          }
        } else if (op === 'setPermissions') {
          syscall = 'stat'
          inParent(p, (d, n) => {
            if (d === AT_FDCWD) {
              const s = fs.statSync(p, { throwIfNoEntry: false })
              if (s !== undefined && (s.mode & 0o777) !== arg) {
                syscall = 'chmod'
                fs.chmodSync(p, (s.mode & 0o7000) | arg)
              }
              return
            }
            // Beneath the root: the name's own type and mode (a symlink is refused, never followed).
            const mode = lstatAt(d, n)?.[0]
            if (mode === undefined) return
            if ((mode & 0o170000) === 0o120000) throw rootError({ errno: -ELOOP }, beneath(p))
            if ((mode & 0o777) !== arg) {
              syscall = 'chmod'
              chmodAt(d, n, (mode & 0o7000) | arg)
            }
          })
        } else {
          calls[op](...steps[i].slice(1))
        }
      } catch (err) {
        if (op === 'setPermissions' && syscall === 'stat' && err?.code === 'ENOENT') continue
        return [i, syscall, failure(err)]
      }
    }
    return [steps.length]
  },
}
function failure(err) {
  return { code: typeof err?.code === 'string' ? err.code : 'EIO', errno: err?.errno, syscall: err?.syscall, message: String(err?.message ?? err), detail: err?.detail, hostPath: err?.hostPath }
}
// The common answers (nothing, null, a stat's numbers) kept without the serializer, which would
// cost several microseconds each: a length below 0 says which (see readPlainAnswer). Returns the
// arena's new used size, or undefined when the answer is not one of them or there is no room.
const numbers = new Float64Array(workerData.arena)
function keepPlain(answer, i, spans, used) {
  if (answer[0] !== 0) return undefined
  const value = answer[1]
  if (value === undefined || value === null) {
    spans[2 * i] = used
    spans[2 * i + 1] = value === undefined ? ${PLAIN_UNDEFINED} : ${PLAIN_NULL}
    return used
  }
  if (!Array.isArray(value) || value.length > 16) return undefined
  for (const n of value) if (typeof n !== 'number') return undefined
  const at = (used + 7) & ~7
  if (at + 8 * value.length > arena.length) return undefined
  numbers.set(value, at / 8)
  spans[2 * i] = at
  spans[2 * i + 1] = ${PLAIN_NUMBERS} - value.length
  return at + 8 * value.length
}
// The answer serialized, or undefined when it cannot be kept in the room left.
function serialize(answer, room) {
  const value = answer[1]
  // A whole file larger than the room is not worth serializing to find out.
  if ((typeof value === 'string' && value.length > room) || (value instanceof Uint8Array && value.length > room)) return undefined
  try {
    serializer.writeHeader()
    serializer.writeValue(answer)
    const bytes = serializer.releaseBuffer()
    return bytes.length <= room ? bytes : undefined
  } catch {
    serializer = new v8.DefaultSerializer()
    return undefined
  }
}
parentPort.on('message', ({ id, ops, claims, spans, startedAt, root: rootOfBatch }) => {
  root = rootOfBatch
  let from = 0
  let answers = []
  let sent = performance.now()
  let used = 0
  for (let i = 0; i < ops.length; i++) {
    // When it starts, for the watchdog (written first: a call seen started is never older than this).
    startedAt[0] = Date.now()
    if (Atomics.compareExchange(claims, i, ${WAITING}, ${STARTED}) !== ${WAITING}) {
      answers.push(0)
      continue
    }
    const [name, ...args] = ops[i]
    let answer
    try {
      answer = [0, calls[name](...args)]
    } catch (err) {
      answer = [1, failure(err)]
    }
    answers.push(answer)
    const kept = keepPlain(answer, i, spans, used)
    const bytes = kept === undefined ? serialize(answer, arena.length - used) : undefined
    let now = performance.now()
    if (kept !== undefined || bytes !== undefined) {
      if (kept !== undefined) used = kept
      else {
        arena.set(bytes, used)
        spans[2 * i] = used
        spans[2 * i + 1] = bytes.length
        used += bytes.length
      }
      // Written before the state: the main thread reads the span only after it reads ${KEPT}.
      Atomics.store(claims, i, ${KEPT})
    } else {
      Atomics.store(claims, i, ${POSTED})
      // Out now, so that a later call that blocks cannot hold it.
      now = Number.POSITIVE_INFINITY
    }
    if (now - sent >= 1 && i < ops.length - 1) {
      parentPort.postMessage([id, from, answers, false])
      from = i + 1
      answers = []
      sent = performance.now()
    }
  }
  forgetAll()
  parentPort.postMessage([id, from, answers, true])
})
`
