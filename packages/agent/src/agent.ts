/**
 * `startAgent`: puts a volume manager on a node. It reads the inputs (the host, the bearer token, in
 * API mode the kubeconfig), builds the list of services of the mode, starts them in order and
 * returns a handle whose `stop()` stops them in reverse, leaving every mount in place (a restart
 * reconstructs). The order of the list is in `composeServices`, and in the package README.
 */
import { readFile } from 'node:fs/promises'
import { totalmem } from 'node:os'
import type { KubeConfig } from '@kubernetes/client-node'
import {
  type Clock,
  type Host,
  type ObjectReader,
  type PodSource,
  type Recorder,
  type VolumeManager,
  type VolumeManagerOptions,
  type VolumePlugin,
  type VolumeStats,
  createVolumeManager,
  errorMessage,
  systemClock,
} from '@kubevol/core'
import { type CsiDriverRegistry, createBuiltinPlugins } from '@kubevol/core/plugins'
import { AgentConfigError, resolveAgentConfig } from './config/load-config.js'
import type { AgentConfigInput, ResolvedAgentConfig } from './config/options.js'
import { startCsi } from './csi-drivers.js'
import { type EventStore, createEventStore } from './events/event-store.js'
import { containerMountsView } from './http/container-mounts-view.js'
import { type HealthCheck, startStatusServer } from './http/status-server.js'
import { type AgentLogger, type AgentLoggerOptions, createAgentLogger } from './logging/agent-logger.js'
import { AgentMetrics } from './metrics/agent-metrics.js'
import { createPodWorkers } from './pods/pod-workers.js'
import { eventSinkService, finalizer, nodeStatusService } from './services/api-services.js'
import { type KernelFloor, loadHost, rootLockService } from './services/host.js'
import { type ModeSources, apiSources, staticSources } from './services/mode-sources.js'
import { createReadiness, liveness } from './services/readiness.js'
import { type Service, ServiceRunner, defineService } from './services/service.js'
import { VolumeManagerService } from './services/volume-manager-service.js'
import { volumeStatsService } from './services/volume-stats.js'
import { type StateViewSources, backoffsOf, podView, stateView } from './status/state-view.js'
import { AGENT_VERSION } from './version.js'

/** What `startAgent` can be given besides the configuration: for embedding and tests. */
export interface AgentDependencies {
  /** The host, instead of the one `config.host` names (tests pass a memory host they keep). */
  readonly host?: Host
  /**
   * API mode: the API server to use, instead of loading `config.kubeconfig`: a `KubeConfig` of
   * @kubernetes/client-node. Typed as an object so that this entry's types do not need that package,
   * an optional peer that only API mode loads.
   */
  readonly kubeConfig?: object
  /** @default systemClock */
  readonly clock?: Clock
  /** Log options (destination, silence); format and verbosity come from the config. */
  readonly log?: Omit<AgentLoggerOptions, 'format' | 'verbosity'>
  /** @default createBuiltinPlugins(); the agent's CSI plugin (serving `csiDrivers`) is added unless one is given */
  readonly plugins?: readonly VolumePlugin[]
  /** Extra volume manager options (backoff, resync period, ...). */
  readonly manager?: Partial<Omit<VolumeManagerOptions, 'host' | 'plugins' | 'podSource' | 'objects' | 'nodeName'>>
  /** The bearer token, instead of reading `config.authTokenFile`. */
  readonly authToken?: string
  /** The environment for in-cluster detection. @default process.env */
  readonly env?: Readonly<Record<string, string | undefined>>
  /**
   * What the kernel offers the Linux host, checked before it is created (an older kernel is refused
   * with an `AgentConfigError`). Tests inject an old kernel here. @default adapter-linux's `probeKernelFloor`
   */
  readonly probeKernelFloor?: () => KernelFloor
}

