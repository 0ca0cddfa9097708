/**
 * Pieces of CSI requests as the kubelet builds them: access mode, pod info, secrets, names.
 */
import type { CSIDriver, Pod } from '../../api/kubernetes.js'
import type { VolumeSpec } from '../../api/volume-spec.js'
import type { ObjectReader } from '../../populator/sources.js'
import { decodeBase64 } from '../payload.js'
import type { TokenSource } from '../token-source.js'
import { decodeUtf8 } from '../../text.js'
import type { CsiAccessMode, CsiNodeCapability } from './csi-driver.js'
import { sha256Hex } from './sha256.js'

/** What a CSI spec says, for a PV or an inline (ephemeral) volume. */
export interface CsiSource {
  readonly driver: string
  readonly ephemeral: boolean
  /** The PV's handle; for inline volumes "" (derived per pod, see {@link ephemeralVolumeHandle}). */
  readonly volumeHandle: string
  readonly fsType: string
  readonly readOnly: boolean
  readonly volumeAttributes: Readonly<Record<string, string>>
  readonly nodeStageSecretRef?: { readonly name?: string; readonly namespace?: string }
  readonly nodePublishSecretRef?: { readonly name?: string; readonly namespace?: string }
  readonly nodeExpandSecretRef?: { readonly name?: string; readonly namespace?: string }
}

/** The CSI source of a spec, or undefined when it has none. */
export function csiSourceOf(spec: VolumeSpec): CsiSource | undefined {
  const pv = spec.persistentVolume?.spec?.csi
  if (pv) {
    return {
      driver: pv.driver,
      ephemeral: false,
      volumeHandle: pv.volumeHandle,
      fsType: pv.fsType ?? '',
      readOnly: spec.readOnly || pv.readOnly === true,
      volumeAttributes: pv.volumeAttributes ?? {},
      nodeStageSecretRef: pv.nodeStageSecretRef,
      nodePublishSecretRef: pv.nodePublishSecretRef,
      nodeExpandSecretRef: pv.nodeExpandSecretRef,
    }
  }
  const inline = spec.volume?.csi
  if (inline) {
    return {
      driver: inline.driver,
      ephemeral: true,
      volumeHandle: '',
      fsType: inline.fsType ?? '',
      readOnly: spec.readOnly || inline.readOnly === true,
      volumeAttributes: inline.volumeAttributes ?? {},
      nodePublishSecretRef: inline.nodePublishSecretRef,
    }
  }
  return undefined
}

/** The kubelet's handle of an inline volume: `csi-` + sha256(podUID + volume name). */
export function ephemeralVolumeHandle(podUID: string, specName: string): string {
  return `csi-${sha256Hex(`${podUID}${specName}`)}`
}

/** The VolumeAttachment name: `csi-` + sha256(volumeHandle + driver + nodeName). */
export function attachmentName(volumeHandle: string, driver: string, nodeName: string): string {
  return `csi-${sha256Hex(`${volumeHandle}${driver}${nodeName}`)}`
}

/**
 * The CSI access mode of the PV's first access mode (RWO when none or inline). RWO and RWOP use
 * the single-node multi/single writer modes when the driver has SINGLE_NODE_MULTI_WRITER.
 */
export function accessModeOf(spec: VolumeSpec, capabilities: readonly CsiNodeCapability[]): CsiAccessMode {
  const mode = spec.persistentVolume?.spec?.accessModes?.[0] ?? 'ReadWriteOnce'
  const multiWriter = capabilities.includes('SINGLE_NODE_MULTI_WRITER')
  switch (mode) {
    case 'ReadOnlyMany':
      return 'MULTI_NODE_READER_ONLY'
    case 'ReadWriteMany':
      return 'MULTI_NODE_MULTI_WRITER'
    case 'ReadWriteOncePod':
      return multiWriter ? 'SINGLE_NODE_SINGLE_WRITER' : 'SINGLE_NODE_WRITER'
    default:
      return multiWriter ? 'SINGLE_NODE_MULTI_WRITER' : 'SINGLE_NODE_WRITER'
  }
}

/** The pod info attributes of `podInfoOnMount` drivers (`csi.storage.k8s.io/...`). */
export function podInfoAttributes(pod: Pod, ephemeral: boolean): Record<string, string> {
  return {
    'csi.storage.k8s.io/pod.name': pod.metadata.name ?? '',
    'csi.storage.k8s.io/pod.namespace': pod.metadata.namespace ?? '',
    'csi.storage.k8s.io/pod.uid': pod.metadata.uid ?? '',
    'csi.storage.k8s.io/serviceAccount.name': pod.spec?.serviceAccountName ?? 'default',
    'csi.storage.k8s.io/ephemeral': String(ephemeral),
  }
}

/**
 * `csi.storage.k8s.io/serviceAccount.tokens` for a CSIDriver with `tokenRequests`: JSON of
 * audience → { token, expirationTimestamp }. Undefined when the driver asks for none.
 */
export async function serviceAccountTokens(
  tokens: TokenSource | undefined,
  object: CSIDriver | null,
  pod: Pod,
): Promise<string | undefined> {
  const requests = object?.spec?.tokenRequests ?? []
  if (requests.length === 0) return undefined
  if (!tokens) throw new Error(`CSIDriver ${object?.metadata.name ?? ''} requests service account tokens, but this node cannot issue them`)
  const out: Record<string, { token: string; expirationTimestamp: string }> = {}
  for (const request of requests) {
    const token = await tokens.getToken({
      pod,
      serviceAccountName: pod.spec?.serviceAccountName ?? 'default',
      audience: request.audience,
      expirationSeconds: request.expirationSeconds ?? 3600,
    })
    out[request.audience] = { token: token.token, expirationTimestamp: new Date(token.expiresAt).toISOString() }
  }
  return JSON.stringify(out)
}

/** The lifecycle modes a CSIDriver allows (Persistent when it says none or does not exist). */
export function lifecycleModesOf(object: CSIDriver | null | undefined): readonly string[] {
  const modes = object?.spec?.volumeLifecycleModes
  return modes && modes.length > 0 ? modes : ['Persistent']
}

/**
 * The Secret a ref names, decoded to strings. No ref: no secrets. The namespace defaults to
 * `defaultNamespace` (the pod's, for inline volumes).
 */
export async function readSecrets(
  objects: ObjectReader,
  ref: { readonly name?: string; readonly namespace?: string } | undefined,
  defaultNamespace: string,
): Promise<Record<string, string>> {
  if (!ref?.name) return {}
  if (!objects.getSecret) throw new Error('no secret reader configured')
  const secret = await objects.getSecret(ref.namespace ?? defaultNamespace, ref.name)
  const out: Record<string, string> = { ...(secret.stringData ?? {}) }
  for (const [key, value] of Object.entries(secret.data ?? {})) out[key] = decodeUtf8(decodeBase64(value))
  return out
}
