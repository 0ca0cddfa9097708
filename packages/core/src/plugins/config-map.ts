/**
 * configMap volumes (`kubernetes.io/configmap`, SPEC §7.6): the keys of a ConfigMap as files, on the
 * node's disk, refreshed atomically on every pod re-sync.
 */
import type { ConfigMap, KeyToPath } from '../api/kubernetes.js'
import { createAtomicWriterVolumePlugin, readReferencedObject } from './atomic-writer-volume.js'
import { DEFAULT_FILE_MODE, type Payload, decodeBase64Values, keyToPathPayload } from './payload.js'
import type { VolumePlugin, VolumePluginContext } from './plugin.js'

export const CONFIG_MAP_PLUGIN_NAME = 'kubernetes.io/configmap'

/**
 * The files of a ConfigMap (kubelet `configmap.MakePayload`): `data` as UTF-8 and `binaryData`
 * (base64 in JSON) as bytes; `items` pick keys and paths. A missing object (`undefined`) projects
 * nothing. Throws "configmap references non-existent config key: X" for a listed key the
 * ConfigMap lacks, unless `optional`, and on `binaryData` that is not base64.
 */
export function makeConfigMapPayload(
  configMap: ConfigMap | undefined,
  items: readonly KeyToPath[] | undefined,
  defaultMode: number,
  optional: boolean,
): Payload {
  const entries = new Map<string, Uint8Array | string>(Object.entries(configMap?.data ?? {}))
  const name = configMap?.metadata.name ?? ''
  for (const [key, bytes] of decodeBase64Values(configMap?.binaryData, `configmap "${name}" binaryData`)) entries.set(key, bytes)
  return keyToPathPayload(entries, items, defaultMode, optional, (key) => `configmap references non-existent config key: ${key}`)
}

/** A ConfigMap reference: a configMap volume, or a configMap source of a projected volume. */
export interface ConfigMapReference {
  readonly name?: string
  readonly items?: readonly KeyToPath[]
  readonly optional?: boolean
}

/**
 * Reads the referenced ConfigMap of the pod's namespace and projects it. A missing ConfigMap fails
 * with `configmap "name" not found` (the kubelet's text, whichever reader served it) unless
 * `optional` (then nothing is projected). Needs an ObjectReader with `getConfigMap`.
 */
export async function configMapSourcePayload(
  context: VolumePluginContext,
  namespace: string,
  source: ConfigMapReference,
  defaultMode: number,
): Promise<Payload> {
  const optional = source.optional ?? false
  const read = context.objects.getConfigMap?.bind(context.objects)
  const configMap = await readReferencedObject(read, 'configmap', namespace, source.name ?? '', optional)
  return makeConfigMapPayload(configMap, source.items, defaultMode, optional)
}

/** The configMap plugin, on the node's disk; `defaultMode` defaults to 0644. See {@link configMapSourcePayload}. */
export function createConfigMapPlugin(): VolumePlugin {
  return createAtomicWriterVolumePlugin({
    name: CONFIG_MAP_PLUGIN_NAME,
    sourceKey: 'configMap',
    // From one object: its events say when the files change.
    refreshOnEvents: () => true,
    medium: 'disk',
    buildPayload: ({ spec, pod, context }) =>
      configMapSourcePayload(context, pod.metadata.namespace ?? 'default', spec.volume?.configMap ?? {}, spec.volume?.configMap?.defaultMode ?? DEFAULT_FILE_MODE),
  })
}
