/**
 * Volume expansion detection (SPEC §4.4, `checkVolumeFSResize`), for a pod being added and without
 * one: the kubelet sees a grown PV when it re-syncs the pod (every 60–90 s) and re-reads its claim
 * and PV; kubevol re-reads them when a claim or PV is announced as changed, and periodically.
 */
import type { Pod, Volume } from '../api/kubernetes.js'
import type { UniquePodName, UniqueVolumeName } from '../api/names.js'
import { storageOf } from '../api/quantity.js'
import { isBlockSpec } from '../api/volume-spec.js'
import type { ActualStateOfWorld } from '../cache/actual-state.js'
import type { DesiredStateOfWorld, VolumeToMount } from '../cache/desired-state.js'
import { errorMessage } from '../errors.js'
import type { Logger } from '../observability.js'
import type { ObjectReader, ObjectReference } from './sources.js'
import { type ResolvedVolume, resolveVolumeSpec } from './volume-spec-resolver.js'

/** The claim's `allocatedResourceStatuses['storage']` when it asks for a node resize anew. */
const NODE_RESIZE_PENDING = 'NodeResizePending'

export interface ExpansionCheckOptions {
  readonly dsw: DesiredStateOfWorld
  readonly asw: ActualStateOfWorld
  readonly objects: ObjectReader
  readonly logger: Logger
}

/**
 * A mounted, writable PV volume whose PV grew gets its desired size (the PV's capacity) and, when
 * unknown, its current size (the claim's reported capacity); the reconciler then expands it in
 * use. A claim that asks for a node resize anew (`NodeResizePending`) lets a resize that was held
 * back (a failed precondition, a status that did not ask) run again.
 */
export function checkVolumeFSResize(o: ExpansionCheckOptions, podName: UniquePodName, volumeName: UniqueVolumeName, entry: ResolvedVolume): void {
  const { dsw, asw } = o
  const pv = entry.spec.persistentVolume
  if (!pv || !entry.pvc || entry.spec.readOnly) return
  if (asw.getMountedVolumeForPod(podName, volumeName)?.mountState !== 'mounted') return
  const desired = storageOf(pv.spec?.capacity)
  if (desired !== undefined) dsw.updatePersistentVolumeSize(volumeName, desired)
  asw.initializeClaimSize(volumeName, storageOf(entry.pvc.status?.capacity))
  if (entry.pvc.status?.allocatedResourceStatuses?.storage === NODE_RESIZE_PENDING) asw.clearInUseExpansionError(volumeName)
}

/**
 * Re-reads the claim and PV of every mounted PV volume (only those `changed` names, when given)
 * and runs {@link checkVolumeFSResize} on them. A volume whose objects cannot be read is left for
 * the next check.
 */
export async function recheckVolumeSizes(o: ExpansionCheckOptions, changed?: ObjectReference): Promise<void> {
  const work: Promise<void>[] = []
  for (const vtm of o.dsw.getVolumesToMount()) {
    if (!vtm.spec.persistentVolume || (changed && !references(vtm, changed))) continue
    if (o.asw.getMountedVolumeForPod(vtm.podName, vtm.volumeName)?.mountState !== 'mounted') continue
    const volume = podVolumeOf(vtm)
    if (!volume) continue
    const block = isBlockSpec(vtm.spec)
    work.push(
      resolveVolumeSpec(o.objects, vtm.pod, volume, { mount: !block, device: block }).then(
        (entry) => checkVolumeFSResize(o, vtm.podName, vtm.volumeName, entry),
        (err: unknown) => o.logger.debug('Volume expansion check skipped', { volume: vtm.volumeName, err: errorMessage(err) }),
      ),
    )
  }
  await Promise.all(work)
}

function podVolumeOf(vtm: VolumeToMount): Volume | undefined {
  return vtm.pod.spec?.volumes?.find((v) => vtm.outerVolumeSpecNames.includes(v.name))
}

/** True when the volume is built from the changed claim or PV (kinds other than those: never). */
function references(vtm: VolumeToMount, changed: ObjectReference): boolean {
  const pv = vtm.spec.persistentVolume
  if (changed.kind === 'PersistentVolume') return pv?.metadata.name === changed.name
  if (changed.kind !== 'PersistentVolumeClaim') return false
  const ref = pv?.spec?.claimRef
  if (ref?.name === changed.name && (ref.namespace || 'default') === (changed.namespace ?? 'default')) return true
  return claimNameOf(vtm.pod, podVolumeOf(vtm)) === changed.name && (vtm.pod.metadata.namespace ?? 'default') === (changed.namespace ?? 'default')
}

function claimNameOf(pod: Pod, volume: Volume | undefined): string | undefined {
  if (volume?.persistentVolumeClaim) return volume.persistentVolumeClaim.claimName
  if (volume?.ephemeral) return `${pod.metadata.name ?? ''}-${volume.name}`
  return undefined
}
