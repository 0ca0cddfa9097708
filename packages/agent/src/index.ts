/**
 * @kubevol/agent: the kubevol node agent. `startAgent(config)` runs a volume manager on a node with
 * its pod source (a manifest directory, or the Kubernetes API), node status, events, Prometheus
 * metrics and HTTP status endpoints; `src/main.ts` is the process.
 *
 * The front door, for those who run the agent in a process of their own or build a command around
 * it (as @kubevol/cli does): `startAgent`, its configuration and option table, the process runner,
 * the manifest reader static mode uses, and the metrics registry the docs render. The services
 * `startAgent` composes (status server, event store, pod workers, logger, ...) are not public: they
 * change as the agent does. Test doubles are in `@kubevol/agent/testing`; the Kubernetes API parts
 * in `@kubevol/agent/kube`, so that this entry never loads @kubernetes/client-node (a test checks it).
 */
export type { Agent, AgentDependencies } from './agent.js'
export type { KernelFloor } from './services/host.js'
export { startAgent } from './agent.js'
export type { ProcessOptions } from './process.js'
export { runAgentProcess } from './process.js'
export type { ShutdownOnSignalOptions, SignalSource } from './shutdown-on-signal.js'
export { hostExitNow, SHUTDOWN_MARGIN_MS, shutdownOnSignal } from './shutdown-on-signal.js'
export { AGENT_VERSION } from './version.js'
// What the Agent handle holds: types only, the services behind them are made by startAgent.
export type { EventStore, InvolvedObject, StoredEvent } from './events/event-store.js'
export type { HealthCheck } from './http/status-server.js'
export type { AgentLogger, AgentLoggerOptions, LogDestination } from './logging/agent-logger.js'
export type { PodStore } from './sources/pod-store.js'

// Configuration: the option table drives the flags, the config file and the docs' reference page.
export type { AgentConfig, AgentConfigInput, AgentOption, OptionAlias, OptionKind, ResolvedAgentConfig } from './config/options.js'
export { AGENT_OPTIONS, agentConfigSchema, formatDuration, parseDuration } from './config/options.js'
export type { ConfigProblem, FlagHelp, LoadConfigOptions } from './config/load-config.js'
export { AgentConfigError, configHelp, flagHelp, loadAgentConfig, optionHelp, optionUsage, resolveAgentConfig } from './config/load-config.js'

// Static mode's pod source: manifests from a directory, as the kubelet's --pod-manifest-path.
export type { ManifestError, ManifestKind, ManifestObject, ParsedManifests } from './sources/manifest-parser.js'
export { MANIFEST_KINDS, parseManifests } from './sources/manifest-parser.js'
export type { ManifestFileStatus, ManifestSource, ManifestSourceOptions } from './sources/manifest-source.js'
export { createManifestSource, staticPodUID } from './sources/manifest-source.js'

// The Prometheus registry behind /metrics, which maps the core's Metrics port onto the kubelet's names.
export type { MetricsView } from './metrics/agent-metrics.js'
export { AgentMetrics } from './metrics/agent-metrics.js'
