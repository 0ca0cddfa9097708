/**
 * The volume manager behind `createVolumeManager` (SPEC §2): it wires the caches, the populator,
 * the reconciler and the operation executor to the parts beside them in this folder (the pass
 * scheduler, the pod waiters, volume stats, orphan housekeeping, what run() starts), turns pod,
 * object and state changes into passes, and answers the node agent's questions. What each part decides is in its own
 * file; this one only says who tells whom. It stays one class a little over 450 lines because its
 * methods share the parts it wires (the fields below); everything with logic of its own is in the files
 * beside it.
 */
import type { Pod } from '../api/kubernetes.js'
import { type UniquePodName, type UniqueVolumeName, expectedVolumeNames, uniquePodName } from '../api/names.js'
import { ActualStateOfWorld } from '../cache/actual-state.js'
import { DesiredStateOfWorld } from '../cache/desired-state.js'
import { type Clock, systemClock, yieldToEventLoop } from '../clock.js'
import { ConfigError, WaitError, errorMessage } from '../errors.js'
import type { RootHandle } from '../host/host.js'
import { type Logger, type Recorder, silentLogger, silentMetrics, silentRecorder } from '../observability.js'
import type { OperationContext } from '../operations/context.js'
import { OperationExecutor } from '../operations/operation-executor.js'
import { PendingOperations } from '../operations/pending-operations.js'
import { type Paths, createPaths } from '../paths.js'
import { type PluginManager, createPluginManager } from '../plugins/plugin-manager.js'
import { isVolumeContentKind, podVolumesRead } from '../populator/object-references.js'
import { Populator } from '../populator/populator.js'
import type { ObjectReference } from '../populator/sources.js'
import { Reconciler } from '../reconciler/reconciler.js'
import type { OrphanCleanupReport } from '../reconstruction/orphans.js'
import { reconstructVolumes } from '../reconstruction/reconstruct.js'
import type { AbortSignalLike } from '../signal.js'
import type { VolumeManager, VolumeManagerEvent, VolumeManagerOptions, VolumeManagerSnapshot } from '../volume-manager.js'
import { OrphanCleanup } from './orphan-cleanup.js'
import { PassScheduler } from './pass-scheduler.js'
import { type MountedVolumeInfo, PodWaiters, type WaitOptions, podNameOf } from './pod-waiters.js'
import { LOOP_SLEEP_PERIOD_MS, type RunParts, followNodeStatus, openJournal, startLoops, startPeriodicWork } from './start-up.js'
import { type VolumeStats, VolumeStatsCollector } from './volume-stats.js'

export { LOOP_SLEEP_PERIOD_MS } from './start-up.js'
/** `maxRunningOperations` when not given (bench/README.md, "Operations in flight", has the measurements). */
const DEFAULT_MAX_RUNNING_OPERATIONS = 256
/** `slowOperationMs` when not given. */
const DEFAULT_SLOW_OPERATION_MS = 1000
/** `Attacher.waitForAttach` deadline. */
export const WAIT_FOR_ATTACH_TIMEOUT_MS = 600_000

/** The parts every other one is built from, made first so each constructor below gets them. */
interface Base {
  readonly clock: Clock
  readonly logger: Logger
  readonly recorder: Recorder
  readonly paths: Paths
  readonly plugins: PluginManager
}

export class ManagerEngine implements VolumeManager {
  readonly desiredState: DesiredStateOfWorld
  readonly actualState: ActualStateOfWorld
  readonly executor: OperationExecutor
  readonly pluginManager: PluginManager
  readonly paths: Paths
  readonly #o: VolumeManagerOptions
  readonly #clock: Clock
  readonly #logger: Logger
  readonly #recorder: Recorder
  readonly #polling: boolean
  readonly #listeners = new Set<(event: VolumeManagerEvent) => void>()
  readonly #ctx: { -readonly [K in keyof OperationContext]: OperationContext[K] }
  readonly #scheduler: PassScheduler
  readonly #pending: PendingOperations
  readonly #populator: Populator
  readonly #reconciler: Reconciler
  readonly #waiters: PodWaiters
  readonly #stats: VolumeStatsCollector
  readonly #orphans: OrphanCleanup
  #started = false
  /** Settles when a started manager has finished reconstruction and its passes run. */
  #passesRunning: Promise<void> = Promise.resolve()
  #markPassesRunning = (): void => {}
  #hadAddedPods = false
  #retryTimerSet = false
  /** Volumes reconstruction found, to be marked reported in use once the desired state is populated. */
  #reconstructedToReport: readonly UniqueVolumeName[] = []

