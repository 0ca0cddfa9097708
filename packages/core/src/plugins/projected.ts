/**
 * projected volumes (`kubernetes.io/projected`, SPEC §7.6): several sources (secret, configMap,
 * downwardAPI, serviceAccountToken) in one directory on tmpfs, refreshed atomically on every pod
 * re-sync, service account tokens rotated at 80% of their lifetime.
 */
import type { VolumeProjection } from '../api/kubernetes.js'
import { KubevolError } from '../errors.js'
import { type AtomicWriterPluginOptions, type PayloadRequest, createAtomicWriterVolumePlugin } from './atomic-writer-volume.js'
import { configMapSourcePayload } from './config-map.js'
import { makeDownwardAPIPayload } from './downward-api.js'
import { DEFAULT_FILE_MODE, type Payload, aggregateErrors, mergePayloads } from './payload.js'
import type { VolumePlugin } from './plugin.js'
import { secretSourcePayload } from './secret.js'
import { DEFAULT_TOKEN_EXPIRATION_SECONDS, ServiceAccountTokenCache } from './service-account-tokens.js'

export const PROJECTED_PLUGIN_NAME = 'kubernetes.io/projected'

/** The projected plugin, which also tells when its cached tokens are due for rotation. */
export interface ProjectedPlugin extends VolumePlugin {
  /**
   * When the earliest cached service account token (of `podUID`, or of any pod) is due for
   * rotation, ms since the epoch; undefined when none is cached. A set-up at or after that time
   * writes a new token; one before reuses the cached token. The manager sets volumes up again when
   * their pod is re-synced (`waitForAttachAndMount`), so a caller that wants tokens fresh re-syncs
   * the pod at this time.
   */
  nextTokenRotation(podUID?: string): number | undefined
}

/**
 * The projected plugin. Sources are collected in order; every failing source is reported (all
 * errors together), and two sources projecting the same path fail with "conflicting duplicate
 * paths: X". A missing secret or configMap fails unless that source is `optional`.
 * serviceAccountToken sources need the context's `tokens` (else: an error naming the volume);
 * their files have mode 0600 when the pod has an fsGroup or a common runAsUser (then owned by
 * that user), else `defaultMode` (0644). clusterTrustBundle sources are not supported (an error).
 */
export function createProjectedPlugin(options: AtomicWriterPluginOptions = {}): ProjectedPlugin {
  let tokens: ServiceAccountTokenCache | undefined
  const base = createAtomicWriterVolumePlugin({
    name: PROJECTED_PLUGIN_NAME,
    sourceKey: 'projected',
    // A token is renewed with time (at 80 % of its life): only the remount period sees that.
    refreshOnEvents: (spec) => !(spec.volume?.projected?.sources ?? []).some((source) => source.serviceAccountToken !== undefined),
    medium: 'memory',
    nodeAllocatable: options.nodeAllocatable,
    async buildPayload(request) {
      const sources = request.spec.volume?.projected?.sources ?? []
      const parts: Payload[] = []
      const errors: unknown[] = []
      for (const source of sources) {
        try {
          parts.push(await projectSource(source, request, tokens, options))
        } catch (err) {
          errors.push(err)
        }
      }
      const error = aggregateErrors(errors)
      if (error) throw error
      return mergePayloads(parts)
    },
    onTearDown: (podUID) => tokens?.forgetPod(podUID),
  })
  return {
    ...base,
    init(context) {
      base.init?.(context)
      tokens = context.tokens ? new ServiceAccountTokenCache({ source: context.tokens, clock: context.clock, logger: context.logger }) : undefined
    },
    nextTokenRotation: (podUID) => tokens?.nextRotation(podUID),
  }
}

async function projectSource(
  source: VolumeProjection,
  { spec, pod, args, context }: PayloadRequest,
  tokens: ServiceAccountTokenCache | undefined,
  options: AtomicWriterPluginOptions,
): Promise<Payload> {
  const defaultMode = spec.volume?.projected?.defaultMode ?? DEFAULT_FILE_MODE
  const namespace = pod.metadata.namespace ?? 'default'
  if (source.secret) return secretSourcePayload(context, namespace, source.secret, defaultMode)
  if (source.configMap) return configMapSourcePayload(context, namespace, source.configMap, defaultMode)
  if (source.downwardAPI) return makeDownwardAPIPayload(pod, source.downwardAPI.items, defaultMode, options.nodeAllocatable)
  if (source.serviceAccountToken) {
    if (!tokens) {
      throw new KubevolError('Unsupported', `cannot set up projected volume ${spec.name}: serviceAccountToken needs a token source and none is configured`)
    }
    const { audience = '', expirationSeconds = DEFAULT_TOKEN_EXPIRATION_SECONDS, path } = source.serviceAccountToken
    const serviceAccountName = pod.spec?.serviceAccountName ?? 'default'
    const token = await tokens.get({ pod, serviceAccountName, audience, expirationSeconds, path })
    // With an fsGroup or a common runAsUser the file is 0600 (fsGroup then adds group read).
    const restricted = args.fsUser !== undefined || args.fsGroup !== undefined
    return new Map([[path, { data: token.token, mode: restricted ? 0o600 : defaultMode, fsUser: args.fsUser }]])
  }
  if (source.clusterTrustBundle) throw new KubevolError('Unsupported', 'clusterTrustBundle projected volume sources are not supported')
  return new Map()
}
