/**
 * API mode's pod source: the pods bound to this node, listed and watched with the field selector
 * `spec.nodeName=<node>` (the only pod list the Node authorizer allows a node). Ready once the first
 * list has arrived; watches restart after errors and after 410 Expired.
 */
import type { V1Pod } from '@kubernetes/client-node'
import type { Logger, Pod } from '@kubevol/core'
import { type PodStore, createPodStore } from '../sources/pod-store.js'
import { type Informer, createInformer } from './informer.js'
import type { KubeClients } from './kube-client.js'

export interface ApiPodSourceOptions {
  readonly clients: KubeClients
  readonly nodeName: string
  /** First delay before a failed list or watch is restarted. */
  readonly retryMs: number
  readonly logger: Logger
  readonly onRestart?: (resource: string, reason: string) => void
}

export interface ApiPodSource {
  readonly pods: PodStore
  readonly informer: Informer
}

/** Creates the pod source; `informer.start()` begins listing. */
export function createApiPodSource(options: ApiPodSourceOptions): ApiPodSource {
  const { clients, nodeName } = options
  const pods = createPodStore()
  const fieldSelector = `spec.nodeName=${nodeName}`
  const asPod = (pod: V1Pod): Pod => pod as unknown as Pod
  const informer = createInformer<V1Pod>({
    resource: 'pods',
    path: '/api/v1/pods',
    watch: clients.watch,
    list: () => clients.core.listPodForAllNamespaces({ fieldSelector }),
    fieldSelector,
    retryMs: options.retryMs,
    logger: options.logger,
    onList(items) {
      pods.replaceAll(items.map(asPod))
      pods.setReady(true)
    },
    onUpsert: (pod) => pods.set(asPod(pod)),
    onDelete: (pod) => pod.metadata?.uid !== undefined && pods.delete(pod.metadata.uid),
    onRestart: (reason) => options.onRestart?.('pods', reason),
  })
  return { pods, informer }
}
