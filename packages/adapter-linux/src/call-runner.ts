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
 */
import type { Clock } from '@kubevol/core'
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

export interface CallRunnerOptions {
  readonly clock: Clock
  readonly timeoutMs: number
  readonly maxStalledCalls: number
}

/** Runs calls with a deadline and keeps the list of stalled ones. */
export class CallRunner {
  readonly #clock: Clock
  readonly #timeoutMs: number
  readonly #maxStalled: number
  readonly #stalled = new Set<StalledCall>()

  constructor(options: CallRunnerOptions) {
    this.#clock = options.clock
    this.#timeoutMs = options.timeoutMs
    this.#maxStalled = options.maxStalledCalls
  }

  /** The calls past their deadline that are still blocked, oldest first. */
  stalled(): readonly StalledCall[] {
    return [...this.#stalled].map((call) => ({ ...call }))
  }

  /**
   * Runs `start()` (which must begin the off-thread work and return its promise). Rejects with
   * ETIMEDOUT after the deadline, or at once when `key` is quarantined or too many calls are stalled.
   * `refineKey`, when given, names the filesystem again once the call stalls (from a fresh mount
   * table: the snapshot `key` came from may predate a mount made just before).
   */
  run<T>(syscall: string, path: string, key: string, start: () => Promise<T>, refineKey?: () => Promise<string>): Promise<T> {
    const blocked = this.#refusal(syscall, path, key)
    if (blocked) return Promise.reject(blocked)
    const since = this.#clock.now()
    const work = start()
    return new Promise<T>((resolve, reject) => {
      let settled = false
      const timer = this.#clock.setTimer(this.#timeoutMs, () => {
        if (settled) return
        settled = true
        const entry: { -readonly [K in keyof StalledCall]: StalledCall[K] } = { syscall, path, key, since }
        let done = false
        // Started before the entry counts against the cap, so the table read it needs is admitted.
        refineKey?.().then(
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
        reject(new HostError('ETIMEDOUT', syscall, path, `no answer within ${this.#timeoutMs} ms; the call is left to finish in the background`))
      })
      work.then(
        (value) => {
          if (settled) return
          settled = true
          timer.cancel()
          resolve(value)
        },
        (err: unknown) => {
          if (settled) return
          settled = true
          timer.cancel()
          reject(err)
        },
      )
    })
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
