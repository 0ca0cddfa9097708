/**
 * Follows the manager's announcements to answer what its state alone does not: which operations run
 * now, how many times in a row an operation on a (volume, pod) failed and with what, and how long a
 * volume took from desired to mounted (`kubevol_volume_mount_latency_seconds`).
 */
import type { Clock, OperationRecord, UniqueVolumeName, VolumeManager } from '@kubevol/core'

/** Consecutive failures of the operations on one (volume, pod) key. */
interface OperationHistory {
  readonly lastOperation: string
  readonly attempts: number
  readonly lastError?: string
  readonly lastEndedAt?: number
}

export interface OperationTracker {
  /** Operations started and not yet ended. */
  running(): OperationRecord[]
  /** The history of operations on a volume for a pod (or on the volume alone, `podName` ''). */
  history(volumeName: UniqueVolumeName, podName: string): OperationHistory | undefined
  stop(): void
}

const keyOf = (volumeName: string, podName: string): string => `${volumeName}\n${podName}`

/** Starts tracking; `onMounted` gets each (plugin, seconds) from desired to mounted. */
export function createOperationTracker(
  manager: VolumeManager,
  clock: Clock,
  onMounted?: (pluginName: string, seconds: number) => void,
): OperationTracker {
  const running = new Map<string, OperationRecord>()
  const histories = new Map<string, OperationHistory>()
  // (volume, pod, mount request time) already counted as mounted.
  const mounted = new Set<string>()

  const checkMounted = (volumeName: UniqueVolumeName): void => {
    for (const vtm of manager.desiredState.getVolumesToMountFor(volumeName)) {
      const key = `${vtm.volumeName}\n${vtm.podName}\n${vtm.mountRequestTime}`
      if (mounted.has(key)) continue
      if (manager.actualState.getVolumeMountState(vtm.volumeName, vtm.podName) !== 'mounted') continue
      mounted.add(key)
      onMounted?.(vtm.pluginName, Math.max(0, clock.now() - vtm.mountRequestTime) / 1000)
    }
    // Forget what is no longer desired, so the set does not grow without bound.
    if (mounted.size > 10_000) {
      const desired = new Set(manager.desiredState.getVolumesToMount().map((v) => `${v.volumeName}\n${v.podName}\n${v.mountRequestTime}`))
      for (const key of mounted) if (!desired.has(key)) mounted.delete(key)
    }
  }

  const unsubscribe = manager.subscribe((event) => {
    if (event.type === 'state-changed') {
      checkMounted(event.volumeName)
      return
    }
    if (event.type !== 'operation') return
    const op = event.operation
    const runKey = `${op.name}\n${op.volumeName}\n${op.podName}\n${op.startedAt}`
    if (op.endedAt === undefined) {
      running.set(runKey, op)
      return
    }
    running.delete(runKey)
    const key = keyOf(op.volumeName, op.podName)
    const before = histories.get(key)
    if (op.error === undefined) {
      histories.set(key, { lastOperation: op.name, attempts: 0, lastEndedAt: op.endedAt })
    } else {
      const attempts = before && before.lastOperation === op.name ? before.attempts + 1 : 1
      histories.set(key, { lastOperation: op.name, attempts, lastError: op.error, lastEndedAt: op.endedAt })
    }
    if (histories.size > 10_000) histories.delete(histories.keys().next().value as string)
  })

  return {
    running: () => [...running.values()],
    history(volumeName, podName) {
      return histories.get(keyOf(volumeName, podName)) ?? (podName ? histories.get(keyOf(volumeName, '')) : undefined)
    },
    stop: unsubscribe,
  }
}
