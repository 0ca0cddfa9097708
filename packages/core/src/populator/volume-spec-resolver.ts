/**
 * Turns a pod volume into a volume spec (SPEC §4.3): inline volumes as they are; claims (and
 * generic ephemeral volumes) through PVC → PV with the kubelet's checks and error texts.
 */
import type { PersistentVolume, PersistentVolumeClaim, Pod, Volume } from '../api/kubernetes.js'
import { podDescription } from '../api/names.js'
import { type VolumeSpec, specFromPersistentVolume, specFromVolume } from '../api/volume-spec.js'
import { VolumeSpecError, errorMessage } from '../errors.js'
import type { ObjectReader } from './sources.js'

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
  if (claimRef.uid !== pvc.metadata.uid) {
    throw wrap(`found PV object ${pvName} but its pv.Spec.ClaimRef.UID ${claimRef.uid ?? ''} does not point to claim.UID ${pvc.metadata.uid ?? ''}`)
  }
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
