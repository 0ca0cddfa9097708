/**
 * Nested pending operations (SPEC §6.2): at most one operation per volume, or per volume + pod (or
 * + node); an empty pod or node name matches every pod or node. Failures back off exponentially per
 * key. The record is made synchronously in `run`, before the operation's first await, so two
 * calls in one turn can never both start.
 */
import type { UniquePodName, UniqueVolumeName } from '../api/names.js'
import type { Clock } from '../clock.js'
import { errorMessage } from '../errors.js'
import { type BackoffOptions, ExponentialBackoff } from './backoff.js'

/** Which operations exclude each other. Empty strings are wildcards (and an empty volume never conflicts). */
export interface OperationKey {
  readonly volumeName: UniqueVolumeName
  readonly podName: UniquePodName
  readonly nodeName: string
}

/** What `run` did: started it, or why not. Expected outcomes are values, not errors. */
export type StartResult =
  | { readonly status: 'started'; readonly done: Promise<void> }
  | { readonly status: 'already-pending'; readonly message: string }
  | { readonly status: 'backing-off'; readonly retryAt: number; readonly message: string }

interface Operation {
  key: OperationKey
  name: string
  pending: boolean
  /**
   * The key's failure record, made at its first failure: nearly every operation succeeds, and a
   * node starting 100,000 of them at once held as many empty records.
   */
  backoff: ExponentialBackoff | undefined
}

export interface PendingOperationsOptions {
  readonly clock: Clock
  /** @default true (the kubelet's setting) */
  readonly exponentialBackoffOnError?: boolean
  readonly backoff?: BackoffOptions
  /** Called when an operation ends, with its key and, on failure, the time a retry is allowed. */
  readonly onComplete?: (key: OperationKey, error: unknown, retryAt: number | undefined) => void
}

function formatKey(key: OperationKey): string {
  return `{volumeName:${key.volumeName} podName:${key.podName} nodeName:${key.nodeName}}`
}

function keysMatch(stored: OperationKey, key: OperationKey): boolean {
  return (
    stored.volumeName === key.volumeName &&
    (stored.podName === '' || key.podName === '' || stored.podName === key.podName) &&
    (stored.nodeName === '' || key.nodeName === '' || stored.nodeName === key.nodeName)
  )
}

function keysEqual(a: OperationKey, b: OperationKey): boolean {
  return a.volumeName === b.volumeName && a.podName === b.podName && a.nodeName === b.nodeName
}

export class PendingOperations {
  // Records per volume: every question is about one volume, so no scan crosses volumes. A volume
  // nearly always has one record, kept without an array around it.
  readonly #byVolume = new Map<UniqueVolumeName, Operation | Operation[]>()
  readonly #clock: Clock
  readonly #backoffEnabled: boolean
  readonly #backoffOptions: BackoffOptions
  readonly #onComplete: PendingOperationsOptions['onComplete']
  #running = 0
  readonly #idleWaiters: (() => void)[] = []

  constructor(options: PendingOperationsOptions) {
    this.#clock = options.clock
    this.#backoffEnabled = options.exponentialBackoffOnError ?? true
    this.#backoffOptions = options.backoff ?? {}
    this.#onComplete = options.onComplete
  }

