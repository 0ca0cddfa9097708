/**
 * Node expansion (SPEC §6.6): growing a volume on the node after its PV grew, during mount, during
 * map (raw block) and while in use. With the claim's `status.allocatedResources` or
 * `allocatedResourceStatuses` set (RecoverVolumeExpansionFailure, on by default since kubelet 1.32)
 * the kubelet's NodeExpander runs: the size is the allocated one, NodeExpand is skipped when the
 * resize is infeasible or already done, and the claim's status tells the progress. Otherwise the
 * legacy path: grow to the PV's size and patch the claim's capacity after.
 */
import type { PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimCondition } from '../api/kubernetes.js'
import { storageOf } from '../api/quantity.js'
import { accessModesOf } from '../api/volume-spec.js'
import type { VolumeToMount } from '../cache/desired-state.js'
import { errorMessage, failureKind } from '../errors.js'
import { isNodeExpansionError } from '../plugins/node-expansion-error.js'
import type { NodeExpandCapability, NodeResizeOptions } from '../plugins/plugin.js'
import { type OperationContext, detailedMessage, emitEvent, simpleMessage, subjectOf } from './context.js'

/** `allocatedResourceStatuses['storage']` values (core/v1 `ClaimResourceStatus`). */
const NODE_RESIZE_PENDING = 'NodeResizePending'
const NODE_RESIZE_IN_PROGRESS = 'NodeResizeInProgress'
const NODE_RESIZE_INFEASIBLE = 'NodeResizeInfeasible'
/** The claim conditions a finished resize clears (kubelet `MergeResizeConditionOnPVC`). */
const RESIZE_CONDITIONS = new Set(['Resizing', 'FileSystemResizePending', 'ControllerResizeError', 'NodeResizeError'])

/** Where the volume is, for NodeExpand. */
export type ExpansionPaths = Pick<NodeResizeOptions, 'devicePath' | 'deviceMountPath' | 'deviceStagePath'>

/**
 * What a node expansion did: `expanded` to `size` (the actual state records it); `not-expanded`
 * when it must not be tried again for now (a failed precondition, an infeasible size, a resize the
 * claim says is not asked for): the mount goes on.
 */
export type NodeExpansionOutcome = { readonly status: 'expanded'; readonly size: number } | { readonly status: 'not-expanded' }

interface Expansion {
  readonly vtm: VolumeToMount
  readonly expander: NodeExpandCapability
  readonly pvc: PersistentVolumeClaim
  readonly resize: NodeResizeOptions
  /** The new size as the claim or the PV spells it ("2Gi"), for the claim's status. */
  readonly quantity: string | number
}

/** The PV's claim, read fresh: its status says how far a resize got. */
export async function readClaimOf(ctx: OperationContext, pv: PersistentVolume): Promise<PersistentVolumeClaim> {
  const ref = pv.spec?.claimRef
  if (!ref?.name) throw new Error(`PV ${pv.metadata.name ?? ''} has no claimRef`)
  try {
    return await ctx.objects.getPersistentVolumeClaim(ref.namespace ?? 'default', ref.name)
  } catch (err) {
    throw new Error(`mountVolume.NodeExpandVolume get PVC failed : ${errorMessage(err)}`, { cause: err })
  }
}

/**
 * kubelet `expandVolumeDuringMount`: when the claim's capacity is below the PV's, grow the volume
 * before containers start. A failed precondition is recorded (log and event) and the mount goes
 * on; other failures throw (the caller marks the mount uncertain).
 */
export async function expandVolumeDuringMount(ctx: OperationContext, vtm: VolumeToMount, expander: NodeExpandCapability | undefined, paths: ExpansionPaths): Promise<void> {
  const pv = vtm.spec.persistentVolume
  if (!expander?.requiresFSResize() || !pv?.spec?.claimRef?.name) return
  const pvc = await readClaimOf(ctx, pv)
  const current = storageOf(pvc.status?.capacity)
  const desired = storageOf(pv.spec.capacity)
  if (current === undefined || desired === undefined || current >= desired) return
  const outcome = await expandOnNode(ctx, vtm, expander, pvc, { ...paths, oldSize: current }, { size: desired, quantity: pv.spec.capacity?.storage ?? desired })
  if (outcome.status === 'expanded') ctx.asw.markVolumeAsResized(vtm.volumeName, outcome.size)
}