/** A running agent. */
export interface Agent {
  readonly config: ResolvedAgentConfig
  /** Base URL of the status endpoints: `http://127.0.0.1:10280`. */
  readonly url: string
  readonly manager: VolumeManager
  readonly host: Host
  readonly pods: PodSource
  readonly objects: ObjectReader
  readonly events: EventStore
  readonly metrics: AgentMetrics
  readonly logger: AgentLogger
  /**
   * The node's CSI drivers: the configured ones, the ones registered through
   * `pluginRegistrationDir` (default `<rootDir>/plugins_registry`), and any an embedder registers here.
   */
  readonly csiDrivers: CsiDriverRegistry
  /** The /readyz checks. */
  readiness(): Promise<readonly HealthCheck[]>
  /** The /v1/state answer. */
  state(): Record<string, unknown>
  /** The /v1/pods/<uid> answer. */
  pod(uid: string): Record<string, unknown> | undefined
  /**
   * Stops taking work, lets running operations finish for `shutdownGraceMs` and then abandons them,
   * stops the loops and the endpoints. Mounts stay. Idempotent.
   */
  stop(): Promise<void>
  /** Resolves once the agent has stopped. */
  readonly stopped: Promise<void>
}

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|localhost)$/

/**
 * Starts an agent. Throws `AgentConfigError` on an invalid configuration and any error of start-up
 * (the port is taken, the kubeconfig cannot be read, adapter-linux is missing); what had started
 * is stopped again, last first.
 */
export async function startAgent(input: AgentConfigInput, deps: AgentDependencies = {}): Promise<Agent> {
  const config = resolveAgentConfig(input)
  const clock = deps.clock ?? systemClock
  const logger = createAgentLogger({ format: config.logFormat, verbosity: config.verbosity, base: { node: config.nodeName }, ...deps.log })
  const runner = new ServiceRunner()
  try {
    const agent = await composeServices({ config, deps, clock, logger, runner })
    await runner.start(agent.services)
    logger.info('kubevol agent started', { version: AGENT_VERSION, mode: config.mode, host: deps.host ? 'given' : config.host, rootDir: config.rootDir, url: agent.server.value.url, controllerAttachDetach: config.controllerAttachDetach })
    return agentHandle(agent, runner)
  } catch (err) {
    await runner.abort()
    throw err
  }
}

interface Context {
  readonly config: ResolvedAgentConfig
  readonly deps: AgentDependencies
  readonly clock: Clock
  readonly logger: AgentLogger
  readonly runner: ServiceRunner
}

/** What the composition root made: the list to start, and what the handle shows of it. */
interface Composition extends Context {
  readonly services: readonly Service[]
  readonly host: Host
  readonly sources: ModeSources
  readonly events: EventStore
  readonly metrics: AgentMetrics
  readonly csi: ReturnType<typeof csiService>
  readonly manager: VolumeManagerService
  readonly server: ReturnType<typeof statusServerService>
  readonly readiness: () => Promise<HealthCheck[]>
  readonly views: () => StateViewSources
}

/**
 * The composition root: reads the inputs, then lists the services of the mode in the order they
 * start (they stop in reverse). Nothing is taken (the root lock, a Node) before every input is read.
 */
