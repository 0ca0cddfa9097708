/**
 * The part of the kubelet's pod workers that concerns volumes (SPEC §1.3): every pod that may run is
 * synced with `waitForAttachAndMount`; a failed sync is retried after the kubelet's flat, jittered
 * back-off (10 to 15 s), and records `FailedMount` ("Unable to attach or mount volumes: ...") on the
 * pod unless the wait only ran out of time or was cancelled, as kubelet 1.32 does; a pod that is terminating or gone
 * is waited for with `waitForUnmount` and, in API mode, if it has a deletion timestamp, its object
 * is deleted once nothing of it is mounted (the kubelet's status manager does the same, which is
 * what ends a graceful deletion). A pod that only finished keeps its object.
 */
import {
  type Clock,
  type Logger,
  type Pod,
  type PodSource,
  type Recorder,
  type VolumeManager,
  WaitError,
  errorMessage,
} from '@kubevol/core'

/** Where a pod's volumes are. */
type PodPhase = 'waiting' | 'mounted' | 'failed' | 'unmounting' | 'unmounted'

/** One pod's worker, as status pages show it. */
export interface PodWorkerStatus {
  readonly uid: string
  readonly namespace: string
  readonly name: string
  readonly phase: PodPhase
  /** Failed syncs since the last success. */
  readonly attempts: number
  readonly lastError?: string
  /** Clock time of the next sync after a failure. */
  readonly nextRetryAt?: number
  /** Clock time the pod's volumes were last all mounted. */
  readonly mountedAt?: number
}

export interface PodWorkersOptions {
  readonly manager: VolumeManager
  readonly pods: PodSource
  readonly recorder: Recorder
  readonly clock: Clock
  readonly logger: Logger
  /**
   * The delay before a failed sync is tried again, plus up to half of it at random: the kubelet's
   * pod worker `backOffPeriod` (10 s) with `workerBackOffPeriodJitterFactor` 0.5, the same after
   * every failure (it does not grow).
   */
  readonly retryMs: number
  /** The source of the jitter, a number in [0, 1). @default Math.random */
  readonly random?: () => number
  /** How long one sync waits. */
  readonly timeoutMs: number
  /**
   * Called once a pod that is being deleted (it has a deletion timestamp) and is still in its source
   * has nothing mounted. Never for a pod that only finished.
   */
  readonly finalize?: (pod: Pod) => Promise<void>
}

export interface PodWorkers {
  start(): void
  stop(): void
  status(uid: string): PodWorkerStatus | undefined
  list(): PodWorkerStatus[]
  /** Pods by phase (for metrics). */
  phases(): Map<PodPhase, number>
}

interface Worker {
  pod: Pod
  phase: PodPhase
  attempts: number
  lastError?: string
  nextRetryAt?: number
  mountedAt?: number
  abort?: AbortController
  timer?: NodeJS.Timeout
  finalized?: boolean
}

/**
 * True when someone asked for the pod's deletion. Only then is its object deleted once its volumes
 * are gone: a pod that finished (Succeeded, Failed) without one belongs to its owner (a Job keeps
 * it to report), and the kubelet leaves it, unmounting its volumes only.
 */
function isBeingDeleted(pod: Pod): boolean {
  return pod.metadata.deletionTimestamp !== undefined && pod.metadata.deletionTimestamp !== null
}

/** How many pods that left their source are still shown. */
const GONE_KEPT = 100

/** The kubelet's `workerBackOffPeriodJitterFactor` (pkg/kubelet/pod_workers.go). */
const BACK_OFF_JITTER_FACTOR = 0.5

/** Creates the pod workers; `start()` follows the pod source. */
export function createPodWorkers(options: PodWorkersOptions): PodWorkers {
  return new PodWorkerPool(options)
}

class PodWorkerPool implements PodWorkers {
  readonly #o: PodWorkersOptions
  readonly #random: () => number
  readonly #workers = new Map<string, Worker>()
  #unsubscribe: (() => void) | undefined
  #stopped = true

