/**
 * What `startAgent` uses in API mode, in one module it imports dynamically: everything here loads
 * @kubernetes/client-node, which static mode and the CLI's other commands never need.
 */
export { createCredentialFiles } from '../credentials/credential-files.js'
export { NodeCredentials } from '../credentials/node-credentials.js'
export { createApiObjectReader } from './api-object-reader.js'
export { createApiPodSource } from './api-pod-source.js'
export { createApiTokenSource } from './api-token-source.js'
export { createCsiNodeUpdater, syncCsiNodeWithRegistry } from './csi-node.js'
export { createEventSink } from './event-sink.js'
export { createKubeClients, loadKubeConfig, statusCodeOf } from './kube-client.js'
export { createNodeRegistration } from './node-registration.js'
export { createNodeStatusUpdater } from './node-status.js'
