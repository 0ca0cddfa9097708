/**
 * The VolumeManager (SPEC §2): its options, its interface, and `createVolumeManager`. The manager
 * wires the caches, populator, reconciler and operation executor, runs their loops, and answers the
 * node agent's questions; how is in manager/ (manager-engine.ts composes the pass scheduler, the
 * pod waiters, volume stats and orphan housekeeping).
 *
 * The loops are event-driven: a change to either state schedules a pass in the same turn of the
 * event loop, a failed operation schedules one when its backoff ends, and a slow periodic resync
 * catches the rest. `pollingCompat` reproduces the kubelet's timing instead (100 ms loops, 300 ms
 * wait polls) so the two can be measured side by side.
 */
import type { Pod } from './api/kubernetes.js'
import type { UniquePodName, UniqueVolumeName } from './api/names.js'
import type { ActualStateOfWorld, AttachedVolume, MountedVolume } from './cache/actual-state.js'
import type { DesiredStateOfWorld, VolumeToMount } from './cache/desired-state.js'
import type { Clock } from './clock.js'
import { ConfigError, type WaitError } from './errors.js'
import type { Host } from './host/host.js'
import type { Logger, Metrics, Recorder, VolumeEvent } from './observability.js'
import type { OperationExecutor, OperationRecord } from './operations/operation-executor.js'
import type { Paths } from './paths.js'
import type { PluginManager } from './plugins/plugin-manager.js'
import type { VolumePlugin } from './plugins/plugin.js'
import type { TokenSource } from './plugins/token-source.js'
import type { ObjectReader, PodSource } from './populator/sources.js'
import type { OrphanCleanupReport } from './reconstruction/orphans.js'
import type { AbortSignalLike } from './signal.js'
import { ManagerEngine } from './manager/manager-engine.js'
import type { MountedVolumeInfo, WaitOptions } from './manager/pod-waiters.js'
import type { VolumeStats } from './manager/volume-stats.js'

export { POD_ATTACH_AND_MOUNT_RETRY_INTERVAL_MS, POD_ATTACH_AND_MOUNT_TIMEOUT_MS } from './manager/pod-waiters.js'
export type { MountedVolumeInfo, WaitOptions } from './manager/pod-waiters.js'
export type { VolumeStats } from './manager/volume-stats.js'

export { LOOP_SLEEP_PERIOD_MS, WAIT_FOR_ATTACH_TIMEOUT_MS } from './manager/manager-engine.js'

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
  /**
   * How many operations (mount, unmount, attach, ...) run at once. More wait in the order they
   * were started, each already pending for its volume (the reconciler sees it as running). An
   * operation that has run for `slowOperationMs` no longer counts, so a hung mount or a slow CSI
   * driver never holds the others back. The kubelet starts every operation at once (a goroutine
   * each); bounding them keeps a node converging 10,000 volumes from holding 10,000 operations'
   * state at once. 0 or `Infinity`: no bound, the kubelet's way.
   * @default 256
   */
  readonly maxRunningOperations?: number
  /**
   * How long an operation runs before it stops counting against `maxRunningOperations`: operations
   * that hang hold the queue back at most this long. Below the time an operation takes on a busy
   * node (queued behind the others at the host and the journal: 100 ms was often exceeded by 256
   * set-ups at once), slots free early and the bound stops holding.
   * @default 1000
   */
  readonly slowOperationMs?: number
}

/** What the manager holds, for status pages and the docs playground. */
export interface VolumeManagerSnapshot {
  readonly desired: readonly VolumeToMount[]
  readonly mounted: readonly MountedVolume[]
  readonly attached: readonly AttachedVolume[]
  readonly podErrors: ReadonlyMap<UniquePodName, readonly string[]>
  /** Operations started and not ended (never 0 while some are queued). */
  readonly runningOperations: number
  /** Operations waiting for a slot (`maxRunningOperations`); each is already pending for its volume. */
  readonly queuedOperations: number
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
  for (const name of ['maxRunningOperations', 'slowOperationMs'] as const) {
    const value = options[name]
    if (value !== undefined && !(typeof value === 'number' && value >= 0)) {
      throw new ConfigError(`createVolumeManager: the ${name} option must be a number ≥ 0, got ${String(value)}`)
    }
  }
  return new ManagerEngine(options)
}