  constructor(options: PodWorkersOptions) {
    this.#o = options
    this.#random = options.random ?? Math.random
  }

  start(): void {
    this.#stopped = false
    this.#unsubscribe = this.#o.pods.subscribe(() => this.#reconcile())
    this.#reconcile()
  }

  stop(): void {
    this.#stopped = true
    this.#unsubscribe?.()
    for (const w of this.#workers.values()) this.#cancel(w)
  }

  status(uid: string): PodWorkerStatus | undefined {
    const w = this.#workers.get(uid)
    return w ? view(uid, w) : undefined
  }

  list(): PodWorkerStatus[] {
    return [...this.#workers.entries()].map(([uid, w]) => view(uid, w))
  }

  phases(): Map<PodPhase, number> {
    const counts = new Map<PodPhase, number>()
    for (const w of this.#workers.values()) counts.set(w.phase, (counts.get(w.phase) ?? 0) + 1)
    return counts
  }

  /** Starts, restarts or tears down a worker for every pod of the source, and for every pod gone from it. */
  #reconcile(): void {
    if (this.#stopped) return
    const { pods, finalize } = this.#o
    const workers = this.#workers
    const present = new Set<string>()
    for (const pod of pods.getPods()) {
      const uid = pod.metadata.uid
      if (!uid) continue
      present.add(uid)
      const terminating = pods.shouldPodContainersBeTerminating(uid)
      let w = workers.get(uid)
      if (!terminating) {
        const tornDown = w && (w.phase === 'unmounting' || w.phase === 'unmounted')
        if (!w || tornDown || w.pod !== pod) {
          // An updated pod (a status or label change) is the same pod: its failures in a row go on.
          // Only a pod set up again after teardown starts counting afresh.
          const attempts = w && !tornDown ? w.attempts : 0
          w = { ...(w ?? {}), pod, phase: 'waiting', attempts, finalized: false }
          if (workers.get(uid)) this.#cancel(workers.get(uid) as Worker)
          workers.set(uid, w)
          this.#sync(uid, w)
        }
      } else if (!w) {
        w = { pod, phase: 'unmounting', attempts: 0 }
        workers.set(uid, w)
        this.#teardown(uid, w)
      } else {
        if (w.pod !== pod) w.pod = pod
        if (w.phase !== 'unmounting' && w.phase !== 'unmounted') this.#teardown(uid, w)
        // A finished pod left in place gets its deletion timestamp later: finish the deletion now.
        else if (w.phase === 'unmounted' && finalize && !w.finalized && isBeingDeleted(pod)) this.#teardown(uid, w)
      }
    }
    for (const [uid, w] of workers) {
      if (!present.has(uid) && w.phase !== 'unmounting' && w.phase !== 'unmounted') this.#teardown(uid, w)
    }
  }

  #sync(uid: string, w: Worker): void {
    this.#cancel(w)
    const abort = new AbortController()
    w.abort = abort
    if (w.phase !== 'failed') w.phase = 'waiting'
    const pod = w.pod
    this.#o.manager.waitForAttachAndMount(pod, { signal: abort.signal, timeoutMs: this.#o.timeoutMs }).then(
      () => {
        if (abort.signal.aborted) return
        w.abort = undefined
        w.phase = 'mounted'
        w.attempts = 0
        w.lastError = undefined
        w.mountedAt = this.#o.clock.now()
      },
      (err: unknown) => {
        if (abort.signal.aborted) return
        this.#syncFailed(uid, w, err)
      },
    )
  }

  #syncFailed(uid: string, w: Worker, err: unknown): void {
    const { logger, recorder, clock } = this.#o
    const pod = w.pod
    w.abort = undefined
    w.phase = 'failed'
    w.attempts++
    w.lastError = errorMessage(err)
    const ref = `${pod.metadata.namespace}/${pod.metadata.name}`
    // kubelet 1.32 syncPod: `if !wait.Interrupted(err)` around the FailedMount event. A wait
    // that ran out of time (context deadline exceeded) or was cancelled posts nothing: the
    // failing volume's own MountVolume.* event already says why.
    if (err instanceof WaitError && err.interrupted) {
      logger.info('Error syncing pod, skipping', { pod: ref, uid, err: w.lastError })
    } else {
      logger.warn('Unable to attach or mount volumes for pod; skipping pod', { pod: ref, uid, err: w.lastError })
      recorder.event({
        type: 'Warning',
        reason: 'FailedMount',
        message: `Unable to attach or mount volumes: ${w.lastError}`,
        target: { kind: 'Pod', metadata: pod.metadata },
        time: clock.now(),
      })
    }
    this.#later(w, this.#backOff(), () => this.#sync(uid, w))
  }

