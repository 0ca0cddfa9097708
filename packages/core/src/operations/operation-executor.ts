/**
 * Starts generated operations under the kubelet's key rules (SPEC §6.1), through
 * {@link PendingOperations}, and records their duration and failure events. Never blocks: every
 * method returns at once with what it did.
 */
import type { UniquePodName, UniqueVolumeName } from '../api/names.js'
import { isBlockSpec, isMultiAttachAllowed } from '../api/volume-spec.js'
import type { AttachedVolume, MountedVolume } from '../cache/actual-state.js'
import { OperationError, errorMessage } from '../errors.js'
import {
  generateAttachVolume,
  generateDetachVolume,
  generateExpandInUseVolume,
  generateVerifyControllerAttachedVolume,
} from './attach-operations.js'
import { generateMapVolume, generateUnmapDevice, generateUnmapVolume } from './block-operations.js'
import { type OperationContext, emitEvent } from './context.js'
import {
  type GeneratedOperation,
  type MountRequestVolume,
  generateMountVolume,
  generateUnmountDevice,
  generateUnmountVolume,
} from './mount-operations.js'
import type { OperationKey, PendingOperations, StartResult } from './pending-operations.js'

/** What starting an operation did; `generation-failed` is the kubelet's synchronous error (no backoff). */
export type OperationStart = StartResult | { readonly status: 'generation-failed'; readonly error: OperationError }

/** An operation seen from outside: for status pages and the docs playground. */
export interface OperationRecord {
  readonly name: string
  readonly volumeName: UniqueVolumeName
  readonly podName: UniquePodName
  readonly pluginName: string
  readonly startedAt: number
  readonly endedAt?: number
  readonly error?: string
}

export type OperationListener = (record: OperationRecord) => void

/** The event reason for a failed operation, when the kubelet emits one. */
const FAILURE_EVENTS: Readonly<Record<string, string>> = {
  volume_mount: 'FailedMount',
  map_volume: 'FailedMapVolume',
}

export class OperationExecutor {
  readonly #ctx: OperationContext
  readonly #pending: PendingOperations
  readonly #listeners = new Set<OperationListener>()

  constructor(ctx: OperationContext, pending: PendingOperations) {
    this.#ctx = ctx
    this.#pending = pending
  }

  /** Calls `listener` when an operation starts and when it ends. */
  subscribe(listener: OperationListener): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  /**
   * Mounts (or maps, for block) one desired volume for one pod. Volumes with a shared device are
   * keyed by volume alone; others by volume + pod, so pods mount them in parallel.
   */
  mountVolume(vtm: MountRequestVolume, isRemount: boolean): OperationStart {
    const podName = !vtm.pluginIsAttachable && !vtm.pluginIsDeviceMountable ? vtm.podName : ''
    const key = { volumeName: vtm.volumeName, podName, nodeName: '' }
    return this.#start(key, vtm.podName, () =>
      isBlockSpec(vtm.spec) ? generateMapVolume(this.#ctx, vtm) : generateMountVolume(this.#ctx, vtm, isRemount),
    vtm)
  }

  /** Unmounts (or unmaps) one pod's volume; unmounts of different pods run in parallel. */
  unmountVolume(mv: MountedVolume): OperationStart {
    const key = { volumeName: mv.volumeName, podName: mv.podUID, nodeName: '' }
    return this.#start(key, mv.podName, () =>
      isBlockSpec(mv.spec) ? generateUnmapVolume(this.#ctx, mv) : generateUnmountVolume(this.#ctx, mv),
    )
  }

  /** Unmounts (or unmaps) the device of a volume no pod uses. */
  unmountDevice(av: AttachedVolume): OperationStart {
    const key = { volumeName: av.volumeName, podName: '', nodeName: '' }
    return this.#start(key, '', () =>
      isBlockSpec(av.spec) ? generateUnmapDevice(this.#ctx, av) : generateUnmountDevice(this.#ctx, av),
    )
  }

  verifyControllerAttachedVolume(vtm: MountRequestVolume): OperationStart {
    const key = { volumeName: vtm.volumeName, podName: '', nodeName: '' }
    return this.#start(key, vtm.podName, () => generateVerifyControllerAttachedVolume(this.#ctx, vtm), vtm)
  }

  attachVolume(vtm: MountRequestVolume): OperationStart {
    const nodeName = isMultiAttachAllowed(vtm.spec) ? this.#ctx.nodeName : ''
    return this.#start({ volumeName: vtm.volumeName, podName: '', nodeName }, vtm.podName, () => generateAttachVolume(this.#ctx, vtm), vtm)
  }

