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
 * One hung filesystem must hold up only its own calls:
 * - a call that blocks must not hold the calls queued behind it: each batch has a short watchdog
 *   (`stallMs`). When it fires, the calls the worker has not started are taken back (each call is
 *   claimed through shared memory, by the worker before it starts it or by the main thread when it
 *   takes it back, never both) and go to another worker, started if need be, up to `maxWorkers`;
 * - nor the calls it finished before it: the worker keeps each answer, serialized, in a shared arena
 *   before it marks the call answered, and the watchdog delivers those answers from there. (Sending
 *   each answer in a message of its own did the same at twice the cost per call on the main thread.)
 * - calls on the blocked call's filesystem (the caller's key, see {@link CallContext}) then wait in
 *   that filesystem's lane until it returns, instead of blocking one new worker each; their
 *   deadline takes them back unmade. Every other filesystem keeps flowing.
 * The blocked worker joins the others again if its call ever returns. The deadline of the call
 * itself (ETIMEDOUT) is the CallRunner's, as for every other call.
 */
import { createRequire } from 'node:module'
import { deserialize } from 'node:v8'
import { type ResourceLimits, Worker } from 'node:worker_threads'
import type { CallContext } from './call-runner.js'
import type { IoFailure, IoOp, IoRoot } from './io-worker-source.js'
import { ARENA_BYTES, KEPT, STARTED, TAKEN_BACK, WAITING, WORKER_SOURCE, readPlainAnswer } from './io-worker-source.js'

export type { FileFields, FileStepsDone, IoFailure, IoOp, IoRoot, IoStep, RemoveUnmounted } from './io-worker-source.js'

export interface IoWorkersOptions {
  /** Workers at most, blocked ones included. */
  readonly maxWorkers: number
  /** How long a batch may run before the calls it has not started go to another worker. */
  readonly stallMs: number
  /** Calls in one message at most. @default 256 */
  readonly batchSize?: number
  /**
   * The workers' heap and stack limits (node's `resourceLimits`). @default {@link IO_WORKER_RESOURCE_LIMITS}
   */
  readonly resourceLimits?: ResourceLimits
}

/**
 * A worker's young generation, capped at 3 MiB (semispaces of 1 MiB, V8's starting size): what a
 * worker allocates is a batch's messages and buffers, short-lived, and with node's default the
 * semispaces grow to 16 MiB each, 5–12 MiB of peak RSS a worker on the 2,000-volume kernel
 * workload (bench/README.md, "Memory with Node's defaults") for no time measured. The old
 * generation keeps node's limit.
 */
const IO_WORKER_RESOURCE_LIMITS: ResourceLimits = { maxYoungGenerationSizeMb: 3 }

interface Pending {
  readonly op: IoOp
  readonly resolve: (value: unknown) => void
  readonly reject: (err: unknown) => void
  readonly call: CallContext | undefined
  /** The batch it was sent in and its index there, while a worker may make it. */
  batch: Batch | undefined
  index: number
}

interface Batch {
  readonly id: number
  readonly items: readonly Pending[]
  /** Per call, its state (io-worker-source.ts). */
  readonly claims: Int32Array
  /** Per call, where its answer is in the arena: offset, length. */
  readonly spans: Int32Array
  timer?: ReturnType<typeof setTimeout>
  /** When the worker started the call it is making (Date.now(), written by the worker). */
  readonly startedAt: Float64Array
}

interface Slot {
  readonly worker: Worker
  /** The worker's arena (answers of the running batch). */
  readonly arena: Uint8Array
  batch?: Batch
  /** Its batch ran past `stallMs`: it no longer counts as the running worker. */
  stalled: boolean
  /** The filesystem of the call it is blocked in (while stalled; undefined when the caller gave none). */
  blockedKey?: string
  /** It has answered a call: it started. */
  answered: boolean
}

