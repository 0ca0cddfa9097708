/**
 * @kubevol/core/engine: the parts `createVolumeManager` composes, for those who compose their own
 * loop: the desired and actual states of the world, the populator and the volume spec resolver,
 * the reconciler, the operation executor with its pending operations and backoff, the plugin
 * manager, the kubelet's directory layout, reconstruction after a restart and the volume journal.
 * These follow the kubelet's internals closely and change with them more often than the main entry.
 */
export { ChangeFeed, type VolumeChangeListener } from '../cache/change-feed.js'
export { type AddPodToVolumeOptions, DesiredStateOfWorld, type VolumeToMount, type VolumeToMountFilter } from '../cache/desired-state.js'
export {
  ActualStateOfWorld,
  type Attachability,
  type AttachedVolume,
  type DeviceMountState,
  type MarkVolumeOptions,
  type MountedVolume,
  type MountedVolumeFilter,
  type PodVolumeCheck,
  type VolumeMountState,
  VolumeNotInActualStateError,
} from '../cache/actual-state.js'
export { Populator, type PopulatorOptions } from '../populator/populator.js'
export { type ResolvedVolume, resolveVolumeSpec } from '../populator/volume-spec-resolver.js'
export { Reconciler, type ReconcilerOptions } from '../reconciler/reconciler.js'
export { OperationExecutor, type OperationListener, type OperationRecord, type OperationStart } from '../operations/operation-executor.js'
export { type OperationKey, PendingOperations, type PendingOperationsOptions, type StartResult } from '../operations/pending-operations.js'
export { type BackoffOptions, ExponentialBackoff, INITIAL_DURATION_BEFORE_RETRY_MS, MAX_DURATION_BEFORE_RETRY_MS } from '../operations/backoff.js'
export { createPluginManager, type PluginManager } from '../plugins/plugin-manager.js'
export { createPaths, type Paths } from '../paths.js'
export { getPodVolumeNames, type PodVolumeNames, uniqueVolumeNameForPod, uniqueVolumeNameFromDevice } from '../api/names.js'
export { type PodVolumeOnDisk, scanPodVolumes } from '../reconstruction/scan.js'
export { type ReconstructionContext, type ReconstructionResult, reconstructVolumes } from '../reconstruction/reconstruct.js'
export { cleanupOrphanedPodDirs, type OrphanCleanupContext, type OrphanCleanupReport } from '../reconstruction/orphans.js'
export { type JournalOptions, type JournalRecord, type JournalVolume, parseJournal, replay, VolumeJournal } from '../journal/journal.js'
