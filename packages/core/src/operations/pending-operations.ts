/**
 * Nested pending operations (SPEC §6.2): at most one operation per volume, or per volume + pod (or
 * + node); an empty pod or node name matches every pod or node. Failures back off exponentially per
 * key. The record is made synchronously in `run`, before the operation's first await, so two
 * calls in one turn can never both start.
 *
 * Operations in flight are bounded (`maxRunning`): an operation admitted while the bound is reached
 * waits in a FIFO queue, already pending for its key, and starts when a slot frees. One that has
 * run for `slowAfterMs` stops holding its slot (it waits on something slow: a hung mount, a CSI
 * driver), as a goroutine blocked in a system call gives up its processor in Go's scheduler, which
 * bounds the kubelet's goroutines the same way; so a hung volume never holds the queue.
 */
import type { UniquePodName, UniqueVolumeName } from '../api/names.js'
import type { Clock, Timer } from '../clock.js'
import { errorMessage } from '../errors.js'
import { type BackoffOptions, ExponentialBackoff } from './backoff.js'

/** Which operations exclude each other. Empty strings are wildcards (and an empty volume never conflicts). */
export interface OperationKey {
  readonly volumeName: UniqueVolumeName
  readonly podName: UniquePodName
  readonly nodeName: string
}

/** What `run` did: started it, or why not. Expected outcomes are values, not errors. */
export type StartResult =
  | {
      readonly status: 'started'
      /** Settles when the operation has ended (it may still be queued when `run` returns). */
      readonly done: Promise<void>
    }
  | { readonly status: 'already-pending'; readonly message: string }
  | { readonly status: 'backing-off'; readonly retryAt: number; readonly message: string }

interface Operation {
  key: OperationKey
  name: string
  /** Admitted and not ended: queued or running. */
  pending: boolean
  /**
   * The key's failure record, made at its first failure: nearly every operation succeeds, and a
   * node starting 100,000 of them at once held as many empty records.
   */
  backoff: ExponentialBackoff | undefined
  /** Which admission this is (a failed key's record is used again by its retry). */
  run: number
  /** The work, while queued. */
  work: (() => Promise<void>) | undefined
  /** Clock time it started, while it holds a slot. */
  startedAt: number
  /** Holds one of the `maxRunning` slots: started, not ended, not yet slow. */
  counted: boolean
  /** Callers of `done` to tell when it ends (made only when one asks). */
  onEnded: (() => void)[] | undefined
  /** Neighbours in the queue or the slots (see OperationList). */
  prev: Operation | undefined
  next: Operation | undefined
}

/** The `started` result: `done` is made only when read (nearly no caller reads it). */
class Started {
  readonly status = 'started' as const
  readonly #op: Operation
  readonly #run: number

  constructor(op: Operation) {
    this.#op = op
    this.#run = op.run
  }

  get done(): Promise<void> {
    const op = this.#op
    if (op.run !== this.#run || !op.pending) return Promise.resolve()
    return new Promise((resolve) => {
      op.onEnded ??= []
      op.onEnded.push(resolve)
    })
  }
}

/**
 * A FIFO threaded through the operations themselves (no array or entry object per operation). An
 * operation is in at most one list at a time: the queue while it waits, the slots while it counts.
 */
class OperationList {
  #head: Operation | undefined
  #tail: Operation | undefined

  get first(): Operation | undefined {
    return this.#head
  }

  push(op: Operation): void {
    op.prev = this.#tail
    op.next = undefined
    if (this.#tail) this.#tail.next = op
    else this.#head = op
    this.#tail = op
  }

  remove(op: Operation): void {
    if (op.prev) op.prev.next = op.next
    else this.#head = op.next
    if (op.next) op.next.prev = op.prev
    else this.#tail = op.prev
    op.prev = undefined
    op.next = undefined
  }
}

export interface PendingOperationsOptions {
  readonly clock: Clock
  /** @default true (the kubelet's setting) */
  readonly exponentialBackoffOnError?: boolean
  readonly backoff?: BackoffOptions
  /** Called when an operation ends, with its key and, on failure, the time a retry is allowed. */
  readonly onComplete?: (key: OperationKey, error: unknown, retryAt: number | undefined) => void
  /**
   * How many operations run at once, not counting those running longer than `slowAfterMs`; more
   * wait in start order. 0 or Infinity: no bound (every operation starts when admitted).
   * @default Infinity
   */
  readonly maxRunning?: number
  /** How long an operation runs before it stops counting against `maxRunning`. @default 1000 */
  readonly slowAfterMs?: number
}

function formatKey(key: OperationKey): string {
  return `{volumeName:${key.volumeName} podName:${key.podName} nodeName:${key.nodeName}}`
}

function keysMatch(stored: OperationKey, key: OperationKey): boolean {
  return (
    stored.volumeName === key.volumeName &&
    (stored.podName === '' || key.podName === '' || stored.podName === key.podName) &&
    (stored.nodeName === '' || key.nodeName === '' || stored.nodeName === key.nodeName)
  )
}

function keysEqual(a: OperationKey, b: OperationKey): boolean {
  return a.volumeName === b.volumeName && a.podName === b.podName && a.nodeName === b.nodeName
}

export class PendingOperations {
  // Records per volume: every question is about one volume, so no scan crosses volumes. A volume
  // nearly always has one record, kept without an array around it.
  readonly #byVolume = new Map<UniqueVolumeName, Operation | Operation[]>()
  readonly #clock: Clock
  readonly #backoffEnabled: boolean
  readonly #backoffOptions: BackoffOptions
  readonly #onComplete: PendingOperationsOptions['onComplete']
  readonly #maxRunning: number
  readonly #slowAfterMs: number
  /** Started and not ended. */
  #running = 0
  /** Admitted and not started. */
  #queuedCount = 0
  /** Holding a slot. */
  #counted = 0
  readonly #queue = new OperationList()
  /** The operations holding a slot, in start order: the first is the next to turn slow. */
  readonly #slots = new OperationList()
  /** One timer for the whole queue: set while operations wait, for when the oldest slot turns slow. */
  #slowTimer: Timer | undefined
  #runs = 0
  readonly #idleWaiters: (() => void)[] = []

