/**
 * Exponential backoff after a failed operation (SPEC §6.3): 500 ms, doubling per consecutive failure,
 * capped at 2 min 2 s. Success forgets the record, so the next failure starts at 500 ms again.
 */

/** @default 500 ms */
export const INITIAL_DURATION_BEFORE_RETRY_MS = 500
/** 2 min 2 s: larger than two minutes so a 2-minute CSI deadline fits one retry. */
export const MAX_DURATION_BEFORE_RETRY_MS = 122_000

export interface BackoffOptions {
  /** @default 500 */
  readonly initialMs?: number
  /** @default 122000 */
  readonly maxMs?: number
}

/** One key's failure record. A fresh record is always safe to retry. */
export class ExponentialBackoff {
  lastError: unknown = undefined
  lastErrorTime = 0
  durationBeforeRetry = 0
  /** Consecutive failures recorded. */
  failures = 0
  readonly #initial: number
  readonly #max: number

  constructor(options: BackoffOptions = {}) {
    this.#initial = options.initialMs ?? INITIAL_DURATION_BEFORE_RETRY_MS
    this.#max = options.maxMs ?? MAX_DURATION_BEFORE_RETRY_MS
  }

  /** Records a failure at `now`: the first waits the initial duration, each next one twice as long. */
  update(err: unknown, now: number): void {
    this.durationBeforeRetry =
      this.durationBeforeRetry === 0 ? this.#initial : Math.min(this.durationBeforeRetry * 2, this.#max)
    this.lastError = err
    this.lastErrorTime = now
    this.failures++
  }

  /** The earliest time a retry is allowed. */
  retryAt(): number {
    return this.lastErrorTime + this.durationBeforeRetry
  }

  /** True when no failure is recorded or the wait is over (the kubelet uses `<=`, so the boundary still waits). */
  safeToRetry(now: number): boolean {
    return this.durationBeforeRetry === 0 || now - this.lastErrorTime > this.durationBeforeRetry
  }
}
