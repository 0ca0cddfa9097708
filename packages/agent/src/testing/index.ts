/**
 * @kubevol/agent/testing: a Kubernetes API test double that reproduces the real API server's wire
 * behaviour (list/watch with resourceVersion, 410 Expired, bookmarks, field selectors, patch content
 * types, Status bodies, graceful pod deletion, the Node authorizer), for kubevol's tests and yours.
 */
export type { ConnectionResetRule, DeleteOptions, FailureRule, FakeApiServer, FakeApiServerOptions, RequestRecord } from './fake-api/fake-api-server.js'
export { startFakeApiServer } from './fake-api/fake-api-server.js'
export { CONTROLLER_MANAGED_ATTACH_DETACH, csiUniqueVolumeName, volumeAttachmentName } from './fake-api/attach-detach-controller.js'
export type { AuthzRequest, Identity, Verb } from './fake-api/node-authorizer.js'
export { authorize, nodeOf } from './fake-api/node-authorizer.js'
export type { RequestCount, RequestFilter } from './fake-api/request-counter.js'
export type { FieldRequirement, LabelRequirement } from './fake-api/selectors.js'
export { matchesFields, matchesLabels, parseFieldSelector, parseLabelSelector } from './fake-api/selectors.js'
export type { StatusBody } from './fake-api/status.js'
export { StatusError, statusBody } from './fake-api/status.js'
export type { Change, KubeObject, ObjectMetadata, ResourceInfo, WatchEventType } from './fake-api/store.js'
export { FakeStore, RESOURCES, resourceOf } from './fake-api/store.js'
