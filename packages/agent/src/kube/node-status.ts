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
  return new VolumesInUseUpdater(options)
}

class VolumesInUseUpdater implements NodeStatusUpdater {
  readonly #o: NodeStatusUpdaterOptions
  readonly #retryMs: number
  readonly #maxRetryMs: number
  #reported: UniqueVolumeName[] | undefined
  /** What kubevol last wrote as its own: taken out again when no longer in use. */
  #written: readonly string[] = []
  #lastError: string | undefined
  #running: Promise<void> | undefined
  #again = false
  #timer: NodeJS.Timeout | undefined
  #retry: NodeJS.Timeout | undefined
  #failures = 0
  #unsubscribe: (() => void) | undefined
  #scheduled = false
  #stopped = true

  constructor(options: NodeStatusUpdaterOptions) {
    this.#o = options
    this.#retryMs = options.retryMs ?? 1_000
    this.#maxRetryMs = Math.max(options.periodMs, 1_000)
  }

  get reported(): readonly UniqueVolumeName[] | undefined {
    return this.#reported
  }

  get lastError(): string | undefined {
    return this.#lastError
  }

  start(): void {
    this.#stopped = false
    this.#unsubscribe = this.#o.manager.subscribe((event) => {
      if (event.type !== 'state-changed' || this.#scheduled) return
      this.#scheduled = true
      queueMicrotask(() => {
        this.#scheduled = false
        if (!this.#stopped) void this.sync()
      })
    })
    this.#tick()
    void this.sync()
  }

  stop(): void {
    this.#stopped = true
    this.#unsubscribe?.()
    if (this.#timer) clearTimeout(this.#timer)
    if (this.#retry) clearTimeout(this.#retry)
    this.#timer = this.#retry = undefined
  }

  sync(): Promise<void> {
    if (this.#running) {
      this.#again = true
      return this.#running
    }
    this.#running = (async () => {
      do {
        this.#again = false
        try {
          await this.#once()
        } catch (err) {
          this.#o.logger.error('Node status check failed', { err: errorMessage(err) })
        }
      } while (this.#again && !this.#stopped)
    })().finally(() => {
      this.#running = undefined
    })
    return this.#running
  }

  #tick(): void {
    this.#timer = setTimeout(() => {
      void this.sync().finally(() => {
        if (!this.#stopped) this.#tick()
      })
    }, this.#o.periodMs)
    this.#timer.unref?.()
  }

  async #once(): Promise<void> {
    const { manager, logger, nodeName } = this.#o
    // The kubelet reports volumes in use only once reconstruction has been reconciled.
    if (!manager.reconcilerStatesHaveBeenSynced()) return
    if (this.#o.nodeReady && !this.#o.nodeReady()) return
    const inUse = manager.getVolumesInUse()
    try {
      this.#reported = await writeVolumesInUse(this.#o, this.#written, inUse)
      this.#written = inUse
      if (this.#lastError !== undefined) logger.info('Node volumesInUse can be written again', { node: nodeName })
      this.#lastError = undefined
      this.#failures = 0
      manager.markVolumesAsReportedInUse(this.#reported ?? [])
    } catch (err) {
      this.#failed(err)
    }
  }

  #failed(err: unknown): void {
    const { logger, nodeName } = this.#o
    const message = apiErrorMessage(err)
    this.#o.onPatch?.('error')
    if (statusCodeOf(err) === 404) this.#o.onNodeMissing?.()
    // One line per distinct error, not one per retry.
    if (message !== this.#lastError) logger.warn('Updating node volumesInUse failed', { node: nodeName, err: message })
    this.#lastError = message
    if (!this.#retry && !this.#stopped) {
      this.#retry = setTimeout(
        () => {
          this.#retry = undefined
          void this.sync()
        },
        Math.min(this.#retryMs * 2 ** this.#failures++, this.#maxRetryMs),
      )
      this.#retry.unref?.()
    }
  }
}

/**
 * Reads the Node and writes the merged list when it differs from what the server holds; returns
 * the list the server now holds. Names kubevol answers for (what it wrote before, and every volume
 * of its desired and actual state) are replaced by `inUse`; everyone else's entries are kept.
 */
async function writeVolumesInUse(options: NodeStatusUpdaterOptions, written: readonly string[], inUse: UniqueVolumeName[]): Promise<UniqueVolumeName[]> {
  const { clients, nodeName, manager, logger } = options
  for (let attempt = 1; ; attempt++) {
    const node: V1Node = await clients.core.readNode({ name: nodeName })
    const held = [...(node.status?.volumesInUse ?? [])]
    const snap = manager.snapshot()
    const own = new Set<string>([...written, ...inUse, ...snap.desired.map((v) => v.volumeName), ...snap.mounted.map((v) => v.volumeName), ...snap.attached.map((v) => v.volumeName)])
    const next = [...new Set([...held.filter((n) => !own.has(n)), ...inUse])].sort()
    if (sameList(next, [...held].sort())) return next as UniqueVolumeName[]
    try {
      const body = { metadata: { resourceVersion: node.metadata?.resourceVersion }, status: { volumesInUse: next } }
      const updated: V1Node = await clients.core.patchNodeStatus({ name: nodeName, body }, MERGE_PATCH)
      const reported = [...(updated.status?.volumesInUse ?? [])].sort() as UniqueVolumeName[]
      options.onPatch?.('success')
      logger.debug('Updated node volumesInUse', { volumesInUse: reported })
      return reported
    } catch (err) {
      if (statusCodeOf(err) !== 409 || attempt >= CONFLICT_RETRIES) throw err
      logger.debug('The node changed while volumesInUse was written; reading it again', { node: nodeName, attempt })
    }
  }
}
