/**
 * Time as a port. Core code reads the time and sets timers only through a {@link Clock}, so tests
 * can drive it with `createFakeClock()` from `@kubevol/core/testing` and no test sleeps on wall time.
 */
import type { AbortSignalLike } from './signal.js'

/** A timer that can be cancelled. Cancelling twice or after it fired is a no-op. */
export interface Timer {
  cancel(): void
}

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number
  /** Calls `callback` once after `ms` milliseconds. */
  setTimer(ms: number, callback: () => void): Timer
  /** Resolves after `ms` milliseconds; rejects with the signal's reason when it aborts first. */
  sleep(ms: number, signal?: AbortSignalLike): Promise<void>
}

// The only place in core that touches the platform's timers: every runtime kubevol targets (Node,
// Deno, Bun, workers, browsers) has these two functions on globalThis.
interface PlatformTimers {
  setTimeout(callback: () => void, ms: number): unknown
  clearTimeout(handle: unknown): void
}
const platform = globalThis as unknown as PlatformTimers

/** Builds `sleep` from `setTimer`, shared by every Clock implementation. */
export function sleepWith(clock: Pick<Clock, 'setTimer'>, ms: number, signal?: AbortSignalLike): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason)
      return
    }
    const onAbort = (): void => {
      timer.cancel()
      reject(signal?.reason)
    }
    const timer = clock.setTimer(ms, () => {
      signal?.removeEventListener('abort', onAbort)
      resolve()
    })
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}

/** The real clock: `Date.now()` and the platform's `setTimeout`. */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(ms, callback) {
    const handle = platform.setTimeout(callback, Math.max(0, ms))
    return { cancel: () => platform.clearTimeout(handle) }
  },
  sleep(ms, signal) {
    return sleepWith(systemClock, ms, signal)
  },
}

/**
 * Resolves after every pending microtask has run (one macrotask later). Lets tests and the fake
 * clock settle chains of awaits without sleeping on wall time.
 */
export function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => platform.setTimeout(resolve, 0))
}
