/**
 * `startAgent`: puts a volume manager on a node. It picks the host, the pod source and object reader
 * of the mode, wires logs, events, metrics, node status and pod workers, serves the status endpoints,
 * and returns a handle whose `stop()` shuts down leaving every mount in place (a restart reconstructs).
 */
import { readFile } from 'node:fs/promises'
import { totalmem } from 'node:os'
import type { KubeConfig } from '@kubernetes/client-node'
import { createMemoryHost } from '@kubevol/adapter-mock'
import {
  type Clock,
  type Host,
  type ObjectReader,
  type Pod,
  type PodSource,
  type Recorder,
  type TokenSource,
  type VolumeManager,
  type VolumeManagerOptions,
  type VolumePlugin,
  type VolumeStats,
  createVolumeManager,
  errorMessage,
  systemClock,
} from '@kubevol/core'
import { type CsiDriverRegistry, createBuiltinPlugins } from '@kubevol/core/plugins'
import { resolveAgentConfig } from './config/load-config.js'
import type { AgentConfigInput, ResolvedAgentConfig } from './config/options.js'
import { type AgentCsi, startCsi } from './csi-drivers.js'
import { type EventStore, createEventStore } from './events/event-store.js'
import { type HealthCheck, type StatusServer, startStatusServer } from './http/status-server.js'
import type { KubeClients } from './kube/kube-client.js'
import type { NodeRegistration } from './kube/node-registration.js'
import type { NodeStatusUpdater } from './kube/node-status.js'
import { type AgentLogger, type AgentLoggerOptions, createAgentLogger } from './logging/agent-logger.js'
import { AgentMetrics } from './metrics/agent-metrics.js'
import { type PodWorkers, createPodWorkers } from './pods/pod-workers.js'
import { type ManifestSource, createManifestSource } from './sources/manifest-source.js'
import { createOperationTracker } from './status/operation-tracker.js'
import { createStuckOperationWatch, describeStuck } from './status/stuck-operations.js'
import { type StateViewSources, backoffsOf, podView, stateView } from './status/state-view.js'
import { AGENT_VERSION } from './version.js'

