/**
 * The VolumeManager (SPEC §2): wires the caches, populator, reconciler and operation executor,
 * runs their loops, and answers the node agent's questions.
 *
 * The loops are event-driven: a change to either state schedules a pass in the same turn of the
 * event loop, a failed operation schedules one when its backoff ends, and a slow periodic resync
 * catches the rest. `pollingCompat` reproduces the kubelet's timing instead (100 ms loops, 300 ms
 * wait polls) so the two can be measured side by side.
 */
import type { Pod } from './api/kubernetes.js'
import { type UniquePodName, type UniqueVolumeName, expectedVolumeNames, uniquePodName } from './api/names.js'
import { podUIDError } from './api/validation.js'
import { ActualStateOfWorld, type AttachedVolume, type MountedVolume } from './cache/actual-state.js'
import { DesiredStateOfWorld, type VolumeToMount } from './cache/desired-state.js'
import { type Clock, systemClock, yieldToEventLoop } from './clock.js'
import { ConfigError, WaitError, errorMessage } from './errors.js'
import type { Host } from './host/host.js'
import {
  type Logger,
  type Metrics,
  type Recorder,
  type VolumeEvent,
  silentLogger,
  silentMetrics,
  silentRecorder,
} from './observability.js'
import type { OperationContext } from './operations/context.js'
import { OperationExecutor, type OperationRecord } from './operations/operation-executor.js'
import { PendingOperations } from './operations/pending-operations.js'
import { createPaths, type Paths } from './paths.js'
import { type PluginManager, createPluginManager } from './plugins/plugin-manager.js'
import type { VolumePlugin } from './plugins/plugin.js'
import type { TokenSource } from './plugins/token-source.js'
import { isVolumeContentKind, podVolumesRead } from './populator/object-references.js'
import { Populator } from './populator/populator.js'
import type { ObjectReader, ObjectReference, PodSource } from './populator/sources.js'
import { Reconciler } from './reconciler/reconciler.js'
import { VolumeJournal } from './journal/journal.js'
import type { OrphanCleanupReport } from './reconstruction/orphans.js'
import { reconstructVolumes } from './reconstruction/reconstruct.js'
import { joinPath } from './paths.js'
import type { AbortSignalLike } from './signal.js'
import { OrphanCleanup } from './manager/orphan-cleanup.js'
import { PassScheduler } from './manager/pass-scheduler.js'
import { type MountedVolumeInfo, PodWaiters, type WaitOptions } from './manager/pod-waiters.js'
import { type VolumeStats, VolumeStatsCollector } from './manager/volume-stats.js'

export { POD_ATTACH_AND_MOUNT_RETRY_INTERVAL_MS, POD_ATTACH_AND_MOUNT_TIMEOUT_MS } from './manager/pod-waiters.js'
export type { MountedVolumeInfo, WaitOptions } from './manager/pod-waiters.js'
export type { VolumeStats } from './manager/volume-stats.js'

/** The kubelet's reconciler and populator loop period (used with `pollingCompat`). */
export const LOOP_SLEEP_PERIOD_MS = 100
/** `Attacher.waitForAttach` deadline. */
export const WAIT_FOR_ATTACH_TIMEOUT_MS = 600_000

