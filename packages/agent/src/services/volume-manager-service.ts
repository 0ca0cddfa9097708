/**
 * The volume manager as a service: made at start (its CSI plugin serves the registry the CSI
 * service has just filled), with the operation tracker and the stuck-operation watch that follow it,
 * and its loop. Quiescing stops the loop and lets running operations finish within the grace.
 */
import type { Clock, Recorder, VolumeManager } from '@kubevol/core'
import { errorMessage } from '@kubevol/core'
import type { AgentLogger } from '../logging/agent-logger.js'
import type { AgentMetrics } from '../metrics/agent-metrics.js'
import { type OperationTracker, createOperationTracker } from '../status/operation-tracker.js'
import { type StuckOperationWatch, createStuckOperationWatch } from '../status/stuck-operations.js'
import type { Service } from './service.js'

export interface VolumeManagerServiceOptions {
  /** Makes the manager; called once, at start. */
  readonly create: () => VolumeManager
  readonly clock: Clock
  readonly logger: AgentLogger
  readonly metrics: AgentMetrics
  readonly recorder: Recorder
  readonly pods: Parameters<typeof createStuckOperationWatch>[0]['pods']
  readonly nodeName: string
  /** An operation running this long is reported as stuck. */
  readonly stuckOperationMs: number
}

interface Running {
  readonly manager: VolumeManager
  readonly tracker: OperationTracker
  readonly stuck: StuckOperationWatch
  readonly unsubscribe: () => void
  readonly done: Promise<void>
}

export class VolumeManagerService implements Service {
  readonly name = 'volume-manager'
  readonly #o: VolumeManagerServiceOptions
  readonly #abort = new AbortController()
  #running: Running | undefined
  #ended = false
  #error: unknown
  #lastActivity = 0

  constructor(options: VolumeManagerServiceOptions) {
    this.#o = options
  }

  get manager(): VolumeManager {
    return this.#get().manager
  }

  get tracker(): OperationTracker {
    return this.#get().tracker
  }

  get stuck(): StuckOperationWatch {
    return this.#get().stuck
  }

  /** The loop has returned (or thrown: `runError`). */
  get runEnded(): boolean {
    return this.#ended
  }

  get runError(): unknown {
    return this.#error
  }

  /** When the manager last announced a change. */
  get lastActivity(): number {
    return this.#lastActivity
  }

  start(): void {
    const { clock, logger, metrics } = this.#o
    const manager = this.#o.create()
    const tracker = createOperationTracker(manager, clock, (plugin, seconds) => metrics.mountLatency.observe({ plugin_name: plugin }, seconds))
    const stuck = createStuckOperationWatch({ tracker, clock, thresholdMs: this.#o.stuckOperationMs, recorder: this.#o.recorder, pods: this.#o.pods, nodeName: this.#o.nodeName, logger })
    this.#lastActivity = clock.now()
    const unsubscribe = manager.subscribe(() => (this.#lastActivity = clock.now())) as () => void
    const done = manager.run(this.#abort.signal).then(
      () => {
        this.#ended = true
      },
      (err: unknown) => {
        this.#ended = true
        this.#error = err
        logger.error('The volume manager stopped with an error', { err: errorMessage(err) })
      },
    )
    this.#running = { manager, tracker, stuck, unsubscribe, done }
  }

  async quiesce(graceMs: number): Promise<void> {
    const running = this.#running
    if (!running) return
    this.#abort.abort()
    await running.done
    const abandoned = await waitForOperations(running.manager, running.tracker, graceMs)
    if (abandoned > 0) this.#o.logger.warn('Abandoning running operations; a restart reconstructs what they left', { operations: abandoned })
  }

  async stop(): Promise<void> {
    const running = this.#running
    if (!running) return
    this.#abort.abort()
    await running.done
    running.unsubscribe()
    running.stuck.stop()
    running.tracker.stop()
  }

  #get(): Running {
    if (!this.#running) throw new Error('the volume manager has not started')
    return this.#running
  }
}

/** Resolves with 0 once no operation runs, or with the number still running after `graceMs`. */
function waitForOperations(manager: VolumeManager, tracker: OperationTracker, graceMs: number): Promise<number> {
  return new Promise((resolve) => {
    if (tracker.running().length === 0) return resolve(0)
    let unsubscribe = (): void => {}
    const timer = setTimeout(() => {
      unsubscribe()
      resolve(tracker.running().length)
    }, graceMs)
    unsubscribe = manager.subscribe((event) => {
      if (event.type === 'operation' && tracker.running().length === 0) {
        clearTimeout(timer)
        unsubscribe()
        resolve(0)
      }
    }) as () => void
  })
}
