/**
 * secret volumes (`kubernetes.io/secret`, SPEC §7.6): the keys of a Secret as files, on tmpfs so
 * secret material never touches the node's disk, refreshed atomically on every pod re-sync.
 */
import type { KeyToPath, Secret } from '../api/kubernetes.js'
import { encodeUtf8 } from '../text.js'
import { type AtomicWriterPluginOptions, createAtomicWriterVolumePlugin, readReferencedObject } from './atomic-writer-volume.js'
import { DEFAULT_FILE_MODE, type Payload, decodeBase64Values, keyToPathPayload } from './payload.js'
import type { VolumePlugin, VolumePluginContext } from './plugin.js'

export const SECRET_PLUGIN_NAME = 'kubernetes.io/secret'

/**
 * The files of a Secret (kubelet `secret.MakePayload`): `data` is base64 (as in JSON) and decoded;
 * `stringData` (write-only in the API, but present in manifests) is UTF-8 and wins over `data`, as
 * the API server merges it. A missing object (`undefined`) projects nothing. Throws "references
 * non-existent secret key: X" for a listed key the Secret lacks, unless `optional`, and on `data`
 * that is not base64.
 */
export function makeSecretPayload(
  secret: Secret | undefined,
  items: readonly KeyToPath[] | undefined,
  defaultMode: number,
  optional: boolean,
): Payload {
  const entries = new Map<string, Uint8Array | string>(decodeBase64Values(secret?.data, `secret "${secret?.metadata.name ?? ''}" data`))
  for (const [key, text] of Object.entries(secret?.stringData ?? {})) entries.set(key, encodeUtf8(text))
  return keyToPathPayload(entries, items, defaultMode, optional, (key) => `references non-existent secret key: ${key}`)
}

/** A Secret reference: a projected volume's secret source (a secret volume names it `secretName`). */
export interface SecretReference {
  readonly name?: string
  readonly items?: readonly KeyToPath[]
  readonly optional?: boolean
}

/**
 * Reads the referenced Secret of the pod's namespace and projects it. A missing Secret fails with
 * `secret "name" not found` (the kubelet's text, whichever reader served it) unless `optional`
 * (then nothing is projected). Needs an ObjectReader with `getSecret`.
 */
export async function secretSourcePayload(context: VolumePluginContext, namespace: string, source: SecretReference, defaultMode: number): Promise<Payload> {
  const optional = source.optional ?? false
  const secret = await readReferencedObject(context.objects.getSecret?.bind(context.objects), 'secret', namespace, source.name ?? '', optional)
  return makeSecretPayload(secret, source.items, defaultMode, optional)
}

/**
 * The secret plugin: the volume directory is a tmpfs mount (sized like a memory emptyDir: the
 * smallest of `nodeAllocatable.memory` (default 8 GiB) and the pod's memory limits);
 * `defaultMode` defaults to 0644. See {@link secretSourcePayload}.
 */
export function createSecretPlugin(options: AtomicWriterPluginOptions = {}): VolumePlugin {
  return createAtomicWriterVolumePlugin({
    name: SECRET_PLUGIN_NAME,
    sourceKey: 'secret',
    // From one object: its events say when the files change.
    refreshOnEvents: () => true,
    medium: 'memory',
    nodeAllocatable: options.nodeAllocatable,
    buildPayload({ spec, pod, context }) {
      const { secretName, defaultMode = DEFAULT_FILE_MODE, ...rest } = spec.volume?.secret ?? {}
      return secretSourcePayload(context, pod.metadata.namespace ?? 'default', { ...rest, name: secretName }, defaultMode)
    },
  })
}
