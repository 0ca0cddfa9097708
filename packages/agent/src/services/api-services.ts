/**
 * The services only API mode runs: the node status updater (`volumesInUse`) and the event sink
 * (core/v1 Events), and the pod finalizer the pod workers call. They reach the Kubernetes client only
 * through the dynamically loaded API-mode module they are given.
 */
import type { Pod } from '@kubevol/core'
import type { ResolvedAgentConfig } from '../config/options.js'
import type { EventStore } from '../events/event-store.js'
import type { KubeClients } from '../kube/kube-client.js'
import type { NodeStatusUpdater } from '../kube/node-status.js'
import type { AgentLogger } from '../logging/agent-logger.js'
import type { AgentMetrics } from '../metrics/agent-metrics.js'
import type { ApiWiring } from './mode-sources.js'
import { type ValueService, defineService } from './service.js'
import type { VolumeManagerService } from './volume-manager-service.js'

/** `nodes/<node>/status`: patched once states are synced and then every `nodeStatusPeriodMs`; first synced once the Node is registered. */
export function nodeStatusService(
  api: ApiWiring,
  o: { readonly config: ResolvedAgentConfig; readonly manager: VolumeManagerService; readonly logger: AgentLogger; readonly metrics: AgentMetrics },
): ValueService<NodeStatusUpdater> {
  const { registration } = api
  return defineService('node-status', {
    create: () =>
      api.kube.createNodeStatusUpdater({
        clients: api.clients,
        nodeName: o.config.nodeName,
        manager: o.manager.manager,
        periodMs: o.config.nodeStatusPeriodMs,
        logger: o.logger,
        onPatch: (result) => o.metrics.nodeStatusPatches.inc({ result }),
        nodeReady: () => registration.state === 'ready',
        onNodeMissing: () => registration.nodeMissing(),
      }),
    start: (updater) => {
      updater.start()
      void registration.ready.then(() => updater.sync())
    },
    quiesce: (updater) => updater.stop(),
    stop: (updater) => updater.stop(),
  })
}

/** Posts the stored events as core/v1 Events; at stop, waits up to the deadline for the posts in flight. */
export function eventSinkService(
  api: ApiWiring,
  o: { readonly config: ResolvedAgentConfig; readonly events: EventStore; readonly logger: AgentLogger; readonly metrics: AgentMetrics },
): ValueService<ReturnType<ApiWiring['kube']['createEventSink']>> {
  return defineService('event-sink', {
    create: () => api.kube.createEventSink({ clients: api.clients, nodeName: o.config.nodeName, store: o.events, logger: o.logger, onPost: (result) => o.metrics.eventPosts.inc({ result }) }),
    start: (sink) => sink.start(),
    stop: async (sink, deadlineMs) => {
      sink.stop()
      await Promise.race([sink.flush(), new Promise((resolve) => setTimeout(resolve, deadlineMs).unref())])
    },
  })
}

/**
 * Deletes the object of a pod being deleted (grace 0, this UID only), as the kubelet's status
 * manager does. The pod workers call it only for a pod with a deletion timestamp.
 */
export function finalizer(clients: KubeClients, statusCodeOf: (err: unknown) => number | undefined, logger: AgentLogger): (pod: Pod) => Promise<void> {
  return async (pod) => {
    const { name, namespace, uid } = pod.metadata
    if (!name || !uid) return
    try {
      await clients.core.deleteNamespacedPod({ name, namespace: namespace ?? 'default', gracePeriodSeconds: 0, body: { gracePeriodSeconds: 0, preconditions: { uid } } })
      logger.info('Deleted terminated pod', { pod: `${namespace}/${name}`, uid })
    } catch (err) {
      // Gone already, or replaced by a pod of the same name.
      if (statusCodeOf(err) === 404 || statusCodeOf(err) === 409) return
      throw err
    }
  }
}
