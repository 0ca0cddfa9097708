/**
 * A clock tests advance by hand. Timers fire in due order, and every pending promise chain settles
 * between two timers, so a test reads like the timeline it checks.
 */
import { type Clock, type Timer, sleepWith, yieldToEventLoop } from '../clock.js'

export interface FakeClock extends Clock {
  /** Moves time forward by `ms`, firing each due timer in order and settling promises in between. */
  advance(ms: number): Promise<void>
  /** Settles pending promise chains without moving time. */
  flush(): Promise<void>
  /** Due times of the timers not yet fired, ascending. */
  pendingTimers(): number[]
}

interface Entry {
  due: number
  seq: number
  callback: () => void
}

export interface FakeClockOptions {
  /**
   * One turn of the event loop, awaited between timers so promise chains settle. The default works
   * everywhere (a zero timeout: at least 1 ms per turn in Node); a test running thousands of
   * simulated minutes can pass Node's `setImmediate` instead.
   */
  readonly turn?: () => Promise<void>
}

/** A fake clock starting at `start` ms since the epoch. @default 1_700_000_000_000 */
export function createFakeClock(start = 1_700_000_000_000, options: FakeClockOptions = {}): FakeClock {
  const turn = options.turn ?? yieldToEventLoop
  let now = start
  let seq = 0
  const timers = new Set<Entry>()
  const next = (limit: number): Entry | undefined => {
    let best: Entry | undefined
    for (const t of timers) if (t.due <= limit && (!best || t.due < best.due || (t.due === best.due && t.seq < best.seq))) best = t
    return best
  }
  const flush = async (): Promise<void> => {
    // Several macrotask turns: a settled chain may schedule more work on the next turn.
    for (let i = 0; i < 3; i++) await turn()
  }
  const clock: FakeClock = {
    now: () => now,
    setTimer(ms, callback): Timer {
      const entry = { due: now + Math.max(0, ms), seq: seq++, callback }
      timers.add(entry)
      return { cancel: () => timers.delete(entry) }
    },
    sleep(ms, signal) {
      return sleepWith(clock, ms, signal)
    },
    async advance(ms) {
      const target = now + ms
      await flush()
      for (let entry = next(target); entry; entry = next(target)) {
        timers.delete(entry)
        now = Math.max(now, entry.due)
        entry.callback()
        await flush()
      }
      now = target
      await flush()
    },
    flush,
    pendingTimers: () => [...timers].map((t) => t.due).sort((a, b) => a - b),
  }
  return clock
}
