/**
 * `node.status.volumesInUse` (SPEC §1.3): once the reconciler's states are synced, the attachable
 * volumes the manager uses are patched into the node's status (a JSON merge patch on the status
 * subresource), and what the server then holds is marked as reported in use, which lets the manager
 * go on with controller-attached volumes. Marking happens after every check, also when nothing
 * changed, as the kubelet does.
 *
 * Checks run on every change of the manager's state (coalesced) and every `periodMs`.
 */
import type { V1Node } from '@kubernetes/client-node'
import { type Logger, type UniqueVolumeName, type VolumeManager, errorMessage } from '@kubevol/core'
import { type KubeClients, MERGE_PATCH, apiErrorMessage } from './kube-client.js'

export interface NodeStatusUpdaterOptions {
  readonly clients: KubeClients
  readonly nodeName: string
  readonly manager: VolumeManager
  readonly periodMs: number
  readonly logger: Logger
  /** Called after each patch attempt (for metrics). */
  readonly onPatch?: (result: 'success' | 'error') => void
}

export interface NodeStatusUpdater {
  start(): void
  stop(): void
  /** Checks now (coalesced with a check already running). */
  sync(): Promise<void>
  /** What the server last confirmed, or undefined before the first patch. */
  readonly reported: readonly UniqueVolumeName[] | undefined
  /** The last patch error, cleared by a success. */
  readonly lastError: string | undefined
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i])
}

/** Creates the updater; `start()` subscribes to the manager and starts the period. */
export function createNodeStatusUpdater(options: NodeStatusUpdaterOptions): NodeStatusUpdater {
  const { clients, nodeName, manager, logger } = options
  let reported: UniqueVolumeName[] | undefined
  let lastError: string | undefined
  let running: Promise<void> | undefined
  let again = false
  let timer: NodeJS.Timeout | undefined
  let retry: NodeJS.Timeout | undefined
  let unsubscribe: (() => void) | undefined
  let scheduled = false
  let stopped = true

  const once = async (): Promise<void> => {
    // The kubelet reports volumes in use only once reconstruction has been reconciled.
    if (!manager.reconcilerStatesHaveBeenSynced()) return
    const inUse = manager.getVolumesInUse()
    if (reported && sameList(inUse, reported)) {
      manager.markVolumesAsReportedInUse(reported)
      return
    }
    try {
      const node: V1Node = await clients.core.patchNodeStatus({ name: nodeName, body: { status: { volumesInUse: inUse } } }, MERGE_PATCH)
      reported = [...(node.status?.volumesInUse ?? [])].sort()
      lastError = undefined
      options.onPatch?.('success')
      logger.debug('Updated node volumesInUse', { volumesInUse: reported })
      manager.markVolumesAsReportedInUse(reported)
    } catch (err) {
      lastError = apiErrorMessage(err)
      options.onPatch?.('error')
      logger.warn('Updating node volumesInUse failed', { node: nodeName, err: lastError })
      if (!retry && !stopped) {
        retry = setTimeout(() => {
          retry = undefined
          void updater.sync()
        }, 1_000)
        retry.unref?.()
      }
    }
  }

  const updater: NodeStatusUpdater = {
    get reported() {
      return reported
    },
    get lastError() {
      return lastError
    },
    start() {
      stopped = false
      unsubscribe = manager.subscribe((event) => {
        if (event.type !== 'state-changed' || scheduled) return
        scheduled = true
        queueMicrotask(() => {
          scheduled = false
          if (!stopped) void updater.sync()
        })
      })
      const tick = (): void => {
        timer = setTimeout(() => {
          void updater.sync().finally(() => {
            if (!stopped) tick()
          })
        }, options.periodMs)
        timer.unref?.()
      }
      tick()
      void updater.sync()
    },
    stop() {
      stopped = true
      unsubscribe?.()
      if (timer) clearTimeout(timer)
      if (retry) clearTimeout(retry)
      timer = retry = undefined
    },
    sync() {
      if (running) {
        again = true
        return running
      }
      running = (async () => {
        do {
          again = false
          try {
            await once()
          } catch (err) {
            logger.error('Node status check failed', { err: errorMessage(err) })
          }
        } while (again && !stopped)
      })().finally(() => {
        running = undefined
      })
      return running
    },
  }
  return updater
}
