/**
 * downwardAPI volumes (`kubernetes.io/downward-api`, SPEC §7.6): pod fields and container resources
 * as files, refreshed atomically on every pod re-sync (a label change shows up in the file).
 */
import type { DownwardAPIVolumeFile, Pod } from '../api/kubernetes.js'
import { type AtomicWriterPluginOptions, type ResourceList, createAtomicWriterVolumePlugin } from './atomic-writer-volume.js'
import { containerResourceValue, podFieldValue } from './downward-api-fields.js'
import { DEFAULT_FILE_MODE, type FileProjection, type Payload, aggregateErrors, cleanPayloadPath } from './payload.js'
import type { VolumePlugin } from './plugin.js'

export const DOWNWARD_API_PLUGIN_NAME = 'kubernetes.io/downward-api'

/**
 * The files of downward API `items` (kubelet `downwardapi.CollectData`): each with its `fieldRef`
 * or `resourceFieldRef` value and its mode or `defaultMode`. Every item is tried; the errors of
 * all failing items are thrown together ("[a, b]" when more than one).
 */
export function makeDownwardAPIPayload(
  pod: Pod,
  items: readonly DownwardAPIVolumeFile[] | undefined,
  defaultMode: number,
  nodeAllocatable?: ResourceList,
): Payload {
  const payload = new Map<string, FileProjection>()
  const errors: unknown[] = []
  for (const item of items ?? []) {
    let data = ''
    try {
      if (item.fieldRef) data = podFieldValue(pod, item.fieldRef.fieldPath)
      else if (item.resourceFieldRef) data = containerResourceValue(pod, item.resourceFieldRef, nodeAllocatable)
    } catch (err) {
      errors.push(err)
    }
    payload.set(cleanPayloadPath(item.path), { data, mode: item.mode ?? defaultMode })
  }
  const error = aggregateErrors(errors)
  if (error) throw error
  return payload
}

/**
 * The downwardAPI plugin. Like the kubelet, it keeps the files on tmpfs (the kubelet wraps a
 * `medium: Memory` emptyDir; SPEC §7.6 says disk, see docs/plugins-projected.md).
 * `options.nodeAllocatable` supplies limits a container does not set.
 */
export function createDownwardAPIPlugin(options: AtomicWriterPluginOptions = {}): VolumePlugin {
  return createAtomicWriterVolumePlugin({
    name: DOWNWARD_API_PLUGIN_NAME,
    sourceKey: 'downwardAPI',
    // From the pod alone: its events say when the files change.
    refreshOnEvents: () => true,
    medium: 'memory',
    nodeAllocatable: options.nodeAllocatable,
    async buildPayload({ spec, pod }) {
      const source = spec.volume?.downwardAPI ?? {}
      return makeDownwardAPIPayload(pod, source.items, source.defaultMode ?? DEFAULT_FILE_MODE, options.nodeAllocatable)
    },
  })
}
