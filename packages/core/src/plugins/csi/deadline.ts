/**
 * Each CSI call is bounded (SPEC §7.7 `csiTimeout`, 2 minutes): the transport is told the deadline,
 * and the plugin stops waiting on its own clock when it passes, as a DeadlineExceeded failure.
 */
import type { Clock } from '../../clock.js'
import type { CsiCallOptions } from './csi-driver.js'
import { csiError } from './csi-error.js'

/** The kubelet's `csiTimeout`. */
export const CSI_DEFAULT_TIMEOUT_MS = 2 * 60_000

/** Runs `call` with a deadline; rejects with DeadlineExceeded when the clock passes it first. */
export function withDeadline<T>(clock: Clock, timeoutMs: number, call: (options: CsiCallOptions) => Promise<T>): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let done = false
    const timer = clock.setTimer(timeoutMs, () => {
      if (done) return
      done = true
      reject(csiError('DeadlineExceeded', 'context deadline exceeded'))
    })
    call({ timeoutMs }).then(
      (value) => {
        if (done) return
        done = true
        timer.cancel()
        resolve(value)
      },
      (err: unknown) => {
        if (done) return
        done = true
        timer.cancel()
        reject(err)
      },
    )
  })
}