export interface VolumeManagerOptions {
  readonly host: Host
  readonly plugins: readonly VolumePlugin[]
  readonly podSource: PodSource
  readonly objects: ObjectReader
  /** This node's name. */
  readonly nodeName: string
  /** @default '/var/lib/kubevol' */
  readonly rootDir?: string
  /**
   * An attach/detach controller attaches volumes; kubevol waits for it (kubelet default).
   * false: kubevol attaches and detaches itself.
   * @default true
   */
  readonly controllerAttachDetach?: boolean
  /** Reproduce the kubelet's polling timing instead of reacting to events. @default false */
  readonly pollingCompat?: boolean
  /** Full pass over every volume and pod, catching what no event announced; 0 turns it off. @default 10000 */
  readonly resyncPeriodMs?: number
  /**
   * How often volumes that are set up again on every sync (configMap, secret, downwardAPI,
   * projected) are refreshed when no event asked for it; 0 turns it off. With an object reader
   * that `announcesChanges` (and not in `pollingCompat`), only volumes whose content no event
   * announces are (a projected service account token); the others are set up again when the pod
   * or an object they read changes. @default 60000 (the kubelet's pod sync period)
   */
  readonly remountPeriodMs?: number
  /**
   * How often the claims and PVs of mounted volumes are read again to find a grown PV (SPEC §4.4),
   * beyond the claim and PV changes the object reader announces; 0 turns it off. An API reader
   * learns of a change only by reading, so this is what finds it there. @default 60000 (the
   * kubelet's pod sync period, on which it finds them)
   */
  readonly expansionCheckPeriodMs?: number
  /**
   * How often volume usage is collected (emptyDir sizeLimit events); 0 turns it off. Agents that
   * export stats call `collectVolumeStats` themselves. @default 60000
   */
  readonly statsPeriodMs?: number
  /** How soon a pod whose volumes could not all be added is tried again. @default 100 (the kubelet's loop) */
  readonly populatorRetryMs?: number
  readonly clock?: Clock
  readonly logger?: Logger
  readonly recorder?: Recorder
  readonly metrics?: Metrics
  /** Service account tokens for projected serviceAccountToken volumes. */
  readonly tokens?: TokenSource
  /**
   * Keep a durable journal of intents and outcomes under the root directory, so a restart knows
   * every attachment and mount kubevol may have left. `'read-only'` reads it for reconstruction
   * and records nothing (a dry run). @default true when the host can append (`host.appendFile`)
   */
  readonly journal?: boolean | 'read-only'
  /** How often orphaned pod directories are looked for (kubelet housekeeping); 0 turns it off. @default 10000 */
  readonly housekeepingPeriodMs?: number
  /** Backoff after a failed operation. @default { initialMs: 500, maxMs: 122000 } */
  readonly backoff?: { readonly initialMs?: number; readonly maxMs?: number }
}

/** What the manager holds, for status pages and the docs playground. */
export interface VolumeManagerSnapshot {
  readonly desired: readonly VolumeToMount[]
  readonly mounted: readonly MountedVolume[]
  readonly attached: readonly AttachedVolume[]
  readonly podErrors: ReadonlyMap<UniquePodName, readonly string[]>
  readonly runningOperations: number
  readonly sourcesReady: boolean
  readonly statesSynced: boolean
  /** Clock time of the last reconcile pass (0 before the first): a liveness signal. */
  readonly lastReconcileAt: number
  /** The journal's size, when kubevol keeps one. */
  readonly journal?: { readonly records: number; readonly bytes: number }
}

/** What the manager announces as it works. */
export type VolumeManagerEvent =
  | { readonly type: 'operation'; readonly operation: OperationRecord }
  | { readonly type: 'event'; readonly event: VolumeEvent }
  | { readonly type: 'state-changed'; readonly volumeName: UniqueVolumeName }