  #teardown(uid: string, w: Worker): void {
    this.#cancel(w)
    const abort = new AbortController()
    w.abort = abort
    w.phase = 'unmounting'
    this.#o.manager.waitForUnmount(w.pod, { signal: abort.signal, timeoutMs: this.#o.timeoutMs }).then(
      async () => {
        if (abort.signal.aborted) return
        await this.#unmounted(uid, w)
      },
      (err: unknown) => {
        if (abort.signal.aborted) return
        w.abort = undefined
        w.attempts++
        w.lastError = errorMessage(err)
        this.#later(w, this.#backOff(), () => this.#teardown(uid, w))
      },
    )
  }

  /** After `waitForUnmount`: the pod's object is deleted if someone asked for that, once nothing of it may be mounted. */
  async #unmounted(uid: string, w: Worker): Promise<void> {
    const { manager, pods, finalize, logger } = this.#o
    // Uncertain mounts do not hold waitForUnmount, but they do hold the pod's deletion.
    if (manager.hasPossiblyMountedVolumesForPod(uid)) {
      this.#later(w, this.#backOff(), () => this.#teardown(uid, w))
      return
    }
    w.abort = undefined
    w.phase = 'unmounted'
    const current = pods.getPodByUID(uid)
    if (current && finalize && !w.finalized && isBeingDeleted(current)) {
      w.finalized = true
      try {
        await finalize(current)
      } catch (err) {
        w.finalized = false
        logger.warn('Could not delete the terminated pod', { uid, err: errorMessage(err) })
        this.#later(w, this.#backOff(), () => this.#teardown(uid, w))
      }
    }
    this.#forgetGone()
  }

  /** Drops the oldest unmounted pods that left their source, beyond {@link GONE_KEPT}. */
  #forgetGone(): void {
    const gone = [...this.#workers.entries()].filter(([uid, w]) => w.phase === 'unmounted' && !this.#o.pods.getPodByUID(uid))
    for (const [uid] of gone.slice(0, Math.max(0, gone.length - GONE_KEPT))) this.#workers.delete(uid)
  }

  // The kubelet's wait.Jitter(backOffPeriod, 0.5): the period plus up to half of it, after any failure.
  #backOff(): number {
    return this.#o.retryMs + Math.floor(this.#random() * BACK_OFF_JITTER_FACTOR * this.#o.retryMs)
  }

  #cancel(w: Worker): void {
    w.abort?.abort()
    w.abort = undefined
    if (w.timer) clearTimeout(w.timer)
    w.timer = undefined
    w.nextRetryAt = undefined
  }

  #later(w: Worker, ms: number, fn: () => void): void {
    w.nextRetryAt = this.#o.clock.now() + ms
    w.timer = setTimeout(() => {
      w.timer = undefined
      w.nextRetryAt = undefined
      if (!this.#stopped) fn()
    }, ms)
    w.timer.unref?.()
  }
}

function view(uid: string, w: Worker): PodWorkerStatus {
  return {
    uid,
    namespace: w.pod.metadata.namespace ?? 'default',
    name: w.pod.metadata.name ?? '',
    phase: w.phase,
    attempts: w.attempts,
    ...(w.lastError === undefined ? {} : { lastError: w.lastError }),
    ...(w.nextRetryAt === undefined ? {} : { nextRetryAt: w.nextRetryAt }),
    ...(w.mountedAt === undefined ? {} : { mountedAt: w.mountedAt }),
  }
}