  detachVolume(av: AttachedVolume): OperationStart {
    const nodeName = isMultiAttachAllowed(av.spec) ? this.#ctx.nodeName : ''
    return this.#start({ volumeName: av.volumeName, podName: '', nodeName }, '', () => generateDetachVolume(this.#ctx, av))
  }

  expandInUseVolume(vtm: MountRequestVolume, currentSize: number): OperationStart {
    const key = { volumeName: vtm.volumeName, podName: '', nodeName: '' }
    return this.#start(key, vtm.podName, () => generateExpandInUseVolume(this.#ctx, vtm, currentSize), vtm)
  }

  isOperationPending(volumeName: UniqueVolumeName, podName: UniquePodName = '', nodeName = ''): boolean {
    return this.#pending.isOperationPending({ volumeName, podName, nodeName })
  }

  /** When a failed operation on this key may be retried, if it is backing off. */
  retryAt(volumeName: UniqueVolumeName, podName: UniquePodName = '', nodeName = ''): number | undefined {
    return this.#pending.retryAt({ volumeName, podName, nodeName })
  }

  /** The last failure on this key, if it is backing off. */
  lastFailure(volumeName: UniqueVolumeName, podName: UniquePodName = '') {
    return this.#pending.lastFailure({ volumeName, podName, nodeName: '' })
  }

  #start(
    key: OperationKey,
    podName: UniquePodName,
    generate: () => GeneratedOperation,
    vtm?: MountRequestVolume,
  ): OperationStart {
    // Cheap refusal first: generating an operation costs more than asking whether one may start.
    if (this.#pending.isOperationPending(key)) {
      return { status: 'already-pending', message: `An operation for volume ${key.volumeName} is already executing.` }
    }
    let op: GeneratedOperation
    try {
      op = generate()
    } catch (err) {
      const error = err instanceof OperationError ? err : new OperationError(errorMessage(err), errorMessage(err), 'final', { cause: err })
      return { status: 'generation-failed', error }
    }
    // The work runs when the operation really starts, later than now when every slot is taken: its
    // duration (the metric, the records) counts from then. The kubelet's metric hook starts its
    // clock when the operation is generated, which there is also when its goroutine starts.
    return this.#pending.run(key, op.name, () => this.#run(op, key.volumeName, podName, vtm))
  }

  /** Runs a started operation: its start record, then the work, then what ends it. */
  #run(op: GeneratedOperation, volumeName: UniqueVolumeName, podName: UniquePodName, vtm: MountRequestVolume | undefined): Promise<void> {
    const ctx = this.#ctx
    const startedAt = ctx.clock.now()
    const { name, pluginName } = op
    // What ends an operation, success or failure: metrics, the failure's log and event, listeners.
    const end = (error: unknown): void => {
      const endedAt = ctx.clock.now()
      ctx.metrics.observe(
        'storage_operation_duration_seconds',
        { volume_plugin: pluginName, operation_name: name, status: error === undefined ? 'success' : 'fail-unknown', migrated: 'false' },
        (endedAt - startedAt) / 1000,
      )
      if (error !== undefined) {
        const message = errorMessage(error)
        ctx.logger.error(message, { operation: name, volume: volumeName })
        const reason = FAILURE_EVENTS[name]
        if (reason && vtm) emitEvent(ctx, vtm.pod, 'Warning', reason, error instanceof OperationError ? error.eventMessage : message)
      }
      // Spelled out (the same keys in the same order as the start record, then the end): a spread
      // with a conditional part took a slow path once per operation.
      this.#notify(
        error === undefined
          ? { name, volumeName, podName, pluginName, startedAt, endedAt }
          : { name, volumeName, podName, pluginName, startedAt, endedAt, error: errorMessage(error) },
      )
    }
    // Promise handlers rather than an async function with try/finally: they run in the same turns,
    // and no suspended frame is kept per running operation (a node may start 100,000 at once).
    this.#notify({ name, volumeName, podName, pluginName, startedAt })
    let running: Promise<void>
    try {
      running = op.run()
    } catch (err) {
      end(err)
      return Promise.reject(err)
    }
    return running.then(
      () => end(undefined),
      (err: unknown) => {
        end(err)
        throw err
      },
    )
  }

  #notify(record: OperationRecord): void {
    for (const listener of this.#listeners) listener(record)
  }
}
