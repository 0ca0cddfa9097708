/**
 * When the manager's passes run. The kubelet runs its populator and reconciler every 100 ms; kubevol
 * runs a pass when something changed: a change asks for a pass, and every change made in one turn
 * of the event loop is seen by the one pass a microtask later. A resync that has more volumes than
 * one slice goes on in the next turns, so I/O and timers run in between. With `polling` the loops
 * run on their own timers (the kubelet's timing) and asking for a pass does nothing.
 *
 * The scheduler also owns the manager's timers, so that stopping cancels every one of them.
 */
import type { Clock, Timer } from '../clock.js'

export interface PassSchedulerOptions {
  readonly clock: Clock
  /** The kubelet's timing: passes run on timers, not when asked for. */
  readonly polling: boolean
  /** One reconcile pass; answers true while a resync has slices left. */
  readonly reconcile: () => boolean
  /** One populator pass. */
  readonly populate: () => Promise<void>
}

export class PassScheduler {
  /** Passes run only while true: from the end of reconstruction until the manager stops. */
  running = false
  readonly #o: PassSchedulerOptions
  readonly #timers = new Set<Timer>()
  #reconcileScheduled = false
  #resyncContinues = false
  #populateScheduled = false

  constructor(options: PassSchedulerOptions) {
    this.#o = options
  }

  /** True when no pass has been asked for and not yet run. */
  get nothingScheduled(): boolean {
    return !this.#reconcileScheduled && !this.#populateScheduled
  }

  /** A reconcile pass, once, at the end of this turn. */
  scheduleReconcile(): void {
    if (!this.running || this.#o.polling || this.#reconcileScheduled) return
    this.#reconcileScheduled = true
    void Promise.resolve().then(() => {
      this.#reconcileScheduled = false
      if (!this.running) return
      const resyncPending = this.#o.reconcile()
      // The rest of a resync, one slice per turn of the event loop.
      if (resyncPending && !this.#resyncContinues) {
        this.#resyncContinues = true
        this.setTimer(0, () => {
          this.#resyncContinues = false
          this.scheduleReconcile()
        })
      }
    })
  }

  /** A populator pass, once, at the end of this turn. */
  schedulePopulate(): void {
    if (!this.running || this.#o.polling || this.#populateScheduled) return
    this.#populateScheduled = true
    void Promise.resolve().then(() => {
      this.#populateScheduled = false
      if (this.running) void this.#o.populate()
    })
  }

  /** `fn` after `ms`, unless the manager stops first. */
  setTimer(ms: number, fn: () => void): void {
    const timer = this.#o.clock.setTimer(ms, () => {
      this.#timers.delete(timer)
      fn()
    })
    this.#timers.add(timer)
  }

  /** `fn` every `periodMs` until the manager stops; never when 0. */
  every(periodMs: number, fn: () => void): void {
    if (periodMs <= 0) return
    const tick = (): void => {
      fn()
      this.setTimer(periodMs, tick)
    }
    this.setTimer(periodMs, tick)
  }

  /** Stops: no pass runs any more and every timer is cancelled. */
  stop(): void {
    this.running = false
    for (const timer of this.#timers) timer.cancel()
    this.#timers.clear()
  }
}
