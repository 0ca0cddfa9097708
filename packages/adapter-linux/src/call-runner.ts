/**
 * Deadlines for calls that may block in the kernel. A call runs on a libuv threadpool thread (koffi
 * `fn.async()` and node:fs both queue there); when it does not answer in time the caller gets
 * ETIMEDOUT at once, and the thread is left to finish: a thread blocked in the kernel cannot be
 * interrupted from JavaScript.
 *
 * Two guards keep one hung filesystem from eating the pool (4 threads unless UV_THREADPOOL_SIZE
 * says otherwise, shared by fs, koffi, dns and zlib):
 * - quarantine: while a call on a filesystem (keyed by the mount that holds the path) is stalled,
 *   new calls on that same filesystem fail fast with ETIMEDOUT instead of queueing another thread
 *   behind it; other filesystems are not affected;
 * - a cap: when `maxStalledCalls` threads are stalled, every new call fails fast, so the threads
 *   that are left keep serving the rest of the process.
 * Both lift when the stalled calls return.
 *
 * A call that was queued and never started (the I/O worker holds calls on a filesystem behind one
 * blocked there) is taken back at its deadline through {@link CallContext.cancel}: it fails with
 * ETIMEDOUT saying it was not made, and is not counted as stalled, since it holds no thread.
 *
 * Every call has the same timeout, so deadlines come in the order calls start: the calls wait in
 * one queue in that order under one timer, set for the oldest call still unanswered, instead of a
 * timer each (thousands of calls are in flight when a node's pods start together).
 */
import type { Clock, Timer } from '@kubevol/core'
import { HostError } from '@kubevol/core'

/** A call that passed its deadline and has not returned yet. */
export interface StalledCall {
  readonly syscall: string
  readonly path: string
  /** The filesystem it blocks on: the target of the mount holding `path`. */
  readonly key: string
  /** When it started (clock milliseconds). */
  readonly since: number
}

/** What `start` is given: the call's filesystem, and a hook it may set to take the call back. */
export interface CallContext {
  /** The filesystem the call may block on (the quarantine key). */
  readonly key: string
  /** Names the filesystem again from a fresh mount table (the snapshot `key` came from may be old). */
  readonly refineKey?: () => Promise<string>
  /** Set by whatever queues the call: takes it back if nothing has started it; true when it did. */
  cancel?: () => boolean
}

export interface CallRunnerOptions {
  readonly clock: Clock
  readonly timeoutMs: number
  readonly maxStalledCalls: number
}

/** A call waiting for its answer or its deadline, in the runner's queue. */
interface PendingCall {
  readonly syscall: string
  readonly path: string
  readonly key: string
  /** When it started (clock milliseconds); its deadline is this plus the timeout. */
  readonly since: number
  readonly call: CallContext
  readonly work: Promise<unknown>
  readonly reject: (err: unknown) => void
  /** Answered, failed, or past its deadline: nothing more to do for it here. */
  settled: boolean
}

/** Runs calls with a deadline and keeps the list of stalled ones. */
export class CallRunner {
  readonly #clock: Clock
  readonly #timeoutMs: number
  readonly #maxStalled: number
  readonly #stalled = new Set<StalledCall>()
  #inFlight = 0
  // The calls in the order they started, from `#head` on; those before the oldest unsettled one
  // are dropped as they settle.
  #queue: PendingCall[] = []
  #head = 0
  #unsettled = 0
  #timer: Timer | undefined

  constructor(options: CallRunnerOptions) {
    this.#clock = options.clock
    this.#timeoutMs = options.timeoutMs
    this.#maxStalled = options.maxStalledCalls
  }

