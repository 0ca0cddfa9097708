/**
 * The Linux host's common system calls, made in batches on worker threads of its own.
 *
 * Every call the host makes must leave the main thread (it may block in the kernel). Through libuv's
 * threadpool that is one hop per call: the call queued under the pool's lock, a pool thread woken,
 * the answer queued back and the main thread woken. On a node with few cores the main thread, four
 * pool threads and the kernel's own work then share the CPUs, and the main thread, which runs all
 * of kubevol's logic, waits on the pool's lock and for a CPU: mounting and unmounting a thousand
 * volumes spent more of its time handing calls over than deciding what to call.
 *
 * Here the calls asked for during one turn of the event loop go to a worker thread in one message,
 * which makes them one after another, synchronously, and sends the answers back in a few messages.
 * One worker runs at a time, so the main thread keeps a core to itself on a two-core machine.
 *
 * A call that blocks (a dead NFS server) must not hold the calls queued behind it: each batch has a
 * short watchdog (`stallMs`). When it fires, the calls the worker has not started are taken back
 * (each call is claimed through shared memory, by the worker before it starts it or by the main
 * thread when it takes it back, never both) and go to another worker, started if need be, up to
 * `maxWorkers`. The blocked worker joins the others again if its call ever returns. The deadline of
 * the call itself (ETIMEDOUT) is the CallRunner's, as for every other call.
 */
import { createRequire } from 'node:module'
import { type ResourceLimits, Worker } from 'node:worker_threads'

/** A call the worker makes; the answer's shape is given with each. */
export type IoOp =
  /** → FileFields, or null when missing (ENOENT). */
  | readonly ['lstat' | 'stat', path: string]
  /** → undefined. */
  | readonly ['mkdir', path: string, mode: number]
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
  /** → SysResult. */
  | readonly ['mount', source: string | null, target: string, fstype: string | null, flags: number, data: string | null]
  /** → SysResult. */
  | readonly ['umount2', target: string, flags: number]
  /** statx(AT_FDCWD, path, flags, mask) → SysResult with the filled `struct statx` as `buf`. */
  | readonly ['statx', path: string, flags: number, mask: number]
  /**
   * Per path in order: statx(path, flags, mask), skipped when missing; a mount root (`mountRoot` in
   * stx_attributes) stops with EBUSY; else unlink(2), rmdir(2) when a directory, skipped when
   * missing. → {@link RemoveUnmounted}.
   */
  | readonly ['removeUnmounted', paths: readonly string[], flags: number, mask: number, mountRoot: number]

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

export interface IoWorkersOptions {
  /** Workers at most, blocked ones included. */
  readonly maxWorkers: number
  /** How long a batch may run before the calls it has not started go to another worker. */
  readonly stallMs: number
  /** Calls in one message at most. @default 256 */
  readonly batchSize?: number
  /** The workers' heap and stack limits (node's `resourceLimits`). @default node's */
  readonly resourceLimits?: ResourceLimits
}

interface Pending {
  readonly op: IoOp
  readonly resolve: (value: unknown) => void
  readonly reject: (err: unknown) => void
}

interface Batch {
  readonly id: number
  readonly items: readonly Pending[]
  /** Per call: 0 waiting, 1 started by the worker, 2 taken back by the main thread, 3 answered. */
  readonly claims: Int32Array
  timer?: ReturnType<typeof setTimeout>
}

interface Slot {
  readonly worker: Worker
  batch?: Batch
  /** Its batch ran past `stallMs`: it no longer counts as the running worker. */
  stalled: boolean
  /** It has answered a call: it started. */
  answered: boolean
}

/** [index of the first answer, answers, last message of the batch]; an answer is [0, value], [1, failure] or 0 (taken back). */
type Reply = readonly [id: number, from: number, answers: readonly (readonly [0, unknown] | readonly [1, IoFailure] | 0)[], done: boolean]

const WAITING = 0
const STARTED = 1
const TAKEN_BACK = 2

/** Runs {@link IoOp}s on worker threads, in batches. Workers start on the first call. */
export class IoWorkers {
  readonly #options: Required<IoWorkersOptions>
  readonly #slots: Slot[] = []
  #queue: Pending[] = []
  #scheduled = false
  #nextId = 0

  constructor(options: IoWorkersOptions) {
    this.#options = { batchSize: 256, resourceLimits: {}, ...options }
  }

