/**
 * The fake clock of @kubevol/core/testing settling promise chains with `setImmediate` turns instead
 * of `setTimeout(0)` ones (at least 1 ms each in Node), so thousands of schedules of several
 * simulated minutes run in seconds. The manager schedules its passes in microtasks and its waits on
 * the clock, so a turn of the event loop settles them.
 */
import { type FakeClock, createFakeClock } from '@kubevol/core/testing'

export function createFastClock(start?: number): FakeClock {
  return createFakeClock(start, { turn: () => new Promise((resolve) => setImmediate(resolve)) })
}
