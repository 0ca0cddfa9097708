/**
 * Which pods read an object through their volumes: a changed ConfigMap or Secret sets up again the
 * volumes of the pods that reference it, not every configMap-like volume on the node.
 */
import type { Pod } from '../api/kubernetes.js'
import type { ObjectReference } from './sources.js'

/** The object kinds a pod's volumes read by name from its namespace. */
export function isVolumeContentKind(kind: string): kind is 'ConfigMap' | 'Secret' {
  return kind === 'ConfigMap' || kind === 'Secret'
}

/**
 * True when a volume of `pod` reads `ref`, a ConfigMap or Secret of the pod's namespace: a
 * configMap or secret volume, or a projected volume with such a source. False for other kinds.
 */
export function podVolumesRead(pod: Pod, ref: ObjectReference): boolean {
  if (!isVolumeContentKind(ref.kind) || (pod.metadata.namespace ?? 'default') !== (ref.namespace ?? 'default')) return false
  const configMap = ref.kind === 'ConfigMap'
  for (const volume of pod.spec?.volumes ?? []) {
    if (configMap ? volume.configMap?.name === ref.name : volume.secret?.secretName === ref.name) return true
    for (const source of volume.projected?.sources ?? []) {
      if ((configMap ? source.configMap?.name : source.secret?.name) === ref.name) return true
    }
  }
  return false
}