/** [index of the first answer, answers, last message of the batch]; an answer is [0, value], [1, failure] or 0 (taken back). */
type Reply = readonly [id: number, from: number, answers: readonly (readonly [0, unknown] | readonly [1, IoFailure] | 0)[], done: boolean]

/** Runs {@link IoOp}s on worker threads, in batches. Workers start on the first call. */
export class IoWorkers {
  readonly #options: Required<IoWorkersOptions>
  readonly #slots: Slot[] = []
  #queue: Pending[] = []
  /** Calls on a filesystem with a call blocked, by its key: they wait for it to return. */
  readonly #held = new Map<string, Pending[]>()
  #scheduled = false
  #nextId = 0
  #dispatches = 0
  #root: IoRoot | null = null

  constructor(options: IoWorkersOptions) {
    this.#options = { batchSize: 256, resourceLimits: IO_WORKER_RESOURCE_LIMITS, ...options }
  }

  /**
   * Makes `op` in a worker; resolves with its answer, rejects with an {@link IoFailure} or the
   * worker's error. With `call`, the call waits while another on its filesystem (`call.key`) is
   * blocked, and `call.cancel` is set: it takes the call back while no worker has started it.
   */
  /**
   * The root the calls sent from now on resolve beneath (see {@link IoRoot}); null: none. The
   * descriptor must stay open while a batch that carries it may run.
   */
  setRoot(root: IoRoot | null): void {
    this.#root = root
  }

