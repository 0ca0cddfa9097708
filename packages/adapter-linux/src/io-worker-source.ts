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
export type RemoveUnmounted = readonly [stoppedAt: number, errno: number, syscall: string]

/** A file's fields as the worker sends them: mode (with the type bits), uid, gid, size, dev, ino, mtimeMs, rdev. */
export type FileFields = readonly [number, number, number, number, number, number, number, number]

/** How a call failed in the worker: what node:fs or koffi said. */
export interface IoFailure {
  readonly code: string
  readonly errno?: number
  /** The call that failed (`rmdir` for a `remove` of a directory). */
  readonly syscall?: string
  readonly message: string
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
const { ENOENT, EBUSY, EINVAL, ENOTCONN, ESTALE, EIO, EACCES, EHOSTDOWN, ENODEV } = require('node:os').constants.errno
const CORRUPTED = new Set([ENOTCONN, ESTALE, EIO, EACCES, EHOSTDOWN, ENODEV])
const calls = {
  lstat: (p) => fields(fs.lstatSync(p, { throwIfNoEntry: false })),
  stat: (p) => fields(fs.statSync(p, { throwIfNoEntry: false })),
  mkdir: (p, mode) => { fs.mkdirSync(p, { mode }) },
  chmod: (p, mode) => { fs.chmodSync(p, mode) },
  mkdirp: (p, mode) => fs.mkdirSync(p, { mode, recursive: true }) !== undefined,
  rmdir: (p) => { fs.rmdirSync(p) },
  unlink: (p) => { fs.unlinkSync(p) },
  remove: (p) => {
    try {
      fs.unlinkSync(p)
    } catch (err) {
      if (err.code !== 'EISDIR') throw err
      fs.rmdirSync(p)
    }
  },
  readFile: (p, utf8) => (utf8 ? fs.readFileSync(p, 'utf8') : fs.readFileSync(p)),
  writeFile: (p, data, mode) => { fs.writeFileSync(p, data, { mode }) },
  append: (p, data, sync) => {
    const fd = fs.openSync(p, 'a', 0o600)
    try {
      // write(2) may write less than asked (a filesystem that fills up): the rest is written
      // until all of it is, or a call fails (ENOSPC) and the append fails, never half-done unseen.
      const bytes = typeof data === 'string' ? Buffer.from(data) : data
      for (let at = 0; at < bytes.length; ) {
        const n = fs.writeSync(fd, bytes, at, bytes.length - at)
        if (n <= 0) throw Object.assign(new Error('write wrote nothing'), { code: 'EIO', syscall: 'write' })
        at += n
      }
      if (sync) fs.fdatasyncSync(fd)
    } finally {
      fs.closeSync(fd)
    }
  },
  pwrite: (p, offset, data, sync) => {
    // No O_CREAT: the file and the room written into were made beforehand (node opens with O_CLOEXEC).
    const fd = fs.openSync(p, fs.constants.O_WRONLY)
    try {
      // A short write is carried on from where it stopped, as an append is.
      for (let at = 0; at < data.length; ) {
        const n = fs.writeSync(fd, data, at, data.length - at, offset + at)
        if (n <= 0) throw Object.assign(new Error('write wrote nothing'), { code: 'EIO', syscall: 'pwrite' })
        at += n
      }
      if (sync) fs.fdatasyncSync(fd)
    } finally {
      fs.closeSync(fd)
    }
  },
  mount: (source, target, fstype, flags, data) => result(libc().mount(source, target, fstype, flags, data)),
  umount2: (target, flags) => result(libc().umount2(target, flags)),
  statx: (p, flags, mask) => {
    const buf = new Uint8Array(256)
    const r = result(libc().statx(AT_FDCWD, p, flags, mask, buf))
    return r.ret < 0 ? r : { ret: r.ret, errno: 0, buf }
  },
  removeUnmounted: (paths, flags, mask, mountRoot, unmountLast, umountFlags) => {
    const buf = new Uint8Array(256)
    const view = new DataView(buf.buffer)
    for (let i = 0; i < paths.length; i++) {
      // One statx a path: it tells a mount root, and the type the removal goes by.
      const unmountIt = unmountLast && i === paths.length - 1
      const r = result(libc().statx(AT_FDCWD, paths[i], flags, mask, buf))
      if (r.ret < 0) {
        if (r.errno === ENOENT) continue
        // A mount whose filesystem no longer answers (mount-utils' IsCorruptedMnt) may hang its
        // unmount too: the main thread makes it, under that mount's own deadline.
        if (unmountIt && CORRUPTED.has(r.errno)) return [i, 0, '']
        return [i, r.errno, 'statx']
      }
      // stx_attributes_mask and stx_attributes, low words (the mount-root bit is below 2^32).
      if ((view.getUint32(56, true) & mountRoot) === 0) return [i, 0, '']
      if ((view.getUint32(8, true) & mountRoot) !== 0) {
        if (!unmountIt) return [i, EBUSY, 'statx']
        const u = result(libc().umount2(paths[i], umountFlags))
        if (u.ret < 0 && u.errno !== EINVAL) return [i, u.errno, 'umount2']
        try {
          fs.rmdirSync(paths[i])
        } catch (err) {
          if (err.code === 'ENOENT') continue
          return [i, Math.abs(err.errno), err.syscall]
        }
        continue
      }
      try {
        // By the type statx gave (stx_mask bit 1, stx_mode at 28): one call, not an unlink(2) that
        // fails with EISDIR first. Something else there by now fails the call (EISDIR, ENOTDIR).
        if ((view.getUint32(0, true) & 1) === 0) calls.remove(paths[i])
        else if ((view.getUint16(28, true) & 0o170000) === 0o040000) fs.rmdirSync(paths[i])
        else fs.unlinkSync(paths[i])
      } catch (err) {
        if (err.code === 'ENOENT') continue
        return [i, Math.abs(err.errno), err.syscall]
      }
    }
    return [paths.length, 0, '']
  },
  steps: (steps) => {
    for (let i = 0; i < steps.length; i++) {
      const [op, p, arg] = steps[i]
      let syscall = op
      try {
        if (op === 'lstat') {
          if (fs.lstatSync(p, { throwIfNoEntry: false }) !== undefined && arg) return [i]
        } else if (op === 'mountUnlessMountPoint') {
          const [, , source, fstype, flags, data, statxFlags, statxMask, mountRoot] = steps[i]
          syscall = 'statx'
          const buf = new Uint8Array(256)
          const view = new DataView(buf.buffer)
          const s = result(libc().statx(AT_FDCWD, p, statxFlags, statxMask, buf))
          if (s.ret < 0) throw { code: 'ERRNO', errno: s.errno, syscall, message: 'statx failed' }
          // A symlink (stx_mode at 28), or no mount-root bit in stx_attributes_mask (at 56): undecided.
          if ((view.getUint16(28, true) & 0o170000) === 0o120000 || (view.getUint32(56, true) & mountRoot) === 0) return [i, 'undecided']
          if ((view.getUint32(8, true) & mountRoot) === 0) {
            syscall = 'mount'
            const m = result(libc().mount(source, p, fstype, flags, data))
            if (m.ret < 0) throw { code: 'ERRNO', errno: m.errno, syscall, message: 'mount failed' }
          }
        } else if (op === 'setPermissions') {
          syscall = 'stat'
          const s = fs.statSync(p, { throwIfNoEntry: false })
          if (s !== undefined && (s.mode & 0o777) !== arg) {
            syscall = 'chmod'
            fs.chmodSync(p, (s.mode & 0o7000) | arg)
          }
        } else {
          calls[op](...steps[i].slice(1))
        }
      } catch (err) {
        return [i, syscall, { code: typeof err?.code === 'string' ? err.code : 'EIO', errno: err?.errno, syscall: err?.syscall, message: String(err?.message ?? err) }]
      }
    }
    return [steps.length]
  },
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
parentPort.on('message', ({ id, ops, claims, spans, startedAt }) => {
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
      answer = [1, { code: typeof err?.code === 'string' ? err.code : 'EIO', errno: err?.errno, syscall: err?.syscall, message: String(err?.message ?? err) }]
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
  parentPort.postMessage([id, from, answers, true])
})
`