async function composeServices(ctx: Context): Promise<Composition> {
  const { config, deps, clock, logger, runner } = ctx
  const host = deps.host ?? (await loadHost(config, clock, deps.probeKernelFloor))
  const token = await readToken(ctx)
  const { metrics, events, recorder } = observability(ctx)
  const sources = await modeSources(ctx, metrics, host)
  const api = sources.api
  const csi = csiService(ctx, sources, host)
  const manager = new VolumeManagerService({ create: () => createManager(ctx, host, sources, csi.value, { metrics, recorder }), clock, logger, metrics, recorder, pods: sources.pods, nodeName: config.nodeName, stuckOperationMs: config.stuckOperationMs })
  const workers = podWorkersService(ctx, manager, sources, recorder)
  const nodeStatus = api ? nodeStatusService(api, { config, manager, logger, metrics }) : undefined
  const stats = volumeStatsService({ manager, periodMs: config.statsPeriodMs, clock, logger, metrics })
  const views = once((): StateViewSources => ({
    nodeName: config.nodeName,
    mode: config.mode,
    manager: manager.manager,
    pods: sources.pods,
    clock,
    tracker: manager.tracker,
    worker: (uid) => workers.value.status(uid),
    stuckAfterMs: config.stuckOperationMs,
    extra: () => ({
      pods: workers.value.list(),
      ...(api?.credentials ? { nodeCredentials: api.credentials.status() } : {}),
      ...(nodeStatus ? { nodeStatus: { reported: nodeStatus.value.reported ?? null, lastError: nodeStatus.value.lastError ?? null } } : {}),
      ...(sources.manifests ? { manifests: { dir: config.manifestDir, errors: sources.manifests.errors(), files: sources.manifests.files() } } : {}),
      journal: (manager.manager.snapshot() as { journal?: unknown }).journal ?? null,
      events: events.total,
      stuckOperations: manager.stuck.list().map((op) => ({ ...op, startedAt: new Date(op.startedAt).toISOString() })),
    }),
  }))
  const readiness = createReadiness({ manager, pods: sources.pods, host, rootDir: config.rootDir, clock, serviceChecks: () => runner.checks() })
  const server = statusServerService(ctx, token, { manager, metrics, events, readiness, views })
  const services: Service[] = [
    rootLockService(host, config.rootDir),
    // The Node registration (API mode) runs while the rest starts.
    ...sources.early,
    // Before the manager, whose CSI plugin serves from their registry.
    csi,
    manager,
    // After the manager runs, so that its populator sees the first pods.
    sources.source,
    workers,
    ...(nodeStatus ? [nodeStatus] : []),
    ...(api && config.postEvents ? [eventSinkService(api, { config, events, logger, metrics })] : []),
    stats.service,
    metricsService(metrics, { manager, workers, sources, stats: stats.latest, clock }),
    // Last: the endpoints answer once everything they report on runs.
    server,
  ]
  return { ...ctx, services, host, sources, events, metrics, csi, manager, server, readiness, views }
}

/**
 * The bearer token. A token file that cannot be read, or holds nothing but whitespace, stops the
 * start: the endpoints would refuse every request, the probes included.
 */
async function readToken({ config, deps, logger }: Context): Promise<string | undefined> {
  const refuse = (allowed: string): AgentConfigError =>
    new AgentConfigError([{ key: 'authTokenFile', value: config.authTokenFile, source: 'the agent configuration', allowed }])
  let token = deps.authToken
  if (token === undefined && config.authTokenFile) {
    try {
      token = (await readFile(config.authTokenFile, 'utf8')).trim()
    } catch (err) {
      throw refuse(`a readable file holding the bearer token (${errorMessage(err)})`)
    }
  }
  if (token === '') {
    throw refuse('a file holding the bearer token; this one is empty or only whitespace, and every request would be refused')
  }
  if (!LOOPBACK.test(config.address) && token === undefined) {
    logger.warn('The status endpoints are bound beyond loopback without a bearer token', { address: config.address })
  }
  return token
}

/** Metrics, the event store, and the recorder that feeds both and the debug log. */
function observability({ config, clock, logger }: Context): { metrics: AgentMetrics; events: EventStore; recorder: Recorder } {
  const metrics = new AgentMetrics({ version: AGENT_VERSION, onError: (message) => logger.warn(message) })
  const events = createEventStore({ capacity: config.eventsKept, clock })
  const recorder: Recorder = {
    event(event) {
      metrics.events.inc({ type: event.type, reason: event.reason })
      logger.debug('Event', { type: event.type, reason: event.reason, object: `${event.target.kind}/${event.target.metadata.name ?? ''}`, message: event.message })
      events.event(event)
    },
  }
  return { metrics, events, recorder }
}

/** The version of @kubernetes/client-node the agent is built and tested with. */
const KUBE_CLIENT = '@kubernetes/client-node@1.4.0'