/**
 * kubelet `nodeExpandVolume` (in use, and during mount once sizes are known): the read-only check,
 * then the NodeExpander or the legacy path by what the claim's status holds.
 */
export async function expandOnNode(
  ctx: OperationContext,
  vtm: VolumeToMount,
  expander: NodeExpandCapability,
  pvc: PersistentVolumeClaim,
  sizes: ExpansionPaths & { readonly oldSize: number },
  pvSize: { readonly size: number; readonly quantity: string | number },
): Promise<NodeExpansionOutcome> {
  const subject = subjectOf(vtm)
  if (vtm.spec.readOnly) {
    const message = simpleMessage('MountVolume.NodeExpandVolume failed', subject, 'requested read-only file system')
    ctx.logger.warn(detailedMessage('MountVolume.NodeExpandVolume failed', subject, 'requested read-only file system'))
    emitEvent(ctx, vtm.pod, 'Warning', 'FileSystemResizeFailed', message)
    claimEvent(ctx, pvc, 'Warning', 'FileSystemResizeFailed', message)
    return { status: 'not-expanded' }
  }
  const allocated = pvc.status?.allocatedResources?.storage
  const status = pvc.status?.allocatedResourceStatuses?.storage
  const recovery = allocated !== undefined || status !== undefined
  const quantity = recovery && allocated !== undefined ? allocated : pvSize.quantity
  const newSize = recovery && allocated !== undefined ? (storageOf({ storage: allocated }) ?? pvSize.size) : pvSize.size
  const op: Expansion = { vtm, expander, pvc, quantity, resize: { spec: vtm.spec, ...sizes, newSize } }
  return recovery ? runNodeExpander(ctx, op, status) : runLegacy(ctx, op)
}

/** RecoverVolumeExpansionFailure's NodeExpander: pre-check, mark in progress, expand, write the outcome. */
async function runNodeExpander(ctx: OperationContext, op: Expansion, status: string | undefined): Promise<NodeExpansionOutcome> {
  const { vtm, pvc, resize } = op
  const capacity = storageOf(pvc.status?.capacity) ?? 0
  // Expanded already (on another node, for a volume many nodes write): grow here, leave the claim.
  const alreadyUpdated = capacity >= resize.newSize && status === undefined
  const rwx = accessModesOf(vtm.spec).includes('ReadWriteMany')
  const requested = storageOf(pvc.spec?.resources?.requests)
  // The user changed the request since a final failure: that size failing too is infeasible.
  const infeasibleOnFailure = requested !== undefined && requested !== resize.newSize && ctx.asw.checkVolumeInFailedExpansionWithFinalErrors(vtm.volumeName)
  if (alreadyUpdated && !rwx) return { status: 'expanded', size: resize.newSize }
  if (!alreadyUpdated && status !== NODE_RESIZE_PENDING && status !== NODE_RESIZE_IN_PROGRESS) {
    ctx.logger.info(detailedMessage('NodeExpandVolume is not allowed to proceed', subjectOf(vtm), `with resizeStatus "${status ?? ''}"`))
    return { status: 'not-expanded' }
  }
  let claim = pvc
  if (!alreadyUpdated) claim = await patchClaim(ctx, claim, { allocatedResourceStatuses: { storage: NODE_RESIZE_IN_PROGRESS } })
  try {
    await op.expander.nodeExpand(resize)
  } catch (err) {
    if (failureKind(err) === 'final') {
      ctx.asw.markVolumeExpansionFailedWithFinalError(vtm.volumeName)
      const condition = { type: 'NodeResizeError', status: 'True', lastTransitionTime: now(ctx), message: `failed to expand pvc with ${errorMessage(err)}` }
      const infeasible = isNodeExpansionError(err, 'infeasible') || infeasibleOnFailure
      await patchClaim(ctx, claim, {
        ...(infeasible ? { allocatedResourceStatuses: { storage: NODE_RESIZE_INFEASIBLE } } : {}),
        conditions: [...otherConditions(claim), condition],
      }).catch((patchErr: unknown) => ctx.logger.error('MountVolume.NodeExpandVolume failed to mark node expansion as failed', { err: errorMessage(patchErr) }))
    }
    return failedPrecondition(ctx, op, err)
  }
  ctx.asw.removeVolumeFromFailedWithFinalErrors(vtm.volumeName)
  succeeded(ctx, op)
  if (!alreadyUpdated) await finish(ctx, op, claim)
  return { status: 'expanded', size: resize.newSize }
}