  /**
   * Starts `operation` under `key` unless a matching operation is pending or the same operation is
   * still backing off. A different operation on a key in backoff resets the backoff (an unmount may
   * start right after a failed mount).
   */
  run(key: OperationKey, name: string, operation: () => Promise<void>): StartResult {
    let op: Operation | undefined
    if (key.volumeName !== '') {
      const found = this.#find(key)
      if (found?.pending) {
        return {
          status: 'already-pending',
          message: `Failed to create operation with name ${formatKey(key)}. An operation with that name is already executing.`,
        }
      }
      if (found) {
        const now = this.#clock.now()
        if (found.backoff && !found.backoff.safeToRetry(now)) {
          if (found.name === name) {
            return { status: 'backing-off', retryAt: found.backoff.retryAt(), message: backoffMessage(name, found.backoff) }
          }
          found.backoff = undefined
        }
        found.name = name
        found.key = key
        found.pending = true
        op = found
      }
    }
    if (!op) {
      op = { key, name, pending: true, backoff: undefined }
      if (key.volumeName !== '') {
        const ops = this.#byVolume.get(key.volumeName)
        if (ops === undefined) this.#byVolume.set(key.volumeName, op)
        else if (Array.isArray(ops)) ops.push(op)
        else this.#byVolume.set(key.volumeName, [ops, op])
      }
    }
    this.#running++
    const record = op
    const failed = (err: unknown): void => this.#complete(record, err ?? new Error('operation failed'))
    let running: Promise<void>
    try {
      running = operation()
    } catch (err) {
      failed(err)
      return { status: 'started', done: Promise.resolve() }
    }
    // Settles in the same turn as `await` would, without an async frame kept alive per operation:
    // a node starting 100,000 operations at once holds that many of them.
    const done = running.then(() => this.#complete(record, undefined), failed)
    return { status: 'started', done }
  }

  /** A matching operation is running. */
  isOperationPending(key: OperationKey): boolean {
    return this.#find(key)?.pending ?? false
  }

  /** No matching record, or it is not pending and (another operation, or its backoff is over). */
  isOperationSafeToRetry(key: OperationKey, name: string): boolean {
    const found = this.#find(key)
    if (!found) return true
    if (found.pending) return false
    return found.name !== name || !found.backoff || found.backoff.safeToRetry(this.#clock.now())
  }

  /** The time a retry of a failed operation on this key is allowed, if one is backing off. */
  retryAt(key: OperationKey): number | undefined {
    const found = this.#find(key)
    if (!found || found.pending || !found.backoff || found.backoff.durationBeforeRetry === 0) return undefined
    return found.backoff.retryAt()
  }

  /** The failure record of a key (for status and `explain`). */
  lastFailure(key: OperationKey): { name: string; error: unknown; retryAt: number; durationMs: number; attempts: number } | undefined {
    const found = this.#find(key)
    if (!found?.backoff || found.backoff.durationBeforeRetry === 0) return undefined
    return {
      name: found.name,
      error: found.backoff.lastError,
      retryAt: found.backoff.retryAt(),
      durationMs: found.backoff.durationBeforeRetry,
      attempts: found.backoff.failures,
    }
  }

  /** Number of operations running now. */
  get runningCount(): number {
    return this.#running
  }

  /** Resolves when no operation is running. */
  wait(): Promise<void> {
    if (this.#running === 0) return Promise.resolve()
    return new Promise((resolve) => this.#idleWaiters.push(resolve))
  }

  #find(key: OperationKey): Operation | undefined {
    if (key.volumeName === '') return undefined
    const ops = this.#byVolume.get(key.volumeName)
    if (ops === undefined) return undefined
    if (!Array.isArray(ops)) return keysMatch(ops.key, key) ? ops : undefined
    let match: Operation | undefined
    for (const op of ops) {
      if (!keysMatch(op.key, key)) continue
      if (op.pending) return op
      if (!match || keysEqual(op.key, key)) match = op
    }
    return match
  }

  #complete(op: Operation, error: unknown): void {
    this.#running--
    let retryAt: number | undefined
    if (error === undefined || !this.#backoffEnabled) {
      const ops = this.#byVolume.get(op.key.volumeName)
      if (ops === op) {
        this.#byVolume.delete(op.key.volumeName)
      } else if (Array.isArray(ops)) {
        const i = ops.indexOf(op)
        if (i >= 0) ops.splice(i, 1)
        if (ops.length === 0) this.#byVolume.delete(op.key.volumeName)
      }
    } else {
      op.backoff ??= new ExponentialBackoff(this.#backoffOptions)
      op.backoff.update(error, this.#clock.now())
      op.pending = false
      retryAt = op.backoff.retryAt()
    }
    this.#onComplete?.(op.key, error, retryAt)
    if (this.#running === 0) for (const resolve of this.#idleWaiters.splice(0)) resolve()
  }
}

function backoffMessage(name: string, backoff: ExponentialBackoff): string {
  const at = new Date(backoff.lastErrorTime).toISOString()
  const until = new Date(backoff.retryAt()).toISOString()
  return `Failed to create operation with name "${name}". An operation with that name failed at ${at}. No retries permitted until ${until} (${backoff.durationBeforeRetry}ms). Last error: "${errorMessage(backoff.lastError)}".`
}