/**
 * API mode's modules. They load @kubernetes/client-node, an optional peer of the agent: when it is not
 * installed, the start fails saying what to install.
 */
async function loadApiMode(): Promise<typeof import('./kube/api-mode.js')> {
  try {
    return await import('./kube/api-mode.js')
  } catch (err) {
    const missing = (err as { code?: string }).code === 'ERR_MODULE_NOT_FOUND' && errorMessage(err).includes("'@kubernetes/client-node'")
    if (!missing) throw err
    throw new AgentConfigError([
      { key: 'mode', value: 'api', source: 'the agent configuration', allowed: `"static", or "api" once @kubernetes/client-node is installed beside kubevol (npm install ${KUBE_CLIENT})` },
    ])
  }
}

async function modeSources(ctx: Context, metrics: AgentMetrics, host: Host): Promise<ModeSources> {
  const { config, deps, clock, logger } = ctx
  if (config.mode === 'static') return staticSources(config, logger)
  // Loaded here, not at the top: @kubernetes/client-node costs about 0.6 s and 90 MB of start-up,
  // which static mode and the CLI's other commands never need.
  const kube = await loadApiMode()
  // TLS bootstrapping: the clients authenticate as the node, with the certificate it requests and renews.
  const credentials = config.bootstrapKubeconfig
    ? new kube.NodeCredentials({
        nodeName: config.nodeName,
        bootstrapKubeconfig: config.bootstrapKubeconfig,
        kubeconfig: config.kubeconfig ?? `${config.rootDir}/kubeconfig`,
        certDir: config.certDir,
        rotate: config.rotateCertificates,
        files: kube.createCredentialFiles(host, config.rootDir),
        clock,
        logger,
      })
    : undefined
  const clients = kube.createKubeClients(credentials?.kubeConfig ?? (deps.kubeConfig as KubeConfig | undefined) ?? kube.loadKubeConfig(config.kubeconfig, deps.env ?? process.env))
  const onRestart = (resource: string, reason: string): void => metrics.watchRestarts.inc({ resource, reason })
  return apiSources({ config, kube, clients, logger, clock, onRestart, ...(credentials ? { credentials } : {}) })
}

function csiService({ config, logger }: Context, sources: ModeSources, host: Host) {
  const api = sources.api
  return defineService('csi-drivers', {
    create: () => startCsi({ config, logger, host, ...(api ? { clients: api.clients, csiNode: api.kube } : {}) }),
    stop: (csi) => csi.stop(),
  })
}

function createManager(
  { config, deps, clock, logger }: Context,
  host: Host,
  sources: ModeSources,
  csi: { readonly plugin: VolumePlugin },
  o: { readonly metrics: AgentMetrics; readonly recorder: Recorder },
): VolumeManager {
  // A memory-backed volume with no limit is sized at the node's memory, as the kubelet sizes it at
  // node allocatable (core's default, 8 GiB, knows nothing of the node).
  const memory = totalmem()
  const plugins = deps.plugins ?? createBuiltinPlugins({ emptyDir: { nodeAllocatableMemoryBytes: memory }, atomicWriter: { nodeAllocatable: { memory: String(memory) } } })
  return createVolumeManager({
    host,
    plugins: plugins.some((p) => p.name === csi.plugin.name) ? plugins : [...plugins, csi.plugin],
    podSource: sources.pods,
    objects: sources.objects,
    nodeName: config.nodeName,
    rootDir: config.rootDir,
    controllerAttachDetach: config.controllerAttachDetach,
    clock,
    logger,
    recorder: o.recorder,
    metrics: o.metrics,
    ...(sources.tokens ? { tokens: sources.tokens } : {}),
    // The agent collects stats itself, to export them.
    statsPeriodMs: 0,
    ...deps.manager,
  })
}

