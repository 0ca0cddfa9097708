/**
 * @kubevol/agent/kube: the agent's Kubernetes API parts (clients, informers, the API pod source and
 * object reader, node status, events), for embedders that wire API mode themselves.
 *
 * A subpath of its own because these modules load @kubernetes/client-node (about 0.6 s and 90 MB
 * of start-up): the main entry, and so `kubevol --help` and static mode, never load it; `startAgent`
 * loads it only in API mode.
 */
export type { KubeClients } from './kube-client.js'
export { MERGE_PATCH, createKubeClients, loadKubeConfig } from './kube-client.js'
export type { Informer, InformerOptions } from './informer.js'
export { createInformer } from './informer.js'
export type { ApiPodSource, ApiPodSourceOptions } from './api-pod-source.js'
export { createApiPodSource } from './api-pod-source.js'
export type { ApiObjectReader, ApiObjectReaderOptions, ChangeDetectionStrategy } from './api-object-reader.js'
export { createApiObjectReader } from './api-object-reader.js'
export { createApiTokenSource } from './api-token-source.js'
export type { NodeStatusUpdater, NodeStatusUpdaterOptions } from './node-status.js'
export { createNodeStatusUpdater } from './node-status.js'
export type { EventSink, EventSinkOptions } from './event-sink.js'
export { createEventSink } from './event-sink.js'