  constructor(options: PendingOperationsOptions) {
    this.#clock = options.clock
    this.#backoffEnabled = options.exponentialBackoffOnError ?? true
    this.#backoffOptions = options.backoff ?? {}
    this.#onComplete = options.onComplete
    const max = options.maxRunning ?? Number.POSITIVE_INFINITY
    this.#maxRunning = max > 0 ? max : Number.POSITIVE_INFINITY
    this.#slowAfterMs = options.slowAfterMs ?? 1000
  }

  /**
   * Starts `operation` under `key` unless a matching operation is pending or the same operation is
   * still backing off. A different operation on a key in backoff resets the backoff (an unmount may
   * start right after a failed mount). With every slot taken (or others waiting) it is queued and
   * counts as pending at once: the result is `started` either way.
   */
  run(key: OperationKey, name: string, operation: () => Promise<void>): StartResult {
    let op: Operation | undefined
    if (key.volumeName !== '') {
      const found = this.#find(key)
      if (found?.pending) {
        return {
          status: 'already-pending',
          message: `Failed to create operation with name ${formatKey(key)}. An operation with that name is already executing.`,
        }
      }
      if (found) {
        const now = this.#clock.now()
        if (found.backoff && !found.backoff.safeToRetry(now)) {
          if (found.name === name) {
            return { status: 'backing-off', retryAt: found.backoff.retryAt(), message: backoffMessage(name, found.backoff) }
          }
          found.backoff = undefined
        }
        found.name = name
        found.key = key
        found.pending = true
        op = found
      }
    }
    if (!op) {
      op = { key, name, pending: true, backoff: undefined, run: 0, work: undefined, startedAt: 0, counted: false, onEnded: undefined, prev: undefined, next: undefined }
      if (key.volumeName !== '') {
        const ops = this.#byVolume.get(key.volumeName)
        if (ops === undefined) this.#byVolume.set(key.volumeName, op)
        else if (Array.isArray(ops)) ops.push(op)
        else this.#byVolume.set(key.volumeName, [ops, op])
      }
    }
    op.run = ++this.#runs
    const started = new Started(op)
    // Behind those already waiting, even when a slot is free: start order is admission order.
    if (this.#queuedCount > 0 || this.#counted >= this.#maxRunning) {
      op.work = operation
      this.#queuedCount++
      this.#queue.push(op)
      this.#armSlowTimer()
    } else {
      this.#start(op, operation)
    }
    return started
  }

  #start(op: Operation, operation: () => Promise<void>): void {
    this.#running++
    if (this.#maxRunning !== Number.POSITIVE_INFINITY) {
      op.counted = true
      op.startedAt = this.#clock.now()
      this.#counted++
      this.#slots.push(op)
    }
    const failed = (err: unknown): void => this.#complete(op, err ?? new Error('operation failed'))
    let running: Promise<void>
    try {
      running = operation()
    } catch (err) {
      failed(err)
      return
    }
    // Settles in the same turn as `await` would, without an async frame kept alive per operation:
    // a node starting 100,000 operations at once holds that many of them.
    running.then(() => this.#complete(op, undefined), failed)
  }

  /** The operation stops holding a slot (it ended, or turned slow). */
  #release(op: Operation): void {
    op.counted = false
    this.#counted--
    this.#slots.remove(op)
  }

  /** Starts queued operations while slots are free. */
  #drain(): void {
    for (let op = this.#queue.first; op && this.#counted < this.#maxRunning; op = this.#queue.first) {
      this.#queue.remove(op)
      const work = op.work as () => Promise<void>
      op.work = undefined
      this.#queuedCount--
      this.#start(op, work)
    }
    if (this.#queuedCount === 0 && this.#slowTimer) {
      // Nothing waits: no slot needs freeing early (and no timer keeps a process alive).
      this.#slowTimer.cancel()
      this.#slowTimer = undefined
    }
  }