  /** Makes `op` in a worker; resolves with its answer, rejects with an {@link IoFailure} or the worker's error. */
  run<T>(op: IoOp): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#queue.push({ op, resolve: resolve as (value: unknown) => void, reject })
      if (!this.#scheduled) {
        this.#scheduled = true
        setImmediate(() => {
          this.#scheduled = false
          this.#dispatch()
        })
      }
    })
  }

  /** Workers now, and how many of them are blocked past `stallMs`. */
  get workers(): { readonly started: number; readonly stalled: number } {
    return { started: this.#slots.length, stalled: this.#slots.filter((s) => s.stalled).length }
  }

  /** Stops the idle workers (a blocked one cannot be stopped). New calls start workers again. */
  close(): void {
    for (const slot of [...this.#slots]) {
      if (!slot.batch) this.#drop(slot, undefined)
    }
  }

  #dispatch(): void {
    while (this.#queue.length > 0) {
      let slot: Slot | undefined
      try {
        slot = this.#freeSlot()
      } catch (err) {
        // No thread could be started (the process is out of memory or threads): the calls fail.
        for (const item of this.#queue.splice(0)) item.reject(err)
        return
      }
      if (!slot) return
      const items = this.#queue.length <= this.#options.batchSize ? this.#queue : this.#queue.slice(0, this.#options.batchSize)
      this.#queue = items === this.#queue ? [] : this.#queue.slice(items.length)
      this.#send(slot, items)
    }
  }

  // The worker to send the next batch to: none while one runs; else an idle one, or a new one when
  // every worker is blocked (or there is none yet).
  #freeSlot(): Slot | undefined {
    let idle: Slot | undefined
    for (const slot of this.#slots) {
      if (slot.batch && !slot.stalled) return undefined
      if (!slot.batch) idle ??= slot
    }
    if (idle) return idle
    return this.#slots.length < this.#options.maxWorkers ? this.#start() : undefined
  }

  #start(): Slot {
    // No --require or other flags of the process: the worker runs only the source below.
    const worker = new Worker(WORKER_SOURCE, { eval: true, execArgv: [], workerData: { koffi: koffiPath() }, resourceLimits: this.#options.resourceLimits })
    worker.unref()
    const slot: Slot = { worker, stalled: false, answered: false }
    worker.on('message', (reply: Reply) => this.#answer(slot, reply))
    worker.on('error', (err: unknown) => this.#drop(slot, err))
    worker.on('exit', (code: number) => this.#drop(slot, new Error(`the I/O worker exited (code ${code})`)))
    this.#slots.push(slot)
    return slot
  }

  #send(slot: Slot, items: readonly Pending[]): void {
    const batch: Batch = { id: this.#nextId++, items, claims: new Int32Array(new SharedArrayBuffer(4 * items.length)) }
    slot.batch = batch
    slot.worker.ref()
    batch.timer = setTimeout(() => this.#stall(slot, batch), this.#options.stallMs)
    batch.timer.unref?.()
    slot.worker.postMessage({ id: batch.id, ops: items.map((item) => item.op), claims: batch.claims })
  }

  // The batch is taking long: its calls not yet started go to another worker.
  #stall(slot: Slot, batch: Batch): void {
    if (slot.batch !== batch) return
    // Blocked means a call started and not answered. A worker that has started none is still
    // receiving the batch (a large file's data) or waiting for a CPU: it is given more time.
    let started = false
    for (let i = 0; i < batch.items.length && !started; i++) started = Atomics.load(batch.claims, i) === STARTED
    if (!started) {
      batch.timer = setTimeout(() => this.#stall(slot, batch), this.#options.stallMs)
      batch.timer.unref?.()
      return
    }
    slot.stalled = true
    const back: Pending[] = []
    for (let i = 0; i < batch.items.length; i++) {
      if (Atomics.compareExchange(batch.claims, i, WAITING, TAKEN_BACK) === WAITING) back.push(batch.items[i] as Pending)
    }
    if (back.length > 0) this.#queue = [...back, ...this.#queue]
    this.#dispatch()
  }

  #answer(slot: Slot, [id, from, answers, done]: Reply): void {
    const batch = slot.batch
    if (!batch || batch.id !== id) return
    slot.answered = true
    for (let i = 0; i < answers.length; i++) {
      const answer = answers[i]
      if (answer === 0 || answer === undefined) continue
      const item = batch.items[from + i] as Pending
      if (answer[0] === 0) item.resolve(answer[1])
      else item.reject(answer[1])
    }
    if (!done) return
    clearTimeout(batch.timer)
    slot.batch = undefined
    slot.stalled = false
    slot.worker.unref()
    // Back to one worker once nothing is blocked.
    if (this.#slots.length > 1 && this.#slots.every((s) => !s.stalled)) {
      for (const other of this.#slots.filter((s) => s !== slot && !s.batch)) this.#drop(other, undefined)
    }
    this.#dispatch()
  }

  // A worker that ended (or is stopped): the calls of its batch that were not answered fail with `err`.
  #drop(slot: Slot, err: unknown): void {
    const index = this.#slots.indexOf(slot)
    if (index < 0) return
    this.#slots.splice(index, 1)
    const batch = slot.batch
    slot.batch = undefined
    // A worker that ended before it made any call (it could not start: no memory, no thread) fails
    // the calls it held: sent to another worker they would meet the same end, in a loop.
    const started = slot.answered || (batch !== undefined && batch.claims.some((claim) => claim !== WAITING))
    if (batch && err !== undefined && !started) {
      clearTimeout(batch.timer)
      const failure = new Error(`the I/O worker ended before making a call: ${err instanceof Error ? err.message : String(err)}`, { cause: err })
      for (let i = 0; i < batch.items.length; i++) {
        if (Atomics.compareExchange(batch.claims, i, WAITING, TAKEN_BACK) === WAITING) (batch.items[i] as Pending).reject(failure)
      }
    } else if (batch) {
      clearTimeout(batch.timer)
      for (let i = 0; i < batch.items.length; i++) {
        // Still waiting: it runs elsewhere. Started: it went down with the worker (rejecting one
        // that was answered already changes nothing).
        if (Atomics.compareExchange(batch.claims, i, WAITING, TAKEN_BACK) === WAITING) this.#queue.push(batch.items[i] as Pending)
        else if (Atomics.load(batch.claims, i) !== TAKEN_BACK) (batch.items[i] as Pending).reject(err ?? new Error('the I/O worker was stopped'))
      }
    }
    slot.worker.removeAllListeners()
    slot.worker.on('error', () => undefined)
    if (err === undefined) void slot.worker.terminate()
    if (this.#queue.length > 0) this.#dispatch()
  }
}

let resolvedKoffi: string | undefined
function koffiPath(): string {
  resolvedKoffi ??= createRequire(import.meta.url).resolve('koffi')
  return resolvedKoffi
}

// The worker, as CommonJS source (evaluated by `new Worker(..., { eval: true })`, so it needs no
// file of its own next to the compiled code). It loads koffi only for the first libc call, as the
// main thread does: file calls work where the FFI library cannot load. A started call is marked 1
// in `claims` and, once answered, 3; a call marked 2 was taken back and is skipped. Answers go back
// every millisecond or so and at the end of the batch.
const WORKER_SOURCE = `
'use strict'
const { parentPort, workerData } = require('node:worker_threads')
const fs = require('node:fs')
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
const { ENOENT, EBUSY } = require('node:os').constants.errno
const calls = {
  lstat: (p) => fields(fs.lstatSync(p, { throwIfNoEntry: false })),
  stat: (p) => fields(fs.statSync(p, { throwIfNoEntry: false })),
  mkdir: (p, mode) => { fs.mkdirSync(p, { mode }) },
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
      fs.writeSync(fd, data)
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
  removeUnmounted: (paths, flags, mask, mountRoot) => {
    const buf = new Uint8Array(256)
    const view = new DataView(buf.buffer)
    for (let i = 0; i < paths.length; i++) {
      const r = result(libc().statx(AT_FDCWD, paths[i], flags, mask, buf))
      if (r.ret < 0) {
        if (r.errno === ENOENT) continue
        return [i, r.errno, 'statx']
      }
      // stx_attributes_mask and stx_attributes, low words (the mount-root bit is below 2^32).
      if ((view.getUint32(56, true) & mountRoot) === 0) return [i, 0, '']
      if ((view.getUint32(8, true) & mountRoot) !== 0) return [i, EBUSY, 'statx']
      try {
        calls.remove(paths[i])
      } catch (err) {
        if (err.code === 'ENOENT') continue
        return [i, Math.abs(err.errno), err.syscall]
      }
    }
    return [paths.length, 0, '']
  },
}
parentPort.on('message', ({ id, ops, claims }) => {
  let from = 0
  let answers = []
  let sent = performance.now()
  for (let i = 0; i < ops.length; i++) {
    if (Atomics.compareExchange(claims, i, 0, 1) !== 0) {
      answers.push(0)
      continue
    }
    const [name, ...args] = ops[i]
    try {
      answers.push([0, calls[name](...args)])
    } catch (err) {
      answers.push([1, { code: typeof err?.code === 'string' ? err.code : 'EIO', errno: err?.errno, syscall: err?.syscall, message: String(err?.message ?? err) }])
    }
    Atomics.store(claims, i, 3)
    const now = performance.now()
    if (now - sent >= 1 && i < ops.length - 1) {
      parentPort.postMessage([id, from, answers, false])
      from = i + 1
      answers = []
      sent = now
    }
  }
  parentPort.postMessage([id, from, answers, true])
})
`