/** What `startAgent` can be given besides the configuration: for embedding and tests. */
export interface AgentDependencies {
  /** The host, instead of the one `config.host` names (tests pass a memory host they keep). */
  readonly host?: Host
  /** API mode: the API server to use, instead of loading `config.kubeconfig`. */
  readonly kubeConfig?: KubeConfig
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

/** Loads @kubevol/adapter-linux only when asked, so the agent runs where it is not installed. */
async function loadLinuxHost(): Promise<Host> {
  const specifier = '@kubevol/adapter-linux'
  let mod: { createLinuxHost?: (options?: object) => Host }
  try {
    mod = (await import(specifier)) as typeof mod
  } catch (err) {
    throw new Error(`host "linux" needs @kubevol/adapter-linux, which cannot be loaded: ${errorMessage(err)}`, { cause: err })
  }
  if (typeof mod.createLinuxHost !== 'function') throw new Error('@kubevol/adapter-linux has no createLinuxHost')
  return mod.createLinuxHost()
}

/**
 * Starts an agent. Throws `AgentConfigError` on an invalid configuration and any error of start-up
 * (the port is taken, the kubeconfig cannot be read, adapter-linux is missing).
 */
export async function startAgent(input: AgentConfigInput, deps: AgentDependencies = {}): Promise<Agent> {
  const config = resolveAgentConfig(input)
  const clock = deps.clock ?? systemClock
  const logger = createAgentLogger({ format: config.logFormat, verbosity: config.verbosity, base: { node: config.nodeName }, ...deps.log })
  const cleanups: (() => Promise<void> | void)[] = []
  try {
    return await start(config, deps, clock, logger, cleanups)
  } catch (err) {
    for (const cleanup of cleanups.reverse()) await Promise.resolve(cleanup()).catch(() => undefined)
    throw err
  }
}

async function start(
  config: ResolvedAgentConfig,
  deps: AgentDependencies,
  clock: Clock,
  logger: AgentLogger,
  cleanups: (() => Promise<void> | void)[],
): Promise<Agent> {
  const host = deps.host ?? (config.host === 'linux' ? await loadLinuxHost() : createMemoryHost({ clock }))
  // One manager per root: a second agent, or `kubevol gc`, would tear down what this one set up.
  // Taken first and released last (cleanups run in reverse); the kernel drops it if we are killed.
  const rootLock = await host.lockRoot?.(config.rootDir)
  if (rootLock && !rootLock.locked) {
    throw new Error(`the root ${config.rootDir} is in use by kubevol${rootLock.holderPid ? ` (pid ${rootLock.holderPid})` : ''}: another agent manages it; stop it first`)
  }
  if (rootLock?.locked) cleanups.push(() => rootLock.release())
  const token = deps.authToken ?? (config.authTokenFile ? (await readFile(config.authTokenFile, 'utf8')).trim() : undefined)
  if (!LOOPBACK.test(config.address) && token === undefined) {
    logger.warn('The status endpoints are bound beyond loopback without a bearer token', { address: config.address })
  }
  const metrics = new AgentMetrics({ version: AGENT_VERSION, onError: (message) => logger.warn(message) })
  const events = createEventStore({ capacity: config.eventsKept, clock })
  const recorder: Recorder = {
    event(event) {
      metrics.events.inc({ type: event.type, reason: event.reason })
      logger.debug('Event', { type: event.type, reason: event.reason, object: `${event.target.kind}/${event.target.metadata.name ?? ''}`, message: event.message })
      events.event(event)
    },
  }
  const onRestart = (resource: string, reason: string): void => metrics.watchRestarts.inc({ resource, reason })

  // ---- the sources of the mode ----
  let pods: PodSource
  let objects: ObjectReader
  let tokens: TokenSource | undefined
  let clients: KubeClients | undefined
  let manifests: ManifestSource | undefined
  let registration: NodeRegistration | undefined
  let startSources: () => Promise<void>
  let kube: typeof import('./kube/api-mode.js') | undefined
  const sourceChecks: (() => HealthCheck)[] = []
  if (config.mode === 'static') {
    const source = createManifestSource({ dir: config.manifestDir, nodeName: config.nodeName, rescanMs: config.manifestRescanMs, logger })
    manifests = source
    pods = source.pods
    objects = source.objects
    startSources = () => source.start()
    cleanups.push(() => source.stop())
    if (config.controllerAttachDetach) logger.warn('controllerAttachDetach in static mode: attachable volumes wait for a controller that is not there')
  } else {
    // Loaded here, not at the top: @kubernetes/client-node costs about 0.6 s and 90 MB of start-up,
    // which static mode and the CLI's other commands never need.
    kube = await import('./kube/api-mode.js')
    const { createApiObjectReader, createApiPodSource, createApiTokenSource, createKubeClients, createNodeRegistration, loadKubeConfig } = kube
    clients = createKubeClients(deps.kubeConfig ?? loadKubeConfig(config.kubeconfig, deps.env ?? process.env))
    const reg = createNodeRegistration({
      clients,
      nodeName: config.nodeName,
      register: config.registerNode,
      labels: config.nodeLabels,
      controllerAttachDetach: config.controllerAttachDetach,
      retryMs: config.watchRetryMs,
      logger,
    })
    registration = reg
    reg.start()
    cleanups.push(() => reg.stop())
    sourceChecks.push(() => ({ name: 'node', ...reg.check() }))
    const podSource = createApiPodSource({ clients, nodeName: config.nodeName, retryMs: config.watchRetryMs, logger, onRestart })
    const reader = createApiObjectReader({ clients, nodeName: config.nodeName, ttlMs: config.objectCacheTtlMs, retryMs: config.watchRetryMs, logger, clock, onRestart })
    pods = podSource.pods
    objects = reader
    tokens = createApiTokenSource(clients, clock)
    startSources = async () => {
      await Promise.all([podSource.informer.start(), reader.nodeInformer.start()])
    }
    cleanups.push(() => podSource.informer.stop(), () => reader.nodeInformer.stop())
    sourceChecks.push(() => ({ name: 'api-watch', ok: podSource.informer.synced(), message: podSource.informer.synced() ? undefined : 'no pod list has arrived yet' }))
  }

  // ---- CSI drivers: before the manager, whose CSI plugin serves from their registry ----
  const csi: AgentCsi = await startCsi({ config, logger, ...(clients && kube ? { clients, csiNode: kube } : {}) })
  cleanups.push(() => csi.stop())
  // A memory-backed volume with no limit is sized at the node's memory, as the kubelet sizes it at
  // node allocatable (core's default, 8 GiB, knows nothing of the node).
  const memory = totalmem()
  const plugins = deps.plugins ?? createBuiltinPlugins({ emptyDir: { nodeAllocatableMemoryBytes: memory }, atomicWriter: { nodeAllocatable: { memory: String(memory) } } })

  // ---- the manager ----
  const manager = createVolumeManager({
    host,
    plugins: plugins.some((p) => p.name === csi.plugin.name) ? plugins : [...plugins, csi.plugin],
    podSource: pods,
    objects,
    nodeName: config.nodeName,
    rootDir: config.rootDir,
    controllerAttachDetach: config.controllerAttachDetach,
    clock,
    logger,
    recorder,
    metrics,
    ...(tokens ? { tokens } : {}),
    // The agent collects stats itself, to export them.
    statsPeriodMs: 0,
    ...deps.manager,
  })
  const tracker = createOperationTracker(manager, clock, (plugin, seconds) => metrics.mountLatency.observe({ plugin_name: plugin }, seconds))
  cleanups.push(() => tracker.stop())
  const stuck = createStuckOperationWatch({ tracker, clock, thresholdMs: config.stuckOperationMs, recorder, pods, nodeName: config.nodeName, logger })
  cleanups.push(() => stuck.stop())
  let lastActivity = clock.now()
  cleanups.push(manager.subscribe(() => (lastActivity = clock.now())) as () => void)
  const abort = new AbortController()
  let runError: unknown
  let runEnded = false
  const runDone = manager.run(abort.signal).then(
    () => {
      runEnded = true
    },
    (err: unknown) => {
      runEnded = true
      runError = err
      logger.error('The volume manager stopped with an error', { err: errorMessage(err) })
    },
  )
  cleanups.push(async () => {
    abort.abort()
    await runDone
  })
  await startSources()

  // ---- workers, node status, events ----
  const workers: PodWorkers = createPodWorkers({
    manager,
    pods,
    recorder,
    clock,
    logger,
    retryMs: config.podSyncRetryMs,
    timeoutMs: config.podSyncTimeoutMs,
    ...(clients && kube && config.finalizePodDeletion ? { finalize: finalizer(clients, kube.statusCodeOf, logger) } : {}),
  })
  workers.start()
  cleanups.push(() => workers.stop())
  let nodeStatus: NodeStatusUpdater | undefined
  if (clients && kube) {
    nodeStatus = kube.createNodeStatusUpdater({
      clients,
      nodeName: config.nodeName,
      manager,
      periodMs: config.nodeStatusPeriodMs,
      logger,
      onPatch: (result) => metrics.nodeStatusPatches.inc({ result }),
      ...(registration ? { nodeReady: () => registration?.state === 'ready', onNodeMissing: () => registration?.nodeMissing() } : {}),
    })
    nodeStatus.start()
    void registration?.ready.then(() => nodeStatus?.sync())
    cleanups.push(() => nodeStatus?.stop())
  }
  if (clients && kube && config.postEvents) {
    const sink = kube.createEventSink({ clients, nodeName: config.nodeName, store: events, logger, onPost: (result) => metrics.eventPosts.inc({ result }) })
    sink.start()
    cleanups.push(async () => {
      sink.stop()
      await Promise.race([sink.flush(), new Promise((resolve) => setTimeout(resolve, 2_000).unref())])
    })
  }

  // ---- volume stats ----
  let stats: readonly VolumeStats[] = []
  if (config.statsPeriodMs > 0) {
    const collect = async (): Promise<void> => {
      const started = clock.now()
      try {
        stats = await manager.collectVolumeStats()
        metrics.observe('volume_metric_collection_duration_seconds', { metric_source: 'fs' }, (clock.now() - started) / 1000)
      } catch (err) {
        logger.warn('Collecting volume stats failed', { err: errorMessage(err) })
      }
    }
    const timer = setInterval(() => void collect(), config.statsPeriodMs)
    timer.unref()
    cleanups.push(() => clearInterval(timer))
  }

  // ---- views and checks ----
  const viewSources: StateViewSources = {
    nodeName: config.nodeName,
    mode: config.mode,
    manager,
    pods,
    clock,
    tracker,
    worker: (uid) => workers.status(uid),
    stuckAfterMs: config.stuckOperationMs,
    extra: () => ({
      pods: workers.list(),
      ...(nodeStatus ? { nodeStatus: { reported: nodeStatus.reported ?? null, lastError: nodeStatus.lastError ?? null } } : {}),
      ...(manifests ? { manifests: { dir: config.manifestDir, errors: manifests.errors(), files: manifests.files() } } : {}),
      journal: (manager.snapshot() as { journal?: unknown }).journal ?? null,
      events: events.total,
      stuckOperations: stuck.list().map((op) => ({ ...op, startedAt: new Date(op.startedAt).toISOString() })),
    }),
  }
  metrics.bind({
    manager,
    stats: () => stats,
    podPhases: () => workers.phases(),
    backoffCount: () => backoffsOf(manager, clock.now()).length,
    stuckOperations: () => stuck.list(),
    sourcesReady: () => pods.allReady(),
    ...(manifests ? { manifestErrors: () => manifests.errors().length } : {}),
  })
  let hostCheck: { at: number; check: Promise<HealthCheck> } | undefined
  const hostResponsive = (): Promise<HealthCheck> => {
    const now = clock.now()
    if (hostCheck && now - hostCheck.at < 2_000) return hostCheck.check
    const check = Promise.race([
      host.stat(config.rootDir).then(
        () => ({ name: 'host-responsive', ok: true }),
        (err: unknown) => ({ name: 'host-responsive', ok: false, message: errorMessage(err) }),
      ),
      new Promise<HealthCheck>((resolve) => setTimeout(() => resolve({ name: 'host-responsive', ok: false, message: 'stat of the root directory hangs' }), 2_000).unref()),
    ])
    hostCheck = { at: now, check }
    return check
  }
  const readiness = async (): Promise<HealthCheck[]> => {
    const snap = manager.snapshot()
    const synced = pods.allReady() && snap.sourcesReady
    return [
      { name: 'sources-synced', ok: synced, ...(synced ? {} : { message: pods.allReady() ? 'the populator has not read every pod yet' : 'waiting for the first list of pods' }) },
      ...sourceChecks.map((check) => check()),
      {
        name: 'reconciler',
        ok: !runEnded && snap.statesSynced,
        message: runEnded ? `the manager loop has stopped${runError ? `: ${errorMessage(runError)}` : ''}` : snap.statesSynced ? `last state change ${Math.round((clock.now() - lastActivity) / 1000)}s ago` : 'states not synced yet (reconstruction)',
      },
      await hostResponsive(),
      stuckCheck(),
    ]
  }
  // One hung host call holds one volume: the agent is still doing its job for every other volume, but
  // not ready in the sense that something needs a person; the message names what is stuck.
  const stuckCheck = (): HealthCheck => {
    const list = stuck.list()
    if (list.length === 0) return { name: 'operations', ok: true, message: `${tracker.running().length} running, none stuck` }
    return { name: 'operations', ok: false, message: `stuck: ${list.map(describeStuck).join('; ')}` }
  }

  const server: StatusServer = await startStatusServer({
    address: config.address,
    port: config.port,
    ...(token === undefined ? {} : { token }),
    unauthenticatedProbes: config.unauthenticatedProbes,
    logger,
    routes: {
      livez: () => [{ name: 'manager-loop', ok: !runEnded, ...(runEnded ? { message: 'the manager loop has stopped' } : {}) }],
      readyz: readiness,
      metrics: async () => ({ contentType: metrics.contentType, body: await metrics.expose() }),
      state: () => stateView(viewSources),
      pod: (uid) => podView(viewSources, uid),
      events: (filter) => events.list(filter),
    },
  })
  cleanups.push(() => server.close())
  logger.info('kubevol agent started', { version: AGENT_VERSION, mode: config.mode, host: deps.host ? 'given' : config.host, rootDir: config.rootDir, url: server.url, controllerAttachDetach: config.controllerAttachDetach })

  let resolveStopped: () => void = () => {}
  const stopped = new Promise<void>((resolve) => (resolveStopped = resolve))
  let stopping: Promise<void> | undefined
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      logger.info('Shutting down; mounts stay in place')
      // Stop taking work: no pod is synced, no event posted, no pass started after this.
      workers.stop()
      nodeStatus?.stop()
      abort.abort()
      await runDone
      const abandoned = await waitForOperations(manager, tracker, config.shutdownGraceMs)
      if (abandoned > 0) logger.warn('Abandoning running operations; a restart reconstructs what they left', { operations: abandoned })
      for (const cleanup of cleanups.reverse()) {
        try {
          await cleanup()
        } catch (err) {
          logger.warn('Shutdown step failed', { err: errorMessage(err) })
        }
      }
      logger.info('Stopped')
      resolveStopped()
    })()
    return stopping
  }

  return {
    config,
    url: server.url,
    manager,
    host,
    pods,
    objects,
    events,
    metrics,
    logger,
    csiDrivers: csi.registry,
    readiness,
    state: () => stateView(viewSources),
    pod: (uid) => podView(viewSources, uid),
    stop,
    stopped,
  }
}

/** Resolves with 0 once no operation runs, or with the number still running after `graceMs`. */
function waitForOperations(manager: VolumeManager, tracker: ReturnType<typeof createOperationTracker>, graceMs: number): Promise<number> {
  return new Promise((resolve) => {
    if (tracker.running().length === 0) return resolve(0)
    let unsubscribe = (): void => {}
    const timer = setTimeout(() => {
      unsubscribe()
      resolve(tracker.running().length)
    }, graceMs)
    unsubscribe = manager.subscribe((event) => {
      if (event.type === 'operation' && tracker.running().length === 0) {
        clearTimeout(timer)
        unsubscribe()
        resolve(0)
      }
    }) as () => void
  })
}

/**
 * Deletes the object of a pod being deleted (grace 0, this UID only), as the kubelet's status
 * manager does. The pod workers call it only for a pod with a deletion timestamp.
 */
function finalizer(clients: KubeClients, statusCodeOf: (err: unknown) => number | undefined, logger: AgentLogger): (pod: Pod) => Promise<void> {
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
