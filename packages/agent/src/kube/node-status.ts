/**
 * `node.status.volumesInUse` (SPEC §1.3): once the reconciler's states are synced, the attachable
 * volumes the manager uses are written into the node's status, and what the server then holds is
 * marked as reported in use, which lets the manager go on with controller-attached volumes. Marking
 * happens after every check, also when nothing changed, as the kubelet does.
 *
 * kubevol owns its node, but it does not overwrite the list wholesale: it reads the Node, keeps every
 * entry that is not its own (its own: what it wrote before, and the volumes in its desired or actual
 * state), adds what it uses, and writes only when that differs from what the server holds: a JSON
 * merge patch of the status subresource carrying the Node's resourceVersion as a precondition, so a
 * concurrent writer makes it read again (409) instead of losing that writer's entries.
 *
 * Checks run on every change of the manager's state (coalesced) and every `periodMs`; a failed one
 * is retried after a doubling delay, and logged once per distinct error.
 */
import type { V1Node } from '@kubernetes/client-node'
import { type Logger, type UniqueVolumeName, type VolumeManager, errorMessage } from '@kubevol/core'
import { type KubeClients, MERGE_PATCH, apiErrorMessage, statusCodeOf } from './kube-client.js'

export interface NodeStatusUpdaterOptions {
  readonly clients: KubeClients
  readonly nodeName: string
  readonly manager: VolumeManager
  readonly periodMs: number
  readonly logger: Logger
  /** Called after each patch attempt (for metrics). */
  readonly onPatch?: (result: 'success' | 'error') => void
  /** False while the Node is not known to exist (registration): no check runs. @default always true */
  readonly nodeReady?: () => boolean
  /** The Node answered 404. */
  readonly onNodeMissing?: () => void
  /** First delay before a failed check is retried; doubles up to `periodMs` (at least 1 s). @default 1000 */
  readonly retryMs?: number
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

/** Writes after a 409 (someone else wrote the Node in between), as the kubelet's nodeStatusUpdateRetry. */
const CONFLICT_RETRIES = 5

/** Creates the updater; `start()` subscribes to the manager and starts the period. */
export function createNodeStatusUpdater(options: NodeStatusUpdaterOptions): NodeStatusUpdater {
  const { clients, nodeName, manager, logger } = options
  const retryMs = options.retryMs ?? 1_000
  const maxRetryMs = Math.max(options.periodMs, 1_000)
  let reported: UniqueVolumeName[] | undefined
  /** What kubevol last wrote as its own: taken out again when no longer in use. */
  let written: readonly string[] = []
  let lastError: string | undefined
  let running: Promise<void> | undefined
  let again = false
  let timer: NodeJS.Timeout | undefined
  let retry: NodeJS.Timeout | undefined
  let failures = 0
  let unsubscribe: (() => void) | undefined
  let scheduled = false
  let stopped = true

  /** Names kubevol answers for: what it wrote before, and every volume of its desired and actual state. */
  const ownNames = (inUse: readonly string[]): Set<string> => {
    const snap = manager.snapshot()
    return new Set<string>([...written, ...inUse, ...snap.desired.map((v) => v.volumeName), ...snap.mounted.map((v) => v.volumeName), ...snap.attached.map((v) => v.volumeName)])
  }

  /** Reads the Node and writes the merged list when it differs from what the server holds. */
  const write = async (inUse: UniqueVolumeName[]): Promise<void> => {
    for (let attempt = 1; ; attempt++) {
      const node: V1Node = await clients.core.readNode({ name: nodeName })
      const held = [...(node.status?.volumesInUse ?? [])]
      const own = ownNames(inUse)
      const next = [...new Set([...held.filter((n) => !own.has(n)), ...inUse])].sort()
      if (sameList(next, [...held].sort())) {
        reported = next as UniqueVolumeName[]
        break
      }
      try {
        const body = { metadata: { resourceVersion: node.metadata?.resourceVersion }, status: { volumesInUse: next } }
        const updated: V1Node = await clients.core.patchNodeStatus({ name: nodeName, body }, MERGE_PATCH)
        reported = [...(updated.status?.volumesInUse ?? [])].sort() as UniqueVolumeName[]
        options.onPatch?.('success')
        logger.debug('Updated node volumesInUse', { volumesInUse: reported })
        break
      } catch (err) {
        if (statusCodeOf(err) !== 409 || attempt >= CONFLICT_RETRIES) throw err
        logger.debug('The node changed while volumesInUse was written; reading it again', { node: nodeName, attempt })
      }
    }
    written = inUse
  }

  const once = async (): Promise<void> => {
    // The kubelet reports volumes in use only once reconstruction has been reconciled.
    if (!manager.reconcilerStatesHaveBeenSynced()) return
    if (options.nodeReady && !options.nodeReady()) return
    const inUse = manager.getVolumesInUse()
    try {
      await write(inUse)
      if (lastError !== undefined) logger.info('Node volumesInUse can be written again', { node: nodeName })
      lastError = undefined
      failures = 0
      manager.markVolumesAsReportedInUse(reported ?? [])
    } catch (err) {
      const message = apiErrorMessage(err)
      options.onPatch?.('error')
      if (statusCodeOf(err) === 404) options.onNodeMissing?.()
      // One line per distinct error, not one per retry.
      if (message !== lastError) logger.warn('Updating node volumesInUse failed', { node: nodeName, err: message })
      lastError = message
      if (!retry && !stopped) {
        retry = setTimeout(
          () => {
            retry = undefined
            void updater.sync()
          },
          Math.min(retryMs * 2 ** failures++, maxRetryMs),
        )
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
