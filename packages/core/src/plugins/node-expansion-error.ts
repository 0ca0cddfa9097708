/**
 * How a plugin's NodeExpand says that growing the volume on this node cannot succeed (kubelet
 * `volumetypes.FailedPreconditionError` and `InfeasibleError`, SPEC §6.6), so the node expander can
 * act as the kubelet does: a failed precondition never blocks a mount and is not retried on this
 * node; an infeasible size is written to the claim (`NodeResizeInfeasible`) for the user to fix.
 */
import { KubevolError } from '../errors.js'

export type NodeExpansionErrorKind = 'failed-precondition' | 'infeasible'

/** A NodeExpand failure of a known kind. Final: retrying with the same size will not help. */
export class NodeExpansionError extends KubevolError {
  readonly kind: NodeExpansionErrorKind
  constructor(kind: NodeExpansionErrorKind, message: string, options?: { cause?: unknown }) {
    super('NodeExpansionError', message, options)
    this.kind = kind
  }
}

/** True when `err` is a {@link NodeExpansionError} of that kind. */
export function isNodeExpansionError(err: unknown, kind: NodeExpansionErrorKind): err is NodeExpansionError {
  return err instanceof NodeExpansionError && err.kind === kind
}
