/** The size limit a desired volume carries to its set-up (SPEC §3.2.2). */
import type { Pod } from '../api/kubernetes.js'
import { parseQuantity } from '../api/quantity.js'
import type { VolumeSpec } from '../api/volume-spec.js'

/**
 * Size limit of a local ephemeral volume (SPEC §3.2.2): the pod's ephemeral-storage limit (sum of its
 * containers'), or the emptyDir `sizeLimit` when set and smaller (or when the pod has none). Only
 * disk-backed emptyDir and configMap volumes have one.
 */
export function desiredSizeLimitOf(pod: Pod, spec: VolumeSpec): number | undefined {
  const volume = spec.volume
  if (!volume) return undefined
  const diskEmptyDir = volume.emptyDir !== undefined && (volume.emptyDir.medium ?? '') === ''
  if (!diskEmptyDir && !volume.configMap) return undefined
  let podLimit = 0
  for (const c of pod.spec?.containers ?? []) {
    const limit = c.resources?.limits?.['ephemeral-storage']
    if (limit !== undefined) podLimit += parseQuantity(limit)
  }
  const sizeLimit = volume.emptyDir?.sizeLimit === undefined ? 0 : parseQuantity(volume.emptyDir.sizeLimit)
  if (diskEmptyDir && sizeLimit > 0 && (podLimit === 0 || sizeLimit < podLimit)) return sizeLimit
  return podLimit
}
