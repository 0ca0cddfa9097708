/**
 * A volume spec (kubelet `volume.Spec`): either an inline pod volume or a PersistentVolume that a
 * claim resolved to, plus whether the pod mounts it read-only.
 */
import type { PersistentVolume, Volume } from './kubernetes.js'

export interface VolumeSpec {
  /** The inner name: the pod volume's name, or the PV's name. Names the directory on disk. */
  readonly name: string
  readonly volume?: Volume
  readonly persistentVolume?: PersistentVolume
  /** Read-only as the claim or the volume says (`persistentVolumeClaim.readOnly`). */
  readonly readOnly: boolean
}

/** The spec of an inline pod volume. */
export function specFromVolume(volume: Volume): VolumeSpec {
  return { name: volume.name, volume, readOnly: false }
}

/** The spec of a PV reached through a claim. */
export function specFromPersistentVolume(pv: PersistentVolume, readOnly: boolean): VolumeSpec {
  return { name: pv.metadata.name ?? '', persistentVolume: pv, readOnly }
}

/** True only for a PV with `volumeMode: Block`; inline volumes are always file systems. */
export function isBlockSpec(spec: VolumeSpec): boolean {
  return spec.persistentVolume?.spec?.volumeMode === 'Block'
}

/** The PV's access modes (empty for inline volumes). */
export function accessModesOf(spec: VolumeSpec): readonly string[] {
  return spec.persistentVolume?.spec?.accessModes ?? []
}

/** Mount options from the PV's `mountOptions` and the `volume.beta.kubernetes.io/mount-options` annotation. */
export function mountOptionsOf(spec: VolumeSpec): string[] {
  const pv = spec.persistentVolume
  if (!pv) return []
  const options = [...(pv.spec?.mountOptions ?? [])]
  const annotation = pv.metadata.annotations?.['volume.beta.kubernetes.io/mount-options']
  if (annotation) options.push(...annotation.split(',').map((o) => o.trim()).filter(Boolean))
  return options
}

/**
 * Whether the volume may be attached to several nodes at once (SPEC §6.1 `IsMultiAttachAllowed`):
 * inline volumes yes, PVs with no access modes or with RWX/ROX yes, RWO/RWOP no.
 */
export function isMultiAttachAllowed(spec: VolumeSpec | undefined): boolean {
  if (!spec?.persistentVolume) return true
  const modes = accessModesOf(spec)
  if (modes.length === 0) return true
  return modes.includes('ReadWriteMany') || modes.includes('ReadOnlyMany')
}

/** The PV's `pv.beta.kubernetes.io/gid` annotation, or "". */
export function volumeGidValueOf(spec: VolumeSpec): string {
  return spec.persistentVolume?.metadata.annotations?.['pv.beta.kubernetes.io/gid'] ?? ''
}