  #armSlowTimer(): void {
    if (this.#slowTimer || this.#queuedCount === 0) return
    const oldest = this.#slots.first
    if (!oldest) return
    this.#slowTimer = this.#clock.setTimer(oldest.startedAt + this.#slowAfterMs - this.#clock.now(), () => {
      this.#slowTimer = undefined
      // Every slot held past the threshold frees, then the queue moves into them.
      const slowBefore = this.#clock.now() - this.#slowAfterMs
      for (let op = this.#slots.first; op && op.startedAt <= slowBefore; op = this.#slots.first) this.#release(op)
      this.#drain()
      this.#armSlowTimer()
    })
  }

  /** A matching operation is pending: running, or queued to run. */
  isOperationPending(key: OperationKey): boolean {
    return this.#find(key)?.pending ?? false
  }

  /** No matching record, or it is not pending and (another operation, or its backoff is over). */
  isOperationSafeToRetry(key: OperationKey, name: string): boolean {
    const found = this.#find(key)
    if (!found) return true
    if (found.pending) return false
    return found.name !== name || !found.backoff || found.backoff.safeToRetry(this.#clock.now())
  }

  /** The time a retry of a failed operation on this key is allowed, if one is backing off. */
  retryAt(key: OperationKey): number | undefined {
    const found = this.#find(key)
    if (!found || found.pending || !found.backoff || found.backoff.durationBeforeRetry === 0) return undefined
    return found.backoff.retryAt()
  }

  /** The failure record of a key (for status and `explain`). */
  lastFailure(key: OperationKey): { name: string; error: unknown; retryAt: number; durationMs: number; attempts: number } | undefined {
    const found = this.#find(key)
    if (!found?.backoff || found.backoff.durationBeforeRetry === 0) return undefined
    return {
      name: found.name,
      error: found.backoff.lastError,
      retryAt: found.backoff.retryAt(),
      durationMs: found.backoff.durationBeforeRetry,
      attempts: found.backoff.failures,
    }
  }

  /**
   * Operations started and not ended, slow ones included. Never 0 while one is queued: the queue
   * forms only behind running operations.
   */
  get runningCount(): number {
    return this.#running
  }

  /** Operations admitted (pending for their key) and waiting for a slot. */
  get queuedCount(): number {
    return this.#queuedCount
  }

  /** Resolves when no operation is running or queued. */
  wait(): Promise<void> {
    if (this.#running === 0 && this.#queuedCount === 0) return Promise.resolve()
    return new Promise((resolve) => this.#idleWaiters.push(resolve))
  }

  #find(key: OperationKey): Operation | undefined {
    if (key.volumeName === '') return undefined
    const ops = this.#byVolume.get(key.volumeName)
    if (ops === undefined) return undefined
    if (!Array.isArray(ops)) return keysMatch(ops.key, key) ? ops : undefined
    let match: Operation | undefined
    for (const op of ops) {
      if (!keysMatch(op.key, key)) continue
      if (op.pending) return op
      if (!match || keysEqual(op.key, key)) match = op
    }
    return match
  }

  #complete(op: Operation, error: unknown): void {
    this.#running--
    op.pending = false
    if (op.counted) this.#release(op)
    let retryAt: number | undefined
    if (error === undefined || !this.#backoffEnabled) {
      const ops = this.#byVolume.get(op.key.volumeName)
      if (ops === op) {
        this.#byVolume.delete(op.key.volumeName)
      } else if (Array.isArray(ops)) {
        const i = ops.indexOf(op)
        if (i >= 0) ops.splice(i, 1)
        if (ops.length === 0) this.#byVolume.delete(op.key.volumeName)
      }
    } else {
      op.backoff ??= new ExponentialBackoff(this.#backoffOptions)
      op.backoff.update(error, this.#clock.now())
      retryAt = op.backoff.retryAt()
    }
    const onEnded = op.onEnded
    if (onEnded) {
      op.onEnded = undefined
      for (const resolve of onEnded) resolve()
    }
    // The freed slot goes to the queue before anything this end sets off can ask for one.
    this.#drain()
    this.#onComplete?.(op.key, error, retryAt)
    if (this.#running === 0 && this.#queuedCount === 0) for (const resolve of this.#idleWaiters.splice(0)) resolve()
  }
}

function backoffMessage(name: string, backoff: ExponentialBackoff): string {
  const at = new Date(backoff.lastErrorTime).toISOString()
  const until = new Date(backoff.retryAt()).toISOString()
  return `Failed to create operation with name "${name}". An operation with that name failed at ${at}. No retries permitted until ${until} (${backoff.durationBeforeRetry}ms). Last error: "${errorMessage(backoff.lastError)}".`
}
