/**
 * The pod source and object reader of the mode, and the services that run them: in static mode a
 * manifest directory; in API mode the Node registration, the pods' list and watch and the Node's watch.
 */
import type { ObjectReader, PodSource, TokenSource } from '@kubevol/core'
import type { ResolvedAgentConfig } from '../config/options.js'
import type { KubeClients } from '../kube/kube-client.js'
import type { NodeRegistration } from '../kube/node-registration.js'
import type { AgentLogger } from '../logging/agent-logger.js'
import { type ManifestSource, createManifestSource } from '../sources/manifest-source.js'
import { type Service, defineService } from './service.js'

/** The API-mode module, loaded dynamically (`./kube/api-mode.ts`). */
type ApiMode = typeof import('../kube/api-mode.js')

/** What API mode adds: the client module, the clients and the Node registration. */
export interface ApiWiring {
  readonly kube: ApiMode
  readonly clients: KubeClients
  readonly registration: NodeRegistration
  /** The node's certificate, with TLS bootstrapping. */
  readonly credentials?: InstanceType<ApiMode['NodeCredentials']>
}

export interface ModeSources {
  readonly pods: PodSource
  readonly objects: ObjectReader
  readonly tokens?: TokenSource
  readonly manifests?: ManifestSource
  readonly api?: ApiWiring
  /** Started before the CSI drivers: the Node registration (the readiness check `node`). */
  readonly early: readonly Service[]
  /** Started once the manager runs, so that its populator sees the first pods. */
  readonly source: Service
}

/** Static mode: the manifest directory is the pod source and the object reader. */
export function staticSources(config: ResolvedAgentConfig, logger: AgentLogger): ModeSources {
  const source = createManifestSource({ dir: config.manifestDir, nodeName: config.nodeName, rescanMs: config.manifestRescanMs, logger })
  if (config.controllerAttachDetach) logger.warn('controllerAttachDetach in static mode: attachable volumes wait for a controller that is not there')
  return {
    pods: source.pods,
    objects: source.objects,
    manifests: source,
    early: [],
    source: defineService('manifests', { create: () => source, start: (s) => s.start(), stop: (s) => s.stop() }),
  }
}

export interface ApiSourcesOptions {
  readonly config: ResolvedAgentConfig
  readonly kube: ApiMode
  readonly clients: KubeClients
  readonly logger: AgentLogger
  readonly clock: Parameters<ApiMode['createApiObjectReader']>[0]['clock']
  readonly onRestart: (resource: string, reason: string) => void
  /**
   * TLS bootstrapping: the node's credentials, started first of the API services (`node-credentials`
   * in /readyz); while they hold no certificate, the pod and Node lists wait for one, and the start
   * does not wait for those lists.
   */
  readonly credentials?: InstanceType<ApiMode['NodeCredentials']>
}

/**
 * API mode: the pods bound to the node from a watch, the ConfigMaps and Secrets they reference from
 * a watch each (with the default strategy), other objects by GET (the Node from a watch), tokens by
 * TokenRequest.
 */
export function apiSources(options: ApiSourcesOptions): ModeSources {
  const { config, kube, clients, logger, clock, onRestart, credentials } = options
  const registration = kube.createNodeRegistration({
    clients,
    nodeName: config.nodeName,
    register: config.registerNode,
    labels: config.nodeLabels,
    controllerAttachDetach: config.controllerAttachDetach,
    retryMs: config.watchRetryMs,
    logger,
  })
  const podSource = kube.createApiPodSource({ clients, nodeName: config.nodeName, retryMs: config.watchRetryMs, logger, onRestart })
  const reader = kube.createApiObjectReader({
    clients,
    nodeName: config.nodeName,
    ttlMs: config.objectCacheTtlMs,
    changeDetection: config.configMapAndSecretChangeDetectionStrategy,
    pods: podSource.pods,
    retryMs: config.watchRetryMs,
    logger,
    clock,
    onRestart,
  })
  return {
    pods: podSource.pods,
    objects: reader,
    tokens: kube.createApiTokenSource(clients, clock),
    api: { kube, clients, registration, ...(credentials ? { credentials } : {}) },
    early: [
      ...(credentials
        ? [
            defineService('node-credentials', {
              create: () => credentials,
              start: (c) => c.start(),
              ready: (c) => c.check(),
              stop: (c) => c.stop(),
            }),
          ]
        : []),
      defineService('node', {
        create: () => registration,
        start: (r) => r.start(),
        ready: (r) => {
          const check = r.check()
          return check.ok ? undefined : (check.message ?? 'not ready')
        },
        stop: (r) => r.stop(),
      }),
    ],
    source: defineService('api-watch', {
      create: () => podSource,
      start: async () => {
        // Before the pods arrive, so the first pods' objects are watched from the start.
        reader.objectWatches.start()
        const firstLists = Promise.all([podSource.informer.start(), reader.nodeInformer.start()])
        // No certificate yet (TLS bootstrapping): the lists wait for it, the rest of the agent does not.
        if (credentials && credentials.current() === undefined) {
          firstLists.catch((err: unknown) => logger.warn('The first list failed', { err: String(err) }))
          return
        }
        await firstLists
      },
      ready: (s) => (s.informer.synced() ? undefined : 'no pod list has arrived yet'),
      stop: async (s) => {
        try {
          reader.objectWatches.stop()
          await reader.nodeInformer.stop()
        } finally {
          await s.informer.stop()
        }
      },
    }),
  }
}
