/**
 * @kubevol/core: the kubelet's VolumeManager as a pure TypeScript library.
 *
 * The front door, for those who embed a volume manager: `createVolumeManager` and what it is given
 * (the ports: Host, PodSource, ObjectReader, TokenSource, Clock, Logger, Recorder, Metrics), the
 * plugin interface, the Kubernetes types a user writes, the errors, and the in-memory sources. Every
 * public name is listed here; anything else is not a promise. For a smaller audience:
 *
 * - `@kubevol/core/plugins`: the built-in volume plugins, CSI, and helpers for plugin authors;
 * - `@kubevol/core/engine`: the caches, populator, reconciler, executor, reconstruction and
 *   journal, for those who compose their own loop;
 * - `@kubevol/core/host`: helpers for code that implements or drives a Host (POSIX paths, UTF-8,
 *   removal that never crosses a mount);
 * - `@kubevol/core/testing`: fakes, builders, the harness and the Host contract suite.
 */

// The volume manager
export {
  createVolumeManager,
  LOOP_SLEEP_PERIOD_MS,
  type MountedVolumeInfo,
  POD_ATTACH_AND_MOUNT_RETRY_INTERVAL_MS,
  POD_ATTACH_AND_MOUNT_TIMEOUT_MS,
  type VolumeManager,
  type VolumeManagerEvent,
  type VolumeManagerOptions,
  type VolumeManagerSnapshot,
  type VolumeStats,
  WAIT_FOR_ATTACH_TIMEOUT_MS,
  type WaitOptions,
} from './volume-manager.js'
// What a runtime gives each container: its mounts and devices, as the kubelet makes them, and as OCI mounts.
export {
  type ContainerDevice,
  type ContainerMount,
  type ContainerMounts,
  type ContainerMountsOptions,
  containerMounts,
  type MountPropagation,
} from './containers/container-mounts.js'
export { type OciMount, ociMounts, ociRootfsPropagation } from './containers/oci-mounts.js'
// What a snapshot, an event and a housekeeping pass hand back (the classes behind them are in ./engine).
export type { Attachability, AttachedVolume, DeviceMountState, MountedVolume, VolumeMountState } from './cache/actual-state.js'
export type { VolumeToMount } from './cache/desired-state.js'
export type { OperationRecord } from './operations/operation-executor.js'
export type { OrphanCleanupReport } from './reconstruction/orphans.js'
export type { Paths } from './paths.js'

// Ports
export type {
  BlockDevices,
  FileInfo,
  FileStep,
  Filesystems,
  FilesystemSize,
  FsStats,
  Host,
  LoopDevices,
  LoopDeviceStatus,
  MountEntry,
  MountRequest,
  PathHolders,
  RemoveUnmountedOptions,
  RootHandle,
  RootLock,
  SELinux,
  SubPaths,
  UnmountOptions,
} from './host/host.js'
export type { ObjectReader, ObjectReference, PodSource } from './populator/sources.js'
export type { ServiceAccountToken, TokenRequest, TokenSource } from './plugins/token-source.js'
export { type Clock, systemClock, type Timer } from './clock.js'
export type { AbortSignalLike } from './signal.js'
export {
  type EventTarget,
  type LogFields,
  type Logger,
  type MetricLabels,
  type Metrics,
  OPERATION_DURATION_BUCKETS,
  type Recorder,
  silentLogger,
  silentMetrics,
  silentRecorder,
  type VolumeEvent,
} from './observability.js'

// In-memory sources: production code for embedders that hold their pods and objects themselves.
export { createMemoryObjectReader, createMemoryPodSource, type MemoryObjectReader, type MemoryPodSource, type StoredObject } from './populator/memory-sources.js'

// The plugin interface
export type {
  AttachCapability,
  BlockCapability,
  BlockVolumeMapper,
  BlockVolumeUnmapper,
  DeviceMountCapability,
  DeviceMounterArgs,
  Mounter,
  MounterArgs,
  MounterAttributes,
  NodeExpandCapability,
  NodeResizeOptions,
  Unmounter,
  PreparedDeviceMount,
  VolumeMetrics,
  VolumePlugin,
  VolumePluginContext,
} from './plugins/plugin.js'
export { specFromPersistentVolume, specFromVolume, type VolumeSpec } from './api/volume-spec.js'

// Kubernetes objects and names
export type {
  AttachedVolumeStatus,
  ConfigMap,
  Container,
  CSIDriver,
  CSIPersistentVolumeSource,
  CSIVolumeSource,
  DownwardAPIVolumeFile,
  KeyToPath,
  Node,
  NodeSelectorRequirement,
  NodeSelectorTerm,
  ObjectFieldSelector,
  ObjectMeta,
  OwnerReference,
  PersistentVolume,
  PersistentVolumeClaim,
  PersistentVolumeClaimCondition,
  Pod,
  PodSecurityContext,
  PodSpec,
  ResourceFieldSelector,
  ResourceRequirements,
  Secret,
  SELinuxOptions,
  Volume,
  VolumeAttachment,
  VolumeDevice,
  VolumeMount,
  VolumeProjection,
  VolumeSource,
} from './api/kubernetes.js'
export { type UniquePodName, type UniqueVolumeName, uniquePodName } from './api/names.js'
// For pod sources: the kubelet's admission checks on a pod read from outside.
export { type FieldError, type FieldPath, validatePod } from './api/validation.js'

// Errors
export {
  ConfigError,
  ContainerMountsError,
  errorMessage,
  type FailureKind,
  failureKind,
  HostError,
  type HostErrorCode,
  isHostError,
  KubevolError,
  NotFoundError,
  OperationError,
  transientFailure,
  uncertainProgress,
  VolumeAttachLimitExceededError,
  VolumeOperationFailure,
  VolumeSpecError,
  WaitError,
} from './errors.js'
