/**
 * Turns a pod volume into a volume spec (SPEC §4.3): inline volumes as they are; claims (and
 * generic ephemeral volumes) through PVC → PV with the kubelet's checks and error texts.
 */
import type { PersistentVolume, PersistentVolumeClaim, Pod, Volume } from '../api/kubernetes.js'
import { podDescription } from '../api/names.js'
import { type VolumeSpec, specFromPersistentVolume, specFromVolume } from '../api/volume-spec.js'
import { VolumeSpecError, errorMessage } from '../errors.js'
import type { ObjectReader } from './sources.js'

type ClaimRef = NonNullable<NonNullable<PersistentVolume['spec']>['claimRef']>

export interface ResolvedVolume {
  readonly spec: VolumeSpec
  /** The claim, for expansion checks; absent for inline volumes. */
  readonly pvc?: PersistentVolumeClaim
}

/** Resolves one pod volume. Throws {@link VolumeSpecError} with the kubelet's message. */
export async function resolveVolumeSpec(
  objects: ObjectReader,
  pod: Pod,
  volume: Volume,
  usedAs: { mount: boolean; device: boolean },
): Promise<ResolvedVolume> {
  const claimSource = volume.persistentVolumeClaim
  const ephemeral = volume.ephemeral !== undefined
  if (!claimSource && !ephemeral) return { spec: specFromVolume(volume) }

  const namespace = pod.metadata.namespace ?? 'default'
  const claimName = claimSource ? claimSource.claimName : `${pod.metadata.name ?? ''}-${volume.name}`
  const readOnly = claimSource?.readOnly ?? false
  const wrap = (message: string, cause?: unknown): VolumeSpecError =>
    new VolumeSpecError(`error processing PVC ${namespace}/${claimName}: ${message}`, { cause })

  let pvc: PersistentVolumeClaim
  try {
    pvc = await objects.getPersistentVolumeClaim(namespace, claimName)
  } catch (err) {
    throw wrap(`failed to fetch PVC from API server: ${errorMessage(err)}`, err)
  }
  if (pvc.metadata.deletionTimestamp) throw wrap('PVC is being deleted')
  if (pvc.status?.phase !== 'Bound') throw wrap('PVC is not bound')
  const pvName = pvc.spec?.volumeName
  if (!pvName) throw wrap('PVC has empty pvc.Spec.VolumeName')
  if (ephemeral) {
    const owner = pvc.metadata.ownerReferences?.find((ref) => ref.controller)
    if (owner?.uid !== pod.metadata.uid) {
      throw new VolumeSpecError(`PVC ${namespace}/${claimName} was not created for pod ${podDescription(pod)} (pod is not owner)`)
    }
  }
  let pv: PersistentVolume
  try {
    pv = await objects.getPersistentVolume(pvName)
  } catch (err) {
    throw wrap(`failed to fetch PV ${pvName} from API server: ${errorMessage(err)}`, err)
  }
  const claimRef = pv.spec?.claimRef
  if (!claimRef) throw wrap(`found PV object ${pvName} but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim`)
  const mismatch = claimRefMismatch(pvName, claimRef, pvc, namespace, claimName)
  if (mismatch) throw wrap(mismatch)
  const spec = specFromPersistentVolume(pv, readOnly)
  const mode = pv.spec?.volumeMode ?? 'Filesystem'
  if (usedAs.mount && mode === 'Block') {
    throw new VolumeSpecError(`volume ${volume.name} has volumeMode ${mode}, but is specified in volumeMounts`)
  }
  if (usedAs.device && mode !== 'Block') {
    throw new VolumeSpecError(`volume ${volume.name} has volumeMode ${mode}, but is specified in volumeDevices`)
  }
  return { spec, pvc }
}

/**
 * Why the PV's claimRef does not name `pvc`, or null when it does. The kubelet compares UIDs only
 * (an API server sets both); objects written in a manifest usually carry none, and two missing UIDs
 * are not a match. So: UIDs are compared when both are set, and the claimRef's namespace/name must
 * name the claim whenever it has a name (a claimRef without a namespace means `default`, as a
 * manifest object without one). A claimRef with neither a matching UID nor a name names no claim.
 */
function claimRefMismatch(pvName: string, ref: ClaimRef, pvc: PersistentVolumeClaim, namespace: string, claimName: string): string | null {
  const claimUID = pvc.metadata.uid
  if (ref.uid && claimUID && ref.uid !== claimUID) {
    return `found PV object ${pvName} but its pv.Spec.ClaimRef.UID ${ref.uid} does not point to claim.UID ${claimUID}`
  }
  const uidsMatch = Boolean(ref.uid && claimUID)
  if (!ref.name && uidsMatch) return null
  const claimNamespace = pvc.metadata.namespace ?? namespace
  const refNamespace = ref.namespace || 'default'
  if (ref.name === pvc.metadata.name && refNamespace === claimNamespace) return null
  return `found PV object ${pvName} but its pv.Spec.ClaimRef ${refNamespace}/${ref.name ?? ''} does not point to claim ${claimNamespace}/${pvc.metadata.name ?? claimName}`
}