export interface VolumeManager {
  /** Runs the loops until `signal` aborts. Resolves after the loops have stopped. */
  run(signal: AbortSignalLike): Promise<void>
  /**
   * Resolves when every volume the pod's containers use is mounted; rejects with the pod's errors
   * or on timeout with "unmounted volumes=[...], unattached volumes=[...], failed to process volumes=[...]:
   * context deadline exceeded" (a {@link WaitError}; `interrupted` tells a timeout or abort from pod errors).
   * The volumes expected are read from `pod` when the wait starts, as the kubelet does: a pod
   * changed in place afterwards does not change what this call waits for.
   */
  waitForAttachAndMount(pod: Pod, options?: WaitOptions): Promise<void>
  /** Resolves when no volume of the pod is mounted (uncertain ones do not count, as in the kubelet). */
  waitForUnmount(pod: Pod, options?: WaitOptions): Promise<void>
  /** waitForUnmount for each pod; rejects with every error joined. */
  waitForAllPodsUnmount(pods: readonly Pod[], options?: WaitOptions): Promise<void>
  /**
   * Outer name → mounted volume (state mounted only); empty for a pod the manager does not know.
   * Takes the pod or its unique name, which is its UID (`metadata.uid`), not `namespace/name`:
   * throws {@link ConfigError} for a string that cannot be a pod UID (`"default/web"`), or a pod
   * without a UID.
   */
  getMountedVolumesForPod(pod: Pod | UniquePodName): Map<string, MountedVolumeInfo>
  /**
   * Any volume of the pod mounted or uncertain: its directories must not be removed. Takes the pod
   * or its UID, as {@link VolumeManager.getMountedVolumesForPod} does, and throws as it does.
   */
  hasPossiblyMountedVolumesForPod(pod: Pod | UniquePodName): boolean
  /** GIDs from `pv.beta.kubernetes.io/gid` of the pod's mounted volumes, not already supplemental. */
  getExtraSupplementalGroupsForPod(pod: Pod): number[]
  /** Sorted attachable volumes desired or attached: `node.status.volumesInUse`. */
  getVolumesInUse(): UniqueVolumeName[]
  /** Sets reportedInUse for these volumes and clears it for all others. */
  markVolumesAsReportedInUse(names: readonly UniqueVolumeName[]): void
  volumeIsAttached(volumeName: UniqueVolumeName): boolean
  reconcilerStatesHaveBeenSynced(): boolean
  snapshot(): VolumeManagerSnapshot
  /** Calls `listener` for every operation start/end, event and state change. */
  subscribe(listener: (event: VolumeManagerEvent) => void): () => void
  /**
   * Removes the directories of pods no source knows and nothing has mounted, never deleting through
   * a mount point; reports what it removed and what it refused. The manager runs it periodically once
   * sources are ready; `dryRun` only reports.
   */
  cleanupOrphanedPods(options?: { dryRun?: boolean }): Promise<OrphanCleanupReport>
  /** One populator pass (for tests and tools that drive the manager by hand). */
  populateOnce(): Promise<void>
  /** One reconcile pass over every volume. */
  reconcileOnce(): void
  /**
   * Capacity and usage of each mounted volume (the kubelet's volume stats). A disk emptyDir whose
   * usage exceeds its sizeLimit is reported with a Warning event `EmptyDirSizeLimitExceeded` on the
   * pod, once per crossing. Volumes whose plugin cannot tell are left out.
   */
  collectVolumeStats(): Promise<VolumeStats[]>
  /**
   * Resolves when no operation is running and no pass is due (a failed operation's backoff timer may
   * still be set).
   */
  waitForIdle(): Promise<void>
  readonly desiredState: DesiredStateOfWorld
  readonly actualState: ActualStateOfWorld
  readonly executor: OperationExecutor
  readonly pluginManager: PluginManager
  readonly paths: Paths
}

/**
 * The unique name of a pod given as a Pod or a string. A unique pod name is the pod's UID, so a
 * string that cannot be one (`namespace/name` is the usual mistake) is refused rather than matching
 * nothing.
 */
function podNameOf(method: string, pod: Pod | UniquePodName): UniquePodName {
  if (typeof pod !== 'string') return uniquePodName(pod)
  const reason = podUIDError(pod)
  if (reason) {
    throw new ConfigError(`${method}: ${JSON.stringify(pod)} is not a pod's unique name, ${reason}; a pod's unique name is its UID (metadata.uid): pass the Pod or its UID`)
  }
  return pod
}

