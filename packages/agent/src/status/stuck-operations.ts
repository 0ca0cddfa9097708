/**
 * Operations that run longer than they should: a host call that never returns (a hung NFS server, a
 * device that stopped answering) holds its volume's operation forever, and only that volume. The
 * agent names such volumes in /readyz, /v1/state, the metrics and a Warning event, once per operation.
 */
import type { Clock, Logger, OperationRecord, PodSource, Recorder } from '@kubevol/core'
import type { OperationTracker } from './operation-tracker.js'

/** One operation running for longer than the threshold. */
export interface StuckOperation {
  readonly operation: string
  readonly volumeName: string
  /** The pod's UID, or '' for an operation on the volume alone (attach, device mount, detach). */
  readonly podUID: string
  readonly pluginName: string
  readonly startedAt: number
  readonly runningMs: number
}

/** The running operations that started at least `thresholdMs` before `now`, longest first. */
function stuckOperations(running: readonly OperationRecord[], now: number, thresholdMs: number): StuckOperation[] {
  return running
    .filter((op) => now - op.startedAt >= thresholdMs)
    .map((op) => ({ operation: op.name, volumeName: op.volumeName, podUID: op.podName, pluginName: op.pluginName, startedAt: op.startedAt, runningMs: now - op.startedAt }))
    .sort((a, b) => b.runningMs - a.runningMs)
}

/** "volume_mount of kubernetes.io/empty-dir/uid-shm (pod uid) for 130s". */
export function describeStuck(op: StuckOperation): string {
  return `${op.operation} of ${op.volumeName}${op.podUID ? ` (pod ${op.podUID})` : ''} running for ${Math.round(op.runningMs / 1000)}s`
}

export interface StuckOperationWatchOptions {
  readonly tracker: OperationTracker
  readonly clock: Clock
  /** An operation running this long is stuck. */
  readonly thresholdMs: number
  readonly recorder: Recorder
  readonly pods: PodSource
  readonly nodeName: string
  readonly logger: Logger
}

export interface StuckOperationWatch {
  /** The stuck operations now. Changes nothing: the endpoints call it. */
  list(): StuckOperation[]
  /** {@link list}, and a Warning event for each operation not reported yet (the watch's timer calls it). */
  check(): StuckOperation[]
  stop(): void
}

const keyOf = (op: { operation: string; volumeName: string; podUID: string; startedAt: number }): string =>
  `${op.operation}\n${op.volumeName}\n${op.podUID}\n${op.startedAt}`

/** Checks on a timer and reports each stuck operation once. */
export function createStuckOperationWatch(o: StuckOperationWatchOptions): StuckOperationWatch {
  const reported = new Set<string>()
  const list = (): StuckOperation[] => stuckOperations(o.tracker.running(), o.clock.now(), o.thresholdMs)
  const check = (): StuckOperation[] => {
    const stuck = list()
    const current = new Set(stuck.map(keyOf))
    for (const key of reported) {
      if (current.has(key)) continue
      reported.delete(key)
      o.logger.info('A stuck volume operation has ended', { operation: key.split('\n')[0], volume: key.split('\n')[1] })
    }
    for (const op of stuck) {
      const key = keyOf(op)
      if (reported.has(key)) continue
      reported.add(key)
      const message = `Volume operation stuck: ${describeStuck(op)}; a host call may not be returning. Other volumes are not affected.`
      o.logger.warn('Volume operation stuck', { operation: op.operation, volume: op.volumeName, pod: op.podUID, runningMs: op.runningMs })
      const pod = op.podUID ? o.pods.getPodByUID(op.podUID) : undefined
      o.recorder.event({
        type: 'Warning',
        reason: 'VolumeOperationStuck',
        message,
        target: pod ? { kind: 'Pod', metadata: pod.metadata } : { kind: 'Node', metadata: { name: o.nodeName } },
        time: o.clock.now(),
      })
    }
    return stuck
  }
  const timer = setInterval(check, Math.max(10, Math.min(o.thresholdMs / 2, 10_000)))
  timer.unref()
  return { list, check, stop: () => clearInterval(timer) }
}
