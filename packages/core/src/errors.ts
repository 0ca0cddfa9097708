/**
 * kubevol's error hierarchy. Every error has a literal `code` so shells can map it to exit codes and
 * events in one place, and an optional `cause`. Expected outcomes (an operation already pending, a
 * backoff not yet over) are values, not errors: see `StartResult`.
 */

/** Base class: a literal code, a message, and the error that caused it. */
export class KubevolError extends Error {
  readonly code: string
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = new.target.name
    this.code = code
  }
}

/** The POSIX error codes a Host reports. Hosts map their native errors onto these. */
export type HostErrorCode =
  | 'ENOENT'
  | 'EEXIST'
  | 'ENOTDIR'
  | 'EISDIR'
  | 'ENOTEMPTY'
  | 'EBUSY'
  | 'EINVAL'
  | 'EPERM'
  | 'EACCES'
  | 'ELOOP'
  | 'EIO'
  | 'ENXIO'
  | 'ENODEV'
  | 'ENOTBLK'
  | 'ENOSPC'
  | 'EROFS'
  | 'EXDEV'
  | 'ENOTSUP'
  | 'ETIMEDOUT'

/**
 * A failed host call: the errno, the call and the path are in the message
 * (`EBUSY: umount /var/lib/kubevol/pods/u1/volumes/...: target is busy`).
 */
export class HostError extends KubevolError {
  override readonly code: HostErrorCode
  readonly syscall: string
  readonly path: string
  constructor(code: HostErrorCode, syscall: string, path: string, detail?: string, options?: { cause?: unknown }) {
    super(code, `${code}: ${syscall} ${path}${detail ? `: ${detail}` : ''}`, options)
    this.code = code
    this.syscall = syscall
    this.path = path
  }
}

/** True when `err` is a HostError with one of the given codes. */
export function isHostError(err: unknown, ...codes: HostErrorCode[]): err is HostError {
  return err instanceof HostError && (codes.length === 0 || codes.includes(err.code))
}

/**
 * How a failed volume operation left the machine (SPEC §6.4):
 * - `final`: it did not take effect; the state before the call still holds.
 * - `uncertain`: it may have taken effect or may still be in progress (a timeout): treat the volume
 *   as possibly mounted.
 * - `transient`: nothing changed and nothing should be recorded (the driver was not ready).
 */
export type FailureKind = 'final' | 'uncertain' | 'transient'

/**
 * Thrown by plugins to say how far an operation got. Any other error is `final`.
 */
export class VolumeOperationFailure extends KubevolError {
  readonly kind: FailureKind
  constructor(kind: FailureKind, message: string, options?: { cause?: unknown }) {
    super(kind === 'final' ? 'OperationFailed' : kind === 'uncertain' ? 'UncertainProgress' : 'TransientOperationFailure', message, options)
    this.kind = kind
  }
}

/** An error that may leave the operation in progress (SPEC: `UncertainProgressError`). */
export function uncertainProgress(message: string, cause?: unknown): VolumeOperationFailure {
  return new VolumeOperationFailure('uncertain', message, { cause })
}

/** An error that changed nothing (SPEC: `TransientOperationFailure`). */
export function transientFailure(message: string, cause?: unknown): VolumeOperationFailure {
  return new VolumeOperationFailure('transient', message, { cause })
}

/** The kind of a failure: `uncertain` and `transient` only when said so, `final` otherwise. */
export function failureKind(err: unknown): FailureKind {
  if (err instanceof VolumeOperationFailure) return err.kind
  if (isHostError(err, 'ETIMEDOUT')) return 'uncertain'
  return 'final'
}

/**
 * A failed generated operation (SPEC §6.5): `eventMessage` is the simple text that goes into
 * events ("MountVolume.SetUp failed for volume \"data\" : ..."), `message` the detailed one.
 */
export class OperationError extends KubevolError {
  readonly eventMessage: string
  readonly kind: FailureKind
  constructor(message: string, eventMessage: string, kind: FailureKind, options?: { cause?: unknown }) {
    super('OperationError', message, options)
    this.eventMessage = eventMessage
    this.kind = kind
  }
}

/** A volume spec the manager cannot act on: no plugin, bad PVC binding, wrong volume mode. */
export class VolumeSpecError extends KubevolError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('VolumeSpecError', message, options)
  }
}

/** An object the ObjectReader could not find (a 404 from the API server, a missing manifest). */
export class NotFoundError extends KubevolError {
  readonly kind: string
  readonly objectName: string
  constructor(kind: string, name: string, options?: { cause?: unknown }) {
    super('NotFound', `${kind} "${name}" not found`, options)
    this.kind = kind
    this.objectName = name
  }
}

/** `waitForAttachAndMount` / `waitForUnmount` did not finish (timeout, abort or pod errors). */
export class WaitError extends KubevolError {
  /**
   * True when the wait ran out of time or was aborted (the message ends in `context deadline
   * exceeded` or `context canceled`), false when the pod's errors ended it. The kubelet's
   * `wait.Interrupted(err)`: kubelet 1.32 posts no `FailedMount` event for such a failure.
   */
  readonly interrupted: boolean
  constructor(message: string, options?: { cause?: unknown; interrupted?: boolean }) {
    super('WaitError', message, options)
    this.interrupted = options?.interrupted ?? false
  }
}

/**
 * `waitForAttachAndMount` failed while a volume of the pod is not attached because the node reached
 * its attach limit (kubelet `VolumeAttachLimitExceededError`): the message is the wait's, after
 * "Node has reached its volume attachment limit, rejecting pod. ". The kubelet rejects such a pod
 * (status reason `VolumeAttachmentLimitExceeded`) instead of retrying it.
 */
export class VolumeAttachLimitExceededError extends WaitError {
  /** The pod status reason the kubelet rejects the pod with. */
  readonly reason = 'VolumeAttachmentLimitExceeded'
  constructor(waitMessage: string, options?: { cause?: unknown; interrupted?: boolean }) {
    super(`Node has reached its volume attachment limit, rejecting pod. ${waitMessage}`, options)
  }
}

/** Invalid options given to a factory, or an argument that cannot be what the call takes (a pod name that is not a UID). */
export class ConfigError extends KubevolError {
  constructor(message: string) {
    super('ConfigError', message)
  }
}

/** The message of any thrown value. */
export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}

/**
 * A container's mounts cannot be made (`containerMounts`): a volume it names is not mounted yet, a
 * subPath or a mount's options are refused. The message is the kubelet's text for the same case,
 * as it would show in the container's `CreateContainerConfigError`.
 */
export class ContainerMountsError extends KubevolError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ContainerMountsError', message, options)
  }
}