/** What `createVolumeManager` cannot run without, with an example of each. */
const REQUIRED_OPTIONS = {
  host: 'a Host, e.g. createMemoryHost() from @kubevol/adapter-mock',
  plugins: 'an array of volume plugins, e.g. createBuiltinPlugins()',
  podSource: 'a PodSource, e.g. createMemoryPodSource()',
  objects: 'an ObjectReader, e.g. createMemoryObjectReader()',
} as const

/** Creates a volume manager. Throws {@link ConfigError} on invalid options, naming the option. */
export function createVolumeManager(options: VolumeManagerOptions): VolumeManager {
  for (const [name, what] of Object.entries(REQUIRED_OPTIONS)) {
    const value = (options as unknown as Record<string, unknown>)[name]
    if (value === undefined || value === null) throw new ConfigError(`createVolumeManager: the ${name} option is required: ${what}`)
  }
  if (!Array.isArray(options.plugins)) throw new ConfigError(`createVolumeManager: the plugins option must be ${REQUIRED_OPTIONS.plugins}`)
  if (!options.nodeName) throw new ConfigError('nodeName is required')
  const clock = options.clock ?? systemClock
  const logger = options.logger ?? silentLogger
  const metrics = options.metrics ?? silentMetrics
  const listeners = new Set<(event: VolumeManagerEvent) => void>()
  const emit = (event: VolumeManagerEvent): void => {
    for (const listener of listeners) listener(event)
  }
  const baseRecorder = options.recorder ?? silentRecorder
  const recorder: Recorder = {
    event(event) {
      baseRecorder.event(event)
      emit({ type: 'event', event })
    },
  }
  const paths = createPaths(options.rootDir ?? '/var/lib/kubevol')
  const pluginManager = createPluginManager(options.plugins, {
    host: options.host,
    paths,
    nodeName: options.nodeName,
    objects: options.objects,
    clock,
    logger,
    recorder,
    metrics,
    ...(options.tokens ? { tokens: options.tokens } : {}),
  })
  const dsw = new DesiredStateOfWorld(pluginManager, clock)
  const asw = new ActualStateOfWorld(pluginManager)
  const polling = options.pollingCompat ?? false
  const controllerAttachDetach = options.controllerAttachDetach ?? true
  const resyncPeriodMs = options.resyncPeriodMs ?? 10_000
  const populatorRetryMs = options.populatorRetryMs ?? LOOP_SLEEP_PERIOD_MS

  let started = false
  // Settles when a started manager has finished reconstruction and its passes run.
  let passesRunning: Promise<void> = Promise.resolve()
  let markPassesRunning = (): void => {}
  // ---- when passes run (manager/pass-scheduler.ts) ----
  const scheduler = new PassScheduler({
    clock,
    polling,
    reconcile: () => {
      reconciler.reconcileOnce()
      return reconciler.resyncPending
    },
    populate: () => populate(),
  })
  const setTimer = (ms: number, fn: () => void): void => scheduler.setTimer(ms, fn)
  const scheduleReconcile = (): void => scheduler.scheduleReconcile()
  const schedulePopulate = (): void => scheduler.schedulePopulate()

  const pending = new PendingOperations({
    clock,
    backoff: options.backoff,
    onComplete(key, _error, retryAt) {
      reconciler.markDirty(key.volumeName)
      scheduleReconcile()
      if (retryAt !== undefined && scheduler.running && !polling) {
        setTimer(Math.max(0, retryAt - clock.now()) + 1, () => {
          reconciler.markDirty(key.volumeName)
          scheduleReconcile()
        })
      }
    },
  })
  const ctx: { -readonly [K in keyof OperationContext]: OperationContext[K] } = {
    plugins: pluginManager,
    asw,
    host: options.host,
    paths,
    nodeName: options.nodeName,
    objects: options.objects,
    clock,
    logger,
    recorder,
    metrics,
    waitForAttachTimeoutMs: WAIT_FOR_ATTACH_TIMEOUT_MS,
  }
  const executor = new OperationExecutor(ctx, pending)
  executor.subscribe((operation) => emit({ type: 'operation', operation }))
  const populator = new Populator({ dsw, asw, pods: options.podSource, objects: options.objects, plugins: pluginManager, logger })
  let hadAddedPods = false
  // Volumes reconstruction found, to be marked reported in use once the desired state is populated.
  let reconstructedToReport: readonly UniqueVolumeName[] = []
  const reconciler = new Reconciler({
    dsw,
    asw,
    executor,
    clock,
    logger,
    controllerAttachDetach,
    populatorHasAddedPods: () => populator.hasAddedPods(),
    metrics,
  })

  const stats = new VolumeStatsCollector({ dsw, asw, plugins: pluginManager, logger, recorder, clock })
  const orphans = new OrphanCleanup({
    host: options.host,
    paths,
    nodeName: options.nodeName,
    logger,
    metrics,
    recorder,
    clock,
    podInUse: (pod) =>
      options.podSource.getPodByUID(pod) !== undefined ||
      !options.podSource.shouldPodRuntimeBeRemoved(pod) ||
      dsw.getPods().has(pod) ||
      asw.podHasPossiblyMountedVolumes(pod),
  })

  // ---- waiters, resolved by notification (manager/pod-waiters.ts) ----
  const waiters = new PodWaiters({ dsw, asw, plugins: pluginManager, clock, polling })

  const onVolumeChange = (volumeName: UniqueVolumeName, podName?: UniquePodName): void => {
    reconciler.markDirty(volumeName)
    scheduleReconcile()
    waiters.podChanged(podName)
    if (listeners.size > 0) emit({ type: 'state-changed', volumeName })
  }
  dsw.changes.subscribe(onVolumeChange)
  asw.changes.subscribe(onVolumeChange)

  // ---- the populator pass ----
  let retryTimerSet = false
  const populate = async (): Promise<void> => {
    try {
      await populator.populateOnce()
    } catch (err) {
      logger.error('Populator pass failed', { err: errorMessage(err) })
    }
    if (!hadAddedPods && populator.hasAddedPods()) {
      hadAddedPods = true
      markReconstructedReportedInUse()
      // Unmounting just became safe: look at everything once.
      reconciler.markAllDirty()
      scheduleReconcile()
    }
    if (scheduler.running && !polling && !retryTimerSet && populator.hasUnprocessedPods()) {
      retryTimerSet = true
      setTimer(populatorRetryMs, () => {
        retryTimerSet = false
        schedulePopulate()
      })
    }
    // Pod errors are only recorded by the populator: the waiters of pods with errors learn about
    // them after a pass.
    for (const podName of dsw.getPodsWithErrors()) waiters.checkNow(podName)
  }
  /**
   * SPEC §5.4 (kubelet 1.27+ `volumesNeedReportedInUse`): once the desired state is populated,
   * every reconstructed volume counts as reported in node status, so that a controller-attached
   * volume a running pod uses is not held back until the next node status report; the volume was
   * in use, and reported, before the restart. The kubelet's MarkVolumesReportedInUse clears the
   * mark of every other volume; here the marks already set stay, so a volume the agent reported
   * in the meantime is not held back for one more report.
   */
  function markReconstructedReportedInUse(): void {
    if (reconstructedToReport.length === 0) return
    const reported = new Set<UniqueVolumeName>(reconstructedToReport)
    for (const vtm of dsw.getVolumesToMount()) if (vtm.reportedInUse) reported.add(vtm.volumeName)
    reconstructedToReport = []
    dsw.markVolumesReportedInUse([...reported])
  }
  // The kubelet re-syncs a pod on every update (ReprocessPod): volumes built from the pod or from
  // objects (downwardAPI labels, configMaps, tokens) are set up again.
  const reprocessRemountPods = (): void => {
    for (const pod of dsw.podsRequiringRemount()) populator.reprocessPod(pod)
    schedulePopulate()
  }
  // A named object that changed: the pods whose volumes read it (a ConfigMap or Secret; no such
  // volume reads a claim or a PV). A change the reader cannot name: every pod with such volumes.
  // Either way a pass, for pods waiting for a claim.
  const onObjectChange = (changed?: ObjectReference): void => {
    if (!changed) {
      reprocessRemountPods()
      return
    }
    if (isVolumeContentKind(changed.kind)) {
      for (const uid of dsw.podsRequiringRemount()) {
        const pod = options.podSource.getPodByUID(uid)
        if (pod && podVolumesRead(pod, changed)) populator.reprocessPod(uid)
      }
    }
    // A grown PV (or a claim asking for a node resize) is expanded without waiting for a pod update.
    if (changed.kind === 'PersistentVolume' || changed.kind === 'PersistentVolumeClaim') checkExpansion(changed)
    schedulePopulate()
  }
  const checkExpansion = (changed?: ObjectReference): void => {
    if (scheduler.running) void populator.checkVolumeExpansion(changed).catch((err: unknown) => logger.warn('Volume expansion check failed', { err: errorMessage(err) }))
  }
  // A pod changed: that pod alone is looked at again (and set up again when its volumes require it),
  // as the kubelet syncs the pod that changed; without a UID, every pod.
  const onPodChange = (uid?: string): void => {
    if (uid === undefined) {
      populator.podChanged()
      reprocessRemountPods()
      return
    }
    populator.podChanged(uid)
    if (dsw.podRequiresRemount(uid)) populator.reprocessPod(uid)
    schedulePopulate()
  }
  // ---- what run() starts ----
  /** The journal of intents: read only, or opened for writing when the host can append. */
  async function openJournal(): Promise<VolumeJournal | undefined> {
    const journalPath = joinPath(paths.root, 'journal', 'volumes.log')
    if (options.journal === 'read-only') return VolumeJournal.read({ host: options.host, path: journalPath, logger })
    if (!(options.journal ?? true) || !options.host.appendFile) return undefined
    const journal = await VolumeJournal.open({ host: options.host, path: journalPath, logger })
    ctx.journal = journal
    return journal
  }

  /**
   * Controller mode after a restart: unmounting waits until the reconstructed volumes know their
   * device paths (and attachability) from node status, read until it answers.
   */
  function followNodeStatus(reconstructed: readonly UniqueVolumeName[]): void {
    const getNode = options.objects.getNode
    if (!getNode) return
    reconciler.addVolumesNeedingNodeStatus(reconstructed)
    const refresh = (): void => {
      void getNode(options.nodeName).then(
        (node) => {
          const attached = new Map((node.status?.volumesAttached ?? []).map((v) => [v.name, v.devicePath]))
          for (const name of reconstructed) {
            const devicePath = attached.get(name)
            if (devicePath !== undefined) asw.updateReconstructedDevicePath(name, devicePath)
            asw.updateReconstructedVolumeAttachability(name, devicePath !== undefined)
          }
          reconciler.clearVolumesNeedingNodeStatus()
          scheduleReconcile()
        },
        (err: unknown) => {
          logger.warn('Could not read node status for reconstructed volumes; retrying', { err: errorMessage(err) })
          if (scheduler.running) setTimer(1_000, refresh)
        },
      )
    }
    refresh()
  }

  /**
   * The populator and reconciler loops: the kubelet's 100 ms ticks with pollingCompat; otherwise
   * passes on pod and object changes, and a resync every `resyncPeriodMs` for what no event announced.
   */
  function startLoops(unsubscribe: (() => void)[]): void {
    if (polling) {
      const populateTick = (): void => {
        // The kubelet's loop: every pod, every time.
        populator.podChanged()
        void populate().then(() => scheduler.running && setTimer(LOOP_SLEEP_PERIOD_MS, populateTick))
      }
      const reconcileTick = (): void => {
        reconciler.markAllDirty()
        reconciler.reconcileOnce()
        setTimer(LOOP_SLEEP_PERIOD_MS, reconcileTick)
      }
      populateTick()
      reconcileTick()
      return
    }
    unsubscribe.push(options.podSource.subscribe(onPodChange))
    // A changed ConfigMap, Secret, ... refreshes the volumes built from objects (the kubelet does
    // this on each pod sync); a changed claim may unblock a pod waiting for it.
    if (options.objects.subscribe) unsubscribe.push(options.objects.subscribe(onObjectChange))
    reconciler.markAllDirty()
    scheduleReconcile()
    schedulePopulate()
    scheduler.every(resyncPeriodMs, () => {
      reconciler.queueResync()
      scheduleReconcile()
      populator.podChanged()
      schedulePopulate()
    })
  }

  /** The periods beside the loops; each 0 turns its work off. */
  function startPeriodicWork(): void {
    // The kubelet's pod sync period: what no event announces (a token at 80% of its lifetime,
    // every object read through a reader that finds changes only by reading) is refreshed at
    // least this often. With a reader that announces changes, volumes built only from objects
    // and the pod are left to those events: steady-state work follows changes, not node size.
    const eventsSuffice = !polling && options.objects.announcesChanges === true && options.objects.subscribe !== undefined
    scheduler.every(options.remountPeriodMs ?? 60_000, () => {
      for (const pod of dsw.podsRequiringRemount({ timedOnly: eventsSuffice })) populator.reprocessPod(pod)
      schedulePopulate()
    })
    scheduler.every(options.expansionCheckPeriodMs ?? 60_000, () => checkExpansion())
    scheduler.every(options.housekeepingPeriodMs ?? 10_000, () => {
      if (populator.hasAddedPods() && reconciler.statesHaveBeenSynced()) void manager.cleanupOrphanedPods().catch(() => undefined)
    })
    scheduler.every(options.statsPeriodMs ?? 60_000, () => {
      void manager.collectVolumeStats().catch((err: unknown) => logger.warn('Collecting volume stats failed', { err: errorMessage(err) }))
    })
  }

  const manager: VolumeManager = {
    desiredState: dsw,
    actualState: asw,
    executor,
    pluginManager,
    paths,

    async run(signal) {
      if (started) throw new ConfigError('the volume manager is already running')
      started = true
      passesRunning = new Promise((resolve) => {
        markPassesRunning = resolve
      })
      const unsubscribe: (() => void)[] = []
      try {
        const seLinux = (await options.host.selinux?.enabled().catch(() => false)) ?? false
        dsw.setSELinuxEnabled(seLinux)
        asw.setSELinuxEnabled(seLinux)
        // Before the first pass: the journal first, then the disk (SPEC §5.4 and beyond).
        const journal = await openJournal()
        const rebuilt = await reconstructVolumes({ host: options.host, paths, plugins: pluginManager, asw, logger, metrics, journal })
        reconstructedToReport = rebuilt.reconstructed
        reconciler.setFailedReconstruction(rebuilt.failed)
        // Only now do passes run: a pass before reconstruction would see a half-built actual state.
        scheduler.running = true
        markPassesRunning()
        if (controllerAttachDetach && options.objects.getNode && rebuilt.reconstructed.length > 0) followNodeStatus(rebuilt.reconstructed)
        startLoops(unsubscribe)
        startPeriodicWork()
        await new Promise<void>((resolve) => {
          if (signal.aborted) resolve()
          else signal.addEventListener('abort', () => resolve(), { once: true })
        })
        logger.info('Shutting down volume manager')
      } finally {
        scheduler.stop()
        started = false
        markPassesRunning()
        for (const off of unsubscribe) off()
        // Outcome records are written without waiting for them: once run() returns, none is left.
        await ctx.journal?.flush()
      }
    },

    waitForAttachAndMount(pod, wait) {
      const podName = uniquePodName(pod)
      if (expectedVolumeNames(pod).length === 0) return Promise.resolve()
      populator.reprocessPod(podName)
      schedulePopulate()
      return waiters.waitForAttachAndMount(pod, podName, wait)
    },

    waitForUnmount(pod, wait) {
      const podName = uniquePodName(pod)
      populator.reprocessPod(podName)
      schedulePopulate()
      return waiters.waitForUnmount(podName, wait)
    },

    async waitForAllPodsUnmount(pods, wait) {
      const results = await Promise.allSettled(pods.map((pod) => manager.waitForUnmount(pod, wait)))
      const errors = results.flatMap((r) => (r.status === 'rejected' ? [errorMessage(r.reason)] : []))
      if (errors.length > 0) throw new WaitError(errors.join('; '))
    },

    getMountedVolumesForPod(pod) {
      return waiters.mountedVolumesForPod(podNameOf('getMountedVolumesForPod', pod))
    },

    hasPossiblyMountedVolumesForPod(pod) {
      return asw.podHasPossiblyMountedVolumes(podNameOf('hasPossiblyMountedVolumesForPod', pod))
    },

    getExtraSupplementalGroupsForPod(pod) {
      const podName = uniquePodName(pod)
      const existing = new Set(pod.spec?.securityContext?.supplementalGroups ?? [])
      const result: number[] = []
      for (const mv of asw.getMountedVolumesForPod(podName)) {
        if (!/^-?\d+$/.test(mv.volumeGidValue)) continue
        const gid = Number(mv.volumeGidValue)
        if (!Number.isSafeInteger(gid) || existing.has(gid) || result.includes(gid)) continue
        result.push(gid)
      }
      return result
    },

    getVolumesInUse() {
      const names = new Set<UniqueVolumeName>()
      for (const name of dsw.volumeNames()) if (dsw.isVolumeAttachable(name)) names.add(name)
      for (const av of asw.getAttachedVolumes()) if (av.attachability === 'attachable') names.add(av.volumeName)
      return [...names].sort()
    },

    markVolumesAsReportedInUse(names) {
      dsw.markVolumesReportedInUse(names)
    },

    volumeIsAttached(volumeName) {
      return asw.volumeExists(volumeName)
    },

    reconcilerStatesHaveBeenSynced() {
      return reconciler.statesHaveBeenSynced()
    },

    snapshot() {
      const podErrors = new Map<UniquePodName, readonly string[]>()
      for (const pod of dsw.getPodsWithErrors()) podErrors.set(pod, dsw.peekPodErrors(pod))
      return {
        desired: dsw.getVolumesToMount(),
        mounted: asw.getAllMountedVolumes(),
        attached: asw.getAttachedVolumes(),
        podErrors,
        runningOperations: pending.runningCount,
        sourcesReady: populator.hasAddedPods(),
        statesSynced: reconciler.statesHaveBeenSynced(),
        lastReconcileAt: reconciler.lastPassAt,
        ...(ctx.journal ? { journal: ctx.journal.size } : {}),
      }
    },

    subscribe(listener) {
      listeners.add(listener)
      return () => listeners.delete(listener)
    },

    cleanupOrphanedPods(opts) {
      return orphans.run(opts)
    },

    async populateOnce() {
      populator.podChanged()
      await populate()
    },

    reconcileOnce() {
      reconciler.markAllDirty()
      reconciler.reconcileOnce()
    },

    collectVolumeStats() {
      return stats.collect()
    },

    async waitForIdle() {
      // An ended operation schedules the next pass, which may start the next step (unmount →
      // unmount device → detach): idle is when nothing runs and no pass is due.
      // A manager still reconstructing is not idle: its first passes are yet to come.
      if (started) await passesRunning
      for (;;) {
        await pending.wait()
        await yieldToEventLoop()
        // A stopped manager runs no more passes: what is left for one does not count.
        if (pending.runningCount === 0 && scheduler.nothingScheduled && (!scheduler.running || !reconciler.hasWork)) return
      }
    },
  }
  return manager
}