  run<T>(op: IoOp, call?: CallContext): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const item: Pending = { op, resolve: resolve as (value: unknown) => void, reject, call, batch: undefined, index: 0 }
      if (call) call.cancel = () => this.#cancel(item)
      this.#queue.push(item)
      if (!this.#scheduled) {
        this.#scheduled = true
        setImmediate(() => {
          this.#scheduled = false
          this.#dispatch()
        })
      }
    })
  }

  /**
   * How many times calls have been taken from the queue to be sent (or held) so far: a call asked
   * for while this has not moved since is still queued, and no worker has started it.
   */
  get dispatches(): number {
    return this.#dispatches
  }

  /** Workers now, and how many of them are blocked past `stallMs`. */
  get workers(): { readonly started: number; readonly stalled: number } {
    return { started: this.#slots.length, stalled: this.#slots.filter((s) => s.stalled).length }
  }

  /** The filesystems with a call blocked in a worker past `stallMs` (their calls wait). */
  get blockedKeys(): readonly string[] {
    return [...new Set(this.#slots.flatMap((s) => (s.stalled && s.blockedKey !== undefined ? [s.blockedKey] : [])))]
  }

  /** Stops the idle workers (a blocked one cannot be stopped). New calls start workers again. */
  close(): void {
    for (const slot of [...this.#slots]) {
      if (!slot.batch) this.#drop(slot, undefined)
    }
  }

  #dispatch(): void {
    this.#dispatches++
    if (this.#slots.some((s) => s.blockedKey !== undefined)) this.#holdBlocked()
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

  // Moves the queued calls on a blocked filesystem to its lane.
  #holdBlocked(): void {
    const blocked = new Set(this.blockedKeys)
    if (blocked.size === 0) return
    const go: Pending[] = []
    for (const item of this.#queue) {
      const key = item.call?.key
      if (key === undefined || !blocked.has(key)) go.push(item)
      else {
        const lane = this.#held.get(key)
        if (lane) lane.push(item)
        else this.#held.set(key, [item])
      }
    }
    this.#queue = go
  }

  // `key` is no longer blocked (its call returned, or it was named again): its lane goes first.
  #release(key: string | undefined): void {
    if (key === undefined || this.blockedKeys.includes(key)) return
    const lane = this.#held.get(key)
    if (!lane) return
    this.#held.delete(key)
    this.#queue = [...lane, ...this.#queue]
  }

  // The deadline of a call not started: taken back, wherever it waits. False once a worker has it.
  #cancel(item: Pending): boolean {
    const taken = new Error('taken back unmade at its deadline')
    if (item.batch) {
      if (Atomics.compareExchange(item.batch.claims, item.index, WAITING, TAKEN_BACK) !== WAITING) return false
      item.batch = undefined
      item.reject(taken)
      return true
    }
    const lane = item.call ? this.#held.get(item.call.key) : undefined
    for (const list of lane ? [this.#queue, lane] : [this.#queue]) {
      const at = list.indexOf(item)
      if (at >= 0) {
        list.splice(at, 1)
        item.reject(taken)
        return true
      }
    }
    return false
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
    const arena = new SharedArrayBuffer(ARENA_BYTES)
    // No --require or other flags of the process: the worker runs only the source below.
    const worker = new Worker(WORKER_SOURCE, { eval: true, execArgv: [], workerData: { koffi: koffiPath(), arena }, resourceLimits: this.#options.resourceLimits })
    worker.unref()
    const slot: Slot = { worker, arena: new Uint8Array(arena), stalled: false, answered: false }
    worker.on('message', (reply: Reply) => this.#answer(slot, reply))
    worker.on('error', (err: unknown) => this.#drop(slot, err))
    worker.on('exit', (code: number) => this.#drop(slot, new Error(`the I/O worker exited (code ${code})`)))
    this.#slots.push(slot)
    return slot
  }

  #send(slot: Slot, items: readonly Pending[]): void {
    const at = 8 * Math.ceil((12 * items.length) / 8)
    const shared = new SharedArrayBuffer(at + 8)
    const batch: Batch = {
      id: this.#nextId++,
      items,
      claims: new Int32Array(shared, 0, items.length),
      spans: new Int32Array(shared, 4 * items.length, 2 * items.length),
      startedAt: new Float64Array(shared, at, 1),
    }
    for (let i = 0; i < items.length; i++) {
      const item = items[i] as Pending
      item.batch = batch
      item.index = i
    }
    slot.batch = batch
    slot.worker.ref()
    batch.timer = setTimeout(() => this.#stall(slot, batch), this.#options.stallMs)
    batch.timer.unref?.()
    slot.worker.postMessage({ id: batch.id, ops: items.map((item) => item.op), claims: batch.claims, spans: batch.spans, startedAt: batch.startedAt, root: this.#root })
  }

  // The batch is taking long: the answers it has are delivered, its calls not yet started go to
  // another worker, and its filesystem's calls wait.
  #stall(slot: Slot, batch: Batch): void {
    if (slot.batch !== batch) return
    // Blocked means a call started at least half of `stallMs` ago and not answered. A worker that
    // has started none is still receiving the batch (a large file's data) or waiting for a CPU: it
    // is given more time. So is one making a call it started just now: a batch that is merely
    // slow, on a machine short of CPU, is making some call at any moment, and taking its calls to a
    // new worker then cost a thread's start and held its filesystem's calls for nothing.
    let blockedAt = -1
    for (let i = 0; i < batch.items.length && blockedAt < 0; i++) if (Atomics.load(batch.claims, i) === STARTED) blockedAt = i
    const since = blockedAt < 0 ? 0 : Date.now() - (batch.startedAt[0] as number)
    // A worker making progress sends its answers itself, every millisecond or so.
    if (blockedAt < 0 || since >= this.#options.stallMs / 2) this.#deliverKept(slot, batch)
    if (since < this.#options.stallMs / 2) {
      batch.timer = setTimeout(() => this.#stall(slot, batch), blockedAt < 0 ? this.#options.stallMs : this.#options.stallMs / 2 - since)
      batch.timer.unref?.()
      return
    }
    slot.stalled = true
    const blocked = batch.items[blockedAt] as Pending
    slot.blockedKey = blocked.call?.key
    const back: Pending[] = []
    for (let i = 0; i < batch.items.length; i++) {
      if (Atomics.compareExchange(batch.claims, i, WAITING, TAKEN_BACK) === WAITING) {
        const item = batch.items[i] as Pending
        item.batch = undefined
        back.push(item)
      }
    }
    if (back.length > 0) this.#queue = [...back, ...this.#queue]
    // The key may come from a mount table older than the filesystem the call is on.
    blocked.call?.refineKey?.().then(
      (key) => {
        if (slot.batch !== batch || slot.blockedKey === key) return
        const before = slot.blockedKey
        slot.blockedKey = key
        this.#release(before)
        this.#dispatch()
      },
      () => undefined,
    )
    this.#dispatch()
  }

  // Answers the worker has made and kept in its arena, delivered without waiting for its message.
  #deliverKept(slot: Slot, batch: Batch): void {
    for (let i = 0; i < batch.items.length; i++) {
      if (Atomics.load(batch.claims, i) !== KEPT) continue
      const item = batch.items[i] as Pending
      if (item.batch !== batch) continue
      item.batch = undefined
      const at = batch.spans[2 * i] as number
      const length = batch.spans[2 * i + 1] as number
      const answer =
        readPlainAnswer(slot.arena.buffer as SharedArrayBuffer, at, length) ??
        (deserialize(Buffer.from(slot.arena.subarray(at, at + length))) as readonly [0 | 1, unknown])
      if (answer[0] === 0) item.resolve(answer[1])
      else item.reject(answer[1])
    }
  }

  #answer(slot: Slot, [id, from, answers, done]: Reply): void {
    const batch = slot.batch
    if (!batch || batch.id !== id) return
    slot.answered = true
    for (let i = 0; i < answers.length; i++) {
      const answer = answers[i]
      if (answer === 0 || answer === undefined) continue
      const item = batch.items[from + i] as Pending
      // Delivered from the arena already.
      if (item.batch !== batch) continue
      item.batch = undefined
      if (answer[0] === 0) item.resolve(answer[1])
      else item.reject(answer[1])
    }
    if (!done) return
    clearTimeout(batch.timer)
    slot.batch = undefined
    slot.stalled = false
    const key = slot.blockedKey
    slot.blockedKey = undefined
    this.#release(key)
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
    const key = slot.blockedKey
    slot.blockedKey = undefined
    this.#release(key)
    // A worker that ended before it made any call (it could not start: no memory, no thread) fails
    // the calls it held: sent to another worker they would meet the same end, in a loop.
    const started = slot.answered || batch?.claims.some((claim) => claim !== WAITING) === true
    if (batch) {
      clearTimeout(batch.timer)
      this.#deliverKept(slot, batch)
    }
    if (batch && err !== undefined && !started) {
      const failure = new Error(`the I/O worker ended before making a call: ${err instanceof Error ? err.message : String(err)}`, { cause: err })
      for (let i = 0; i < batch.items.length; i++) {
        if (Atomics.compareExchange(batch.claims, i, WAITING, TAKEN_BACK) === WAITING) (batch.items[i] as Pending).reject(failure)
      }
    } else if (batch) {
      for (let i = 0; i < batch.items.length; i++) {
        const item = batch.items[i] as Pending
        // Still waiting: it runs elsewhere. Started: it went down with the worker (rejecting one
        // that was answered already changes nothing).
        if (Atomics.compareExchange(batch.claims, i, WAITING, TAKEN_BACK) === WAITING) {
          item.batch = undefined
          this.#queue.push(item)
        } else if (Atomics.load(batch.claims, i) !== TAKEN_BACK) item.reject(err ?? new Error('the I/O worker was stopped'))
      }
    }
    slot.worker.removeAllListeners()
    slot.worker.on('error', () => undefined)
    if (err === undefined) void slot.worker.terminate()
    if (this.#queue.length > 0 || this.#held.size > 0) this.#dispatch()
  }
}

let resolvedKoffi: string | undefined
function koffiPath(): string {
  resolvedKoffi ??= createRequire(import.meta.url).resolve('koffi')
  return resolvedKoffi
}