function podWorkersService({ config, clock, logger }: Context, manager: VolumeManagerService, sources: ModeSources, recorder: Recorder) {
  const api = sources.api
  return defineService('pod-workers', {
    create: () =>
      createPodWorkers({
        manager: manager.manager,
        pods: sources.pods,
        recorder,
        clock,
        logger,
        retryMs: config.podSyncRetryMs,
        timeoutMs: config.podSyncTimeoutMs,
        ...(api && config.finalizePodDeletion ? { finalize: finalizer(api.clients, api.kube.statusCodeOf, logger) } : {}),
      }),
    start: (workers) => workers.start(),
    // No pod is synced after this.
    quiesce: (workers) => workers.stop(),
    stop: (workers) => workers.stop(),
  })
}

/** Binds the gauges that /metrics reads at each scrape; nothing to stop. */
function metricsService(
  metrics: AgentMetrics,
  o: { readonly manager: VolumeManagerService; readonly workers: ReturnType<typeof podWorkersService>; readonly sources: ModeSources; readonly stats: () => readonly VolumeStats[]; readonly clock: Clock },
): Service {
  const { manager, workers, sources, clock } = o
  const manifests = sources.manifests
  const credentials = sources.api?.credentials
  return defineService('metrics', {
    create: () =>
      metrics.bind({
        manager: manager.manager,
        stats: o.stats,
        podPhases: () => workers.value.phases(),
        backoffCount: () => backoffsOf(manager.manager, clock.now()).length,
        stuckOperations: () => manager.stuck.list(),
        sourcesReady: () => sources.pods.allReady(),
        ...(manifests ? { manifestErrors: () => manifests.errors().length } : {}),
        ...(credentials ? { clientCertificateNotAfter: () => credentials.notAfter() } : {}),
      }),
  })
}

function statusServerService(
  { config, logger }: Context,
  token: string | undefined,
  o: { readonly manager: VolumeManagerService; readonly metrics: AgentMetrics; readonly events: EventStore; readonly readiness: () => Promise<HealthCheck[]>; readonly views: () => StateViewSources },
) {
  return defineService('status-server', {
    create: () =>
      startStatusServer({
        address: config.address,
        port: config.port,
        ...(token === undefined ? {} : { token }),
        unauthenticatedProbes: config.unauthenticatedProbes,
        logger,
        routes: {
          livez: () => liveness(o.manager),
          readyz: o.readiness,
          metrics: async () => ({ contentType: o.metrics.contentType, body: await o.metrics.expose() }),
          state: () => stateView(o.views()),
          pod: (uid) => podView(o.views(), uid),
          events: (filter) => o.events.list(filter),
          mounts: (request) => containerMountsView(o.views(), request),
        },
      }),
    stop: (server) => server.close(),
  })
}

/** The running agent; `stop()` runs the two-phase shutdown of `ServiceRunner.stop` once. */
function agentHandle(c: Composition, runner: ServiceRunner): Agent {
  const { config, logger } = c
  let resolveStopped: () => void = () => {}
  const stopped = new Promise<void>((resolve) => (resolveStopped = resolve))
  let stopping: Promise<void> | undefined
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      logger.info('Shutting down; mounts stay in place')
      await runner.stop({ graceMs: config.shutdownGraceMs, onError: (err) => logger.warn('Shutdown step failed', { err: errorMessage(err) }) })
      logger.info('Stopped')
      resolveStopped()
    })()
    return stopping
  }
  return {
    config,
    url: c.server.value.url,
    manager: c.manager.manager,
    host: c.host,
    pods: c.sources.pods,
    objects: c.sources.objects,
    events: c.events,
    metrics: c.metrics,
    logger,
    csiDrivers: c.csi.value.registry,
    readiness: c.readiness,
    state: () => stateView(c.views()),
    pod: (uid) => podView(c.views(), uid),
    stop,
    stopped,
  }
}

/** `make()` once, on first use (after the services it reads have started). */
function once<T>(make: () => T): () => T {
  let made: { value: T } | undefined
  return () => (made ??= { value: make() }).value
}