/** Without RecoverVolumeExpansionFailure's status: expand, then record the new capacity on the claim. */
async function runLegacy(ctx: OperationContext, op: Expansion): Promise<NodeExpansionOutcome> {
  try {
    await op.expander.nodeExpand(op.resize)
  } catch (err) {
    return failedPrecondition(ctx, op, err)
  }
  succeeded(ctx, op)
  if ((storageOf(op.pvc.status?.capacity) ?? 0) < op.resize.newSize) await finish(ctx, op, op.pvc)
  return { status: 'expanded', size: op.resize.newSize }
}

/**
 * A failed precondition: the driver cannot grow the volume while it is in use on this node. It is
 * recorded, not retried here, and does not block the mount. Any other failure is thrown.
 */
function failedPrecondition(ctx: OperationContext, op: Expansion, err: unknown): NodeExpansionOutcome {
  if (!isNodeExpansionError(err, 'failed-precondition')) throw err
  const subject = subjectOf(op.vtm)
  ctx.asw.markForInUseExpansionError(op.vtm.volumeName)
  ctx.logger.error(detailedMessage('MountVolume.NodeExpandVolume failed', subject, `: ${errorMessage(err)}`))
  emitEvent(ctx, op.vtm.pod, 'Warning', 'VolumeResizeFailed', simpleMessage('MountVolume.NodeExpandVolume failed', subject, `: ${errorMessage(err)}`))
  return { status: 'not-expanded' }
}

function succeeded(ctx: OperationContext, op: Expansion): void {
  const subject = subjectOf(op.vtm)
  const message = simpleMessage('MountVolume.NodeExpandVolume succeeded', subject, op.vtm.pod.spec?.nodeName ?? ctx.nodeName)
  ctx.logger.info(detailedMessage('MountVolume.NodeExpandVolume succeeded', subject, op.vtm.pod.spec?.nodeName ?? ctx.nodeName))
  emitEvent(ctx, op.vtm.pod, 'Normal', 'FileSystemResizeSuccessful', message)
  claimEvent(ctx, op.pvc, 'Normal', 'FileSystemResizeSuccessful', message)
}

/** kubelet `MarkFSResizeFinished`: the new capacity, resize conditions and status cleared. */
async function finish(ctx: OperationContext, op: Expansion, claim: PersistentVolumeClaim): Promise<void> {
  try {
    await patchClaim(ctx, claim, {
      capacity: { storage: op.quantity },
      conditions: otherConditions(claim),
      ...(claim.status?.allocatedResourceStatuses?.storage !== undefined ? { allocatedResourceStatuses: { storage: null } } : {}),
    })
  } catch (err) {
    throw new Error(`mountVolume.NodeExpandVolume update pvc status failed: ${errorMessage(err)}`, { cause: err })
  }
}

/** Merge-patches the claim's status through the reader's writable side; unchanged when it has none. */
async function patchClaim(ctx: OperationContext, pvc: PersistentVolumeClaim, status: Record<string, unknown>): Promise<PersistentVolumeClaim> {
  const patch = ctx.objects.patchPersistentVolumeClaimStatus
  if (!patch) return pvc
  return patch.call(ctx.objects, pvc.metadata.namespace ?? 'default', pvc.metadata.name ?? '', status)
}

function otherConditions(pvc: PersistentVolumeClaim): PersistentVolumeClaimCondition[] {
  return (pvc.status?.conditions ?? []).filter((c) => !RESIZE_CONDITIONS.has(c.type))
}

function claimEvent(ctx: OperationContext, pvc: PersistentVolumeClaim, type: 'Normal' | 'Warning', reason: string, message: string): void {
  ctx.recorder.event({ type, reason, message, target: { kind: 'PersistentVolumeClaim', metadata: pvc.metadata }, time: ctx.clock.now() })
}

function now(ctx: OperationContext): string {
  return new Date(ctx.clock.now()).toISOString().replace(/\.\d{3}Z$/, 'Z')
}