  /** The calls past their deadline that are still blocked, oldest first. */
  stalled(): readonly StalledCall[] {
    return [...this.#stalled].map((call) => ({ ...call }))
  }

  /** Calls started and not returned yet, stalled ones included (each may hold a thread). */
  get inFlight(): number {
    return this.#inFlight
  }

  /**
   * Runs `start()` (which must begin the off-thread work and return its promise). Rejects with
   * ETIMEDOUT after the deadline, or at once when `key` is quarantined or too many calls are stalled.
   * `refineKey`, when given, names the filesystem again once the call stalls (from a fresh mount
   * table: the snapshot `key` came from may predate a mount made just before). `mapError`, when
   * given, turns the call's own failure into the one its caller gets.
   */
  run<T>(
    syscall: string,
    path: string,
    key: string,
    start: (call: CallContext) => Promise<T>,
    refineKey?: () => Promise<string>,
    mapError?: (err: unknown, syscall: string, path: string) => unknown,
  ): Promise<T> {
    const blocked = this.#refusal(syscall, path, key)
    if (blocked) return Promise.reject(blocked)
    const since = this.#clock.now()
    const call: CallContext = refineKey ? { key, refineKey } : { key }
    let work: Promise<T>
    try {
      work = start(call)
    } catch (err) {
      return Promise.reject(mapError ? mapError(err, syscall, path) : err)
    }
    this.#inFlight++
    return new Promise<T>((resolve, reject) => {
      const pending: PendingCall = { syscall, path, key, since, call, work, reject, settled: false }
      this.#queue.push(pending)
      this.#unsettled++
      if (this.#timer === undefined) this.#timer = this.#clock.setTimer(this.#timeoutMs, this.#expire)
      work.then(
        (value) => {
          this.#inFlight--
          if (this.#settle(pending)) resolve(value)
        },
        (err: unknown) => {
          this.#inFlight--
          if (this.#settle(pending)) reject(mapError ? mapError(err, syscall, path) : err)
        },
      )
    })
  }

  // Marks an answered call settled; false when its deadline came first.
  #settle(pending: PendingCall): boolean {
    if (pending.settled) return false
    pending.settled = true
    if (--this.#unsettled === 0) {
      // Nothing left to time: no timer keeps the process waiting.
      this.#timer?.cancel()
      this.#timer = undefined
      this.#queue = []
      this.#head = 0
      return true
    }
    const queue = this.#queue
    while (this.#head < queue.length && queue[this.#head]?.settled === true) this.#head++
    if (this.#head >= 1024 && this.#head * 2 >= queue.length) {
      this.#queue = queue.slice(this.#head)
      this.#head = 0
    }
    return true
  }

  // The timer, set for the oldest unsettled call's deadline (or earlier, when that call has been
  // answered since): times out every call whose deadline has come, then waits for the next.
  readonly #expire = (): void => {
    this.#timer = undefined
    const now = this.#clock.now()
    const queue = this.#queue
    while (this.#head < queue.length) {
      const pending = queue[this.#head] as PendingCall
      if (!pending.settled) {
        if (pending.since + this.#timeoutMs > now) break
        pending.settled = true
        this.#unsettled--
        this.#timeOut(pending)
      }
      this.#head++
    }
    const next = queue[this.#head]
    if (next === undefined) {
      this.#queue = []
      this.#head = 0
      return
    }
    this.#timer = this.#clock.setTimer(next.since + this.#timeoutMs - now, this.#expire)
  }

  // A call past its deadline: taken back if it never started, else left to finish as stalled.
  #timeOut(pending: PendingCall): void {
    const { syscall, path, key, since, call, work } = pending
    if (call.cancel?.() === true) {
      pending.reject(new HostError('ETIMEDOUT', syscall, path, `not made: it waited ${this.#timeoutMs} ms ${this.#behind(key)}`))
      return
    }
    const entry: { -readonly [K in keyof StalledCall]: StalledCall[K] } = { syscall, path, key, since }
    let done = false
    // Started before the entry counts against the cap, so the table read it needs is admitted.
    call.refineKey?.().then(
      (refined) => {
        if (!done) entry.key = refined
      },
      () => undefined,
    )
    this.#stalled.add(entry)
    const release = (): void => {
      done = true
      this.#stalled.delete(entry)
    }
    work.then(release, release)
    pending.reject(new HostError('ETIMEDOUT', syscall, path, `no answer within ${this.#timeoutMs} ms; the call is left to finish in the background`))
  }

  // What a call that was never started waited behind.
  #behind(key: string): string {
    for (const call of this.#stalled) {
      if (call.key === key) return `behind ${call.syscall} ${call.path}, blocked for ${this.#clock.now() - call.since} ms on the filesystem at ${key}`
    }
    return `behind a call blocked on the filesystem at ${key}`
  }

  #refusal(syscall: string, path: string, key: string): HostError | undefined {
    if (this.#stalled.size >= this.#maxStalled) {
      return new HostError(
        'ETIMEDOUT',
        syscall,
        path,
        `${this.#stalled.size} calls are blocked in the kernel; refusing new calls so the threadpool keeps free threads (raise UV_THREADPOOL_SIZE)`,
      )
    }
    for (const call of this.#stalled) {
      if (call.key === key) {
        const age = this.#clock.now() - call.since
        return new HostError(
          'ETIMEDOUT',
          syscall,
          path,
          `the filesystem at ${key} is not answering: ${call.syscall} ${call.path} has been blocked for ${age} ms`,
        )
      }
    }
    return undefined
  }
}
