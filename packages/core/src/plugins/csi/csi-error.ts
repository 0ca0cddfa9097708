/**
 * gRPC status codes of CSI calls and the kubelet's classification of them (SPEC §7.7
 * `isFinalError`): a failure that may have left the operation running is uncertain, not final.
 */
import { KubevolError, VolumeOperationFailure, errorMessage, failureKind, transientFailure, uncertainProgress } from '../../errors.js'

/** gRPC status codes by name (grpc/codes). */
export const GRPC_CODES = {
  OK: 0,
  Canceled: 1,
  Unknown: 2,
  InvalidArgument: 3,
  DeadlineExceeded: 4,
  NotFound: 5,
  AlreadyExists: 6,
  PermissionDenied: 7,
  ResourceExhausted: 8,
  FailedPrecondition: 9,
  Aborted: 10,
  OutOfRange: 11,
  Unimplemented: 12,
  Internal: 13,
  Unavailable: 14,
  DataLoss: 15,
  Unauthenticated: 16,
} as const

export type GrpcCodeName = keyof typeof GRPC_CODES

const NAMES = Object.fromEntries(Object.entries(GRPC_CODES).map(([name, code]) => [code, name])) as Record<number, GrpcCodeName>

/** The name of a gRPC status code (`DeadlineExceeded`), or the number when unknown. */
export function grpcCodeName(code: number): string {
  return NAMES[code] ?? String(code)
}

/** A failed CSI call: the gRPC status code and the driver's message, in Go gRPC's wording. */
export class CsiError extends KubevolError {
  readonly grpcCode: number
  readonly details: string
  constructor(grpcCode: number, details: string, options?: { cause?: unknown }) {
    super('CsiError', `rpc error: code = ${NAMES[grpcCode] ?? grpcCode} desc = ${details}`, options)
    this.grpcCode = grpcCode
    this.details = details
  }
}

/** A CsiError with the named code. */
export function csiError(code: GrpcCodeName, details: string): CsiError {
  return new CsiError(GRPC_CODES[code], details)
}

const NOT_FINAL: ReadonlySet<number> = new Set([
  GRPC_CODES.Canceled,
  GRPC_CODES.DeadlineExceeded,
  GRPC_CODES.Unavailable,
  GRPC_CODES.ResourceExhausted,
  GRPC_CODES.Aborted,
])

/**
 * True when the call certainly did not take effect. A non-gRPC error is not final (the call may
 * have reached the driver); Canceled, DeadlineExceeded, Unavailable, ResourceExhausted and
 * Aborted are not final; every other code is.
 */
export function isFinalCsiError(err: unknown): boolean {
  if (!(err instanceof CsiError)) return false
  return !NOT_FINAL.has(err.grpcCode)
}

/** True when `err` is a CsiError with one of the named codes. */
export function hasGrpcCode(err: unknown, ...codes: GrpcCodeName[]): err is CsiError {
  return err instanceof CsiError && codes.some((c) => GRPC_CODES[c] === err.grpcCode)
}

/**
 * `err` as the core failure kinds: final errors pass through, the others become uncertain. The text
 * stays the call's own (`rpc error: code = ... desc = ...`), as the kubelet's csi client returns
 * `NewUncertainProgressError(err.Error())`; `what` names the call for the cause chain only.
 */
export function classifyCsiError(_what: string, err: unknown): Error {
  if (isFinalCsiError(err)) return err as CsiError
  return uncertainProgress(errorMessage(err), err)
}

/** The kubelet's `log()` of pkg/volume/csi: every message it words starts with the plugin's name. */
function csiLog(message: string): string {
  return `kubernetes.io/csi: ${message}`
}

/**
 * `err` under the kubelet's prefix for the step that failed, e.g. `kubernetes.io/csi:
 * Unmounter.TearDownAt failed: rpc error: ...` (`step` is `Unmounter.TearDownAt failed`). The kind
 * (uncertain, transient) is kept; a final error stays final.
 */
export function csiStepError(step: string, err: unknown): Error {
  return rewordedError(csiLog(`${step}: ${errorMessage(err)}`), err)
}

/** `err` under another text, of the same kind (uncertain, transient or final). */
export function rewordedError(message: string, err: unknown): Error {
  const kind = failureKind(err)
  return kind === 'final' ? new KubevolError('CsiStepFailed', message, { cause: err }) : new VolumeOperationFailure(kind, message, { cause: err })
}

/**
 * The driver is not registered (yet): nothing happened, retry later (SPEC: TransientOperationFailure).
 * `step` is the kubelet's wording of the lookup that failed (`attacher.MountDevice failed to create
 * newCsiDriverClient`, `mounter.SetUpAt failed to get CSI client`, ...), which prefixes the text.
 */
export function driverNotRegistered(driver: string, step?: string): VolumeOperationFailure {
  const cause = `driver name ${driver} not found in the list of registered CSI drivers`
  return transientFailure(step ? csiLog(`${step}: ${cause}`) : cause)
}
