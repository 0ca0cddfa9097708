/**
 * @kubevol/agent: the kubevol node agent. `startAgent(config)` runs a volume manager on a node with
 * its pod source (a manifest directory, or the Kubernetes API), node status, events, Prometheus
 * metrics and HTTP status endpoints; `src/main.ts` is the process.
 *
 * The front door: every public name is listed here. Test doubles are in `@kubevol/agent/testing`;
 * the Kubernetes API parts in `@kubevol/agent/kube`, so that this entry never loads
 * @kubernetes/client-node (a test checks it).
 */
export type { Agent, AgentDependencies } from './agent.js'
export { startAgent } from './agent.js'
export type { AgentConfig, AgentConfigInput, AgentOption, OptionAlias, OptionKind, ResolvedAgentConfig } from './config/options.js'
export { AGENT_OPTIONS, agentConfigSchema, formatDuration, optionOf, optionOfFlag, parseDuration, resolveModeDefaults } from './config/options.js'
export type { ConfigProblem, LoadConfigOptions } from './config/load-config.js'
export { AgentConfigError, configHelp, loadAgentConfig, optionUsage, resolveAgentConfig } from './config/load-config.js'
export type { EventStore, InvolvedObject, StoredEvent } from './events/event-store.js'
export { createEventStore } from './events/event-store.js'
export type { HealthCheck, StatusRoutes, StatusServer, StatusServerOptions } from './http/status-server.js'
export { startStatusServer } from './http/status-server.js'
export type { AgentLogger, AgentLoggerOptions, LogDestination } from './logging/agent-logger.js'
export { createAgentLogger, formatTextLine } from './logging/agent-logger.js'
export type { MetricsView } from './metrics/agent-metrics.js'
export { AgentMetrics } from './metrics/agent-metrics.js'
export type { PodPhase, PodWorkerStatus, PodWorkers, PodWorkersOptions } from './pods/pod-workers.js'
export { createPodWorkers } from './pods/pod-workers.js'
export type { ManifestError, ManifestKind, ManifestObject, ParsedManifests } from './sources/manifest-parser.js'
export { MANIFEST_KINDS, parseManifests } from './sources/manifest-parser.js'
export type { ManifestFileStatus, ManifestSource, ManifestSourceOptions } from './sources/manifest-source.js'
export { createManifestSource, staticPodUID } from './sources/manifest-source.js'
export type { PodStore } from './sources/pod-store.js'
export { createPodStore, isPodTerminating } from './sources/pod-store.js'
export type { OperationHistory, OperationTracker } from './status/operation-tracker.js'
export { createOperationTracker } from './status/operation-tracker.js'
export type { BackoffView, StateViewSources } from './status/state-view.js'
export { backoffsOf, podView, stateView } from './status/state-view.js'
export type { ProcessOptions } from './process.js'
export { runAgentProcess } from './process.js'
export { AGENT_VERSION } from './version.js'