  constructor(options: VolumeManagerOptions) {
    this.#o = options
    const base = this.#base(options)
    const { clock, logger } = base
    this.#clock = clock
    this.#logger = logger
    this.#recorder = base.recorder
    this.paths = base.paths
    this.pluginManager = base.plugins
    const dsw = (this.desiredState = new DesiredStateOfWorld(this.pluginManager, clock))
    const asw = (this.actualState = new ActualStateOfWorld(this.pluginManager))
    this.#polling = options.pollingCompat ?? false
    this.#scheduler = new PassScheduler({
      clock,
      polling: this.#polling,
      reconcile: () => {
        this.#reconciler.reconcileOnce()
        return this.#reconciler.resyncPending
      },
      populate: () => this.#populate(),
    })
    this.#pending = new PendingOperations({
      clock,
      backoff: options.backoff,
      maxRunning: options.maxRunningOperations ?? DEFAULT_MAX_RUNNING_OPERATIONS,
      slowAfterMs: options.slowOperationMs ?? DEFAULT_SLOW_OPERATION_MS,
      onComplete: (key, _error, retryAt) => this.#operationEnded(key.volumeName, retryAt),
    })
    this.#ctx = { ...this.#operationContext(base), asw }
    this.executor = new OperationExecutor(this.#ctx, this.#pending)
    this.executor.subscribe((operation) => this.#emit({ type: 'operation', operation }))
    this.#populator = new Populator({ dsw, asw, pods: options.podSource, objects: options.objects, plugins: this.pluginManager, logger })
    this.#reconciler = new Reconciler({
      dsw,
      asw,
      executor: this.executor,
      clock,
      logger,
      controllerAttachDetach: options.controllerAttachDetach ?? true,
      populatorHasAddedPods: () => this.#populator.hasAddedPods(),
      metrics: this.#ctx.metrics,
    })
    this.#stats = new VolumeStatsCollector({ dsw, asw, plugins: this.pluginManager, logger, recorder: this.#recorder, clock })
    this.#orphans = new OrphanCleanup({
      ...base,
      host: options.host,
      nodeName: options.nodeName,
      metrics: this.#ctx.metrics,
      podInUse: (pod) =>
        options.podSource.getPodByUID(pod) !== undefined ||
        !options.podSource.shouldPodRuntimeBeRemoved(pod) ||
        dsw.getPods().has(pod) ||
        asw.podHasPossiblyMountedVolumes(pod),
    })
    this.#waiters = new PodWaiters({ dsw, asw, plugins: this.pluginManager, paths: this.paths, clock, polling: this.#polling })
    dsw.changes.subscribe(this.#onVolumeChange)
    asw.changes.subscribe(this.#onVolumeChange)
  }

  async run(signal: AbortSignalLike): Promise<void> {
    if (this.#started) throw new ConfigError('the volume manager is already running')
    this.#started = true
    this.#passesRunning = new Promise((resolve) => {
      this.#markPassesRunning = resolve
    })
    const unsubscribe: (() => void)[] = []
    const { host, objects } = this.#o
    // The root held for the whole run: beneath it the host resolves no symlink at any level, so
    // nothing below is reached through one, whether or not the caller took kubevol's lock.
    let root: RootHandle | undefined
    try {
      root = await host.openRoot?.(this.paths.root)
      const seLinux = (await host.selinux?.enabled().catch(() => false)) ?? false
      this.desiredState.setSELinuxEnabled(seLinux)
      this.actualState.setSELinuxEnabled(seLinux)
      // Before the first pass: the journal first, then the disk (SPEC §5.4 and beyond).
      const { journal, writable } = await openJournal({ options: this.#o, paths: this.paths, logger: this.#logger, clock: this.#clock })
      if (writable) this.#ctx.journal = journal
      const { paths, pluginManager: plugins, actualState: asw } = this
      const rebuilt = await reconstructVolumes({ host, paths, plugins, asw, logger: this.#logger, metrics: this.#ctx.metrics, journal })
      this.#reconstructedToReport = rebuilt.reconstructed
      this.#reconciler.setFailedReconstruction(rebuilt.failed)
      // Only now do passes run: a pass before reconstruction would see a half-built actual state.
      this.#scheduler.running = true
      this.#markPassesRunning()
      const parts = this.#runParts()
      if ((this.#o.controllerAttachDetach ?? true) && objects.getNode && rebuilt.reconstructed.length > 0) followNodeStatus(parts, rebuilt.reconstructed)
      startLoops(parts, unsubscribe)
      startPeriodicWork(parts)
      await new Promise<void>((resolve) => {
        if (signal.aborted) resolve()
        else signal.addEventListener('abort', () => resolve(), { once: true })
      })
      this.#logger.info('Shutting down volume manager')
    } finally {
      this.#scheduler.stop()
      this.#started = false
      this.#markPassesRunning()
      for (const off of unsubscribe) off()
      // Outcome records are written without waiting for them: once run() returns, none is left.
      await this.#ctx.journal?.flush()
      await root?.close()
    }
  }

  waitForAttachAndMount(pod: Pod, wait?: WaitOptions): Promise<void> {
    const podName = uniquePodName(pod)
    if (expectedVolumeNames(pod).length === 0) return Promise.resolve()
    this.#populator.reprocessPod(podName)
    this.#scheduler.schedulePopulate()
    return this.#waiters.waitForAttachAndMount(pod, podName, wait)
  }

  waitForUnmount(pod: Pod, wait?: WaitOptions): Promise<void> {
    const podName = uniquePodName(pod)
    this.#populator.reprocessPod(podName)
    this.#scheduler.schedulePopulate()
    return this.#waiters.waitForUnmount(podName, wait)
  }

  async waitForAllPodsUnmount(pods: readonly Pod[], wait?: WaitOptions): Promise<void> {
    const results = await Promise.allSettled(pods.map((pod) => this.waitForUnmount(pod, wait)))
    const errors = results.flatMap((r) => (r.status === 'rejected' ? [errorMessage(r.reason)] : []))
    if (errors.length > 0) throw new WaitError(errors.join('; '))
  }

  getMountedVolumesForPod(pod: Pod | UniquePodName): Map<string, MountedVolumeInfo> {
    return this.#waiters.mountedVolumesForPod(podNameOf('getMountedVolumesForPod', pod))
  }

  hasPossiblyMountedVolumesForPod(pod: Pod | UniquePodName): boolean {
    return this.actualState.podHasPossiblyMountedVolumes(podNameOf('hasPossiblyMountedVolumesForPod', pod))
  }

  getExtraSupplementalGroupsForPod(pod: Pod): number[] {
    const podName = uniquePodName(pod)
    const existing = new Set(pod.spec?.securityContext?.supplementalGroups ?? [])
    const result: number[] = []
    for (const mv of this.actualState.getMountedVolumesForPod(podName)) {
      if (!/^-?\d+$/.test(mv.volumeGidValue)) continue
      const gid = Number(mv.volumeGidValue)
      if (!Number.isSafeInteger(gid) || existing.has(gid) || result.includes(gid)) continue
      result.push(gid)
    }
    return result
  }

  getVolumesInUse(): UniqueVolumeName[] {
    const names = new Set<UniqueVolumeName>()
    for (const name of this.desiredState.volumeNames()) if (this.desiredState.isVolumeAttachable(name)) names.add(name)
    for (const av of this.actualState.getAttachedVolumes()) if (av.attachability === 'attachable') names.add(av.volumeName)
    return [...names].sort()
  }

  markVolumesAsReportedInUse(names: readonly UniqueVolumeName[]): void {
    this.desiredState.markVolumesReportedInUse(names)
  }

  volumeIsAttached(volumeName: UniqueVolumeName): boolean {
    return this.actualState.volumeExists(volumeName)
  }

  reconcilerStatesHaveBeenSynced(): boolean {
    return this.#reconciler.statesHaveBeenSynced()
  }

  snapshot(): VolumeManagerSnapshot {
    const dsw = this.desiredState
    const podErrors = new Map<UniquePodName, readonly string[]>()
    for (const pod of dsw.getPodsWithErrors()) podErrors.set(pod, dsw.peekPodErrors(pod))
    return {
      desired: dsw.getVolumesToMount(),
      mounted: this.actualState.getAllMountedVolumes(),
      attached: this.actualState.getAttachedVolumes(),
      podErrors,
      runningOperations: this.#pending.runningCount,
      queuedOperations: this.#pending.queuedCount,
      sourcesReady: this.#populator.hasAddedPods(),
      statesSynced: this.#reconciler.statesHaveBeenSynced(),
      lastReconcileAt: this.#reconciler.lastPassAt,
      ...(this.#ctx.journal ? { journal: this.#ctx.journal.size } : {}),
    }
  }

  subscribe(listener: (event: VolumeManagerEvent) => void): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  cleanupOrphanedPods(options?: { dryRun?: boolean }): Promise<OrphanCleanupReport> {
    return this.#orphans.run(options)
  }

  async populateOnce(): Promise<void> {
    this.#populator.podChanged()
    await this.#populate()
  }

  reconcileOnce(): void {
    this.#reconciler.markAllDirty()
    this.#reconciler.reconcileOnce()
  }

  collectVolumeStats(): Promise<VolumeStats[]> {
    return this.#stats.collect()
  }

  async waitForIdle(): Promise<void> {
    // An ended operation schedules the next pass, which may start the next step (unmount →
    // unmount device → detach): idle is when nothing runs and no pass is due.
    // A manager still reconstructing is not idle: its first passes are yet to come.
    if (this.#started) await this.#passesRunning
    for (;;) {
      await this.#pending.wait()
      await yieldToEventLoop()
      // A stopped manager runs no more passes: what is left for one does not count.
      const scheduler = this.#scheduler
      if (this.#pending.runningCount === 0 && this.#pending.queuedCount === 0 && scheduler.nothingScheduled && (!scheduler.running || !this.#reconciler.hasWork)) return
    }
  }

  // ---- wiring ----

  #base(options: VolumeManagerOptions): Base {
    const clock = options.clock ?? systemClock
    const logger = options.logger ?? silentLogger
    const baseRecorder = options.recorder ?? silentRecorder
    // Every event the plugins and operations record is announced to subscribers too.
    const recorder: Recorder = {
      event: (event) => {
        baseRecorder.event(event)
        this.#emit({ type: 'event', event })
      },
    }
    const paths = createPaths(options.rootDir ?? '/var/lib/kubevol')
    const plugins = createPluginManager(options.plugins, {
      host: options.host,
      paths,
      nodeName: options.nodeName,
      objects: options.objects,
      clock,
      logger,
      recorder,
      metrics: options.metrics ?? silentMetrics,
      ...(options.tokens ? { tokens: options.tokens } : {}),
    })
    return { clock, logger, recorder, paths, plugins }
  }

  #operationContext(base: Base): Omit<OperationContext, 'asw'> {
    const o = this.#o
    return {
      plugins: base.plugins,
      host: o.host,
      paths: base.paths,
      nodeName: o.nodeName,
      objects: o.objects,
      clock: base.clock,
      logger: base.logger,
      recorder: base.recorder,
      metrics: o.metrics ?? silentMetrics,
      waitForAttachTimeoutMs: WAIT_FOR_ATTACH_TIMEOUT_MS,
    }
  }

  /** What the start-up steps (start-up.ts) use. */
  #runParts(): RunParts {
    return {
      options: this.#o,
      paths: this.paths,
      logger: this.#logger,
      dsw: this.desiredState,
      asw: this.actualState,
      populator: this.#populator,
      reconciler: this.#reconciler,
      scheduler: this.#scheduler,
      polling: this.#polling,
      populate: () => this.#populate(),
      onPodChange: this.#onPodChange,
      onObjectChange: this.#onObjectChange,
      checkExpansion: () => this.#checkExpansion(),
      cleanupOrphanedPods: () => this.cleanupOrphanedPods(),
      collectVolumeStats: () => this.collectVolumeStats(),
    }
  }

  #emit(event: VolumeManagerEvent): void {
    for (const listener of this.#listeners) listener(event)
  }

  // ---- changes become passes ----

  readonly #onVolumeChange = (volumeName: UniqueVolumeName, podName?: UniquePodName): void => {
    this.#reconciler.markDirty(volumeName)
    this.#scheduler.scheduleReconcile()
    this.#waiters.podChanged(podName)
    if (this.#listeners.size > 0) this.#emit({ type: 'state-changed', volumeName })
  }

  /** An operation ended: its volume is looked at again now, and when its backoff ends. */
  #operationEnded(volumeName: UniqueVolumeName, retryAt: number | undefined): void {
    this.#reconciler.markDirty(volumeName)
    this.#scheduler.scheduleReconcile()
    if (retryAt !== undefined && this.#scheduler.running && !this.#polling) {
      this.#scheduler.setTimer(Math.max(0, retryAt - this.#clock.now()) + 1, () => {
        this.#reconciler.markDirty(volumeName)
        this.#scheduler.scheduleReconcile()
      })
    }
  }

  // A pod changed: that pod alone is looked at again (and set up again when its volumes require it),
  // as the kubelet syncs the pod that changed; without a UID, every pod.
  readonly #onPodChange = (uid?: string): void => {
    if (uid === undefined) {
      this.#populator.podChanged()
      this.#reprocessRemountPods()
      return
    }
    this.#populator.podChanged(uid)
    if (this.desiredState.podRequiresRemount(uid)) this.#populator.reprocessPod(uid)
    this.#scheduler.schedulePopulate()
  }

  // A named object that changed: the pods whose volumes read it (a ConfigMap or Secret; no such
  // volume reads a claim or a PV). A change the reader cannot name: every pod with such volumes.
  // Either way a pass, for pods waiting for a claim.
  readonly #onObjectChange = (changed?: ObjectReference): void => {
    this.#populator.objectsChanged()
    if (!changed) {
      this.#reprocessRemountPods()
      return
    }
    if (isVolumeContentKind(changed.kind)) {
      for (const uid of this.desiredState.podsRequiringRemount()) {
        const pod = this.#o.podSource.getPodByUID(uid)
        if (pod && podVolumesRead(pod, changed)) this.#populator.reprocessPod(uid)
      }
    }
    // A grown PV (or a claim asking for a node resize) is expanded without waiting for a pod update.
    if (changed.kind === 'PersistentVolume' || changed.kind === 'PersistentVolumeClaim') this.#checkExpansion(changed)
    this.#scheduler.schedulePopulate()
  }

  // The kubelet re-syncs a pod on every update (ReprocessPod): volumes built from the pod or from
  // objects (downwardAPI labels, configMaps, tokens) are set up again.
  #reprocessRemountPods(): void {
    for (const pod of this.desiredState.podsRequiringRemount()) this.#populator.reprocessPod(pod)
    this.#scheduler.schedulePopulate()
  }

  #checkExpansion(changed?: ObjectReference): void {
    if (!this.#scheduler.running) return
    void this.#populator.checkVolumeExpansion(changed).catch((err: unknown) => this.#logger.warn('Volume expansion check failed', { err: errorMessage(err) }))
  }

  // ---- the populator pass ----

  async #populate(): Promise<void> {
    const populator = this.#populator
    try {
      await populator.populateOnce()
    } catch (err) {
      this.#logger.error('Populator pass failed', { err: errorMessage(err) })
    }
    if (!this.#hadAddedPods && populator.hasAddedPods()) {
      this.#hadAddedPods = true
      this.#markReconstructedReportedInUse()
      // Unmounting just became safe: look at everything once.
      this.#reconciler.markAllDirty()
      this.#scheduler.scheduleReconcile()
    }
    if (this.#scheduler.running && !this.#polling && !this.#retryTimerSet && populator.hasUnprocessedPods()) {
      this.#retryTimerSet = true
      this.#scheduler.setTimer(this.#o.populatorRetryMs ?? LOOP_SLEEP_PERIOD_MS, () => {
        this.#retryTimerSet = false
        this.#scheduler.schedulePopulate()
      })
    }
    // Pod errors are only recorded by the populator: the waiters of pods with errors learn about
    // them after a pass.
    for (const podName of this.desiredState.getPodsWithErrors()) this.#waiters.checkNow(podName)
  }

  /**
   * SPEC §5.4 (kubelet 1.27+ `volumesNeedReportedInUse`): once the desired state is populated,
   * every reconstructed volume counts as reported in node status, so that a controller-attached
   * volume a running pod uses is not held back until the next node status report; the volume was
   * in use, and reported, before the restart. The kubelet's MarkVolumesReportedInUse clears the
   * mark of every other volume; here the marks already set stay, so a volume the agent reported
   * in the meantime is not held back for one more report.
   */
  #markReconstructedReportedInUse(): void {
    if (this.#reconstructedToReport.length === 0) return
    const reported = new Set<UniqueVolumeName>(this.#reconstructedToReport)
    for (const vtm of this.desiredState.getVolumesToMount()) if (vtm.reportedInUse) reported.add(vtm.volumeName)
    this.#reconstructedToReport = []
    this.desiredState.markVolumesReportedInUse([...reported])
  }
}
