/**
 * @kubevol/core/plugins: the built-in volume plugins (what the kubelet compiles in), the CSI plugin
 * with its CsiDriver port and driver registry, and the helpers a plugin author reuses (format and
 * mount, mount-point cleanup, fsGroup ownership, the atomic writer). The plugin interface itself is
 * in the main entry.
 */
export { type BuiltinPluginOptions, createBuiltinPlugins } from './builtin.js'
export { createEmptyDirPlugin, EMPTY_DIR_PLUGIN_NAME, type EmptyDirPluginOptions } from './empty-dir.js'
export { createHostPathPlugin, HOST_PATH_PLUGIN_NAME } from './host-path.js'
export { createLocalPlugin, LOCAL_PLUGIN_NAME } from './local.js'
export { createFileDiskPlugin, FILE_DISK_DRIVER, FILE_DISK_PLUGIN_NAME } from './file-disk.js'
export {
  type AtomicWriteOptions,
  type AtomicWriteResult,
  type AtomicWriterPluginOptions,
  type AtomicWriterVolumeDefinition,
  CONFIG_MAP_PLUGIN_NAME,
  createAtomicWriterVolumePlugin,
  createConfigMapPlugin,
  createDownwardAPIPlugin,
  createProjectedPlugin,
  createSecretPlugin,
  DOWNWARD_API_PLUGIN_NAME,
  type FileProjection,
  type Payload,
  type PayloadRequest,
  PROJECTED_PLUGIN_NAME,
  type ProjectedPlugin,
  type ResourceList,
  SECRET_PLUGIN_NAME,
  type VolumeMedium,
  writeAtomically,
} from './atomic-writer-plugins.js'

// CSI: the plugin, the CsiDriver port a driver implements (in process or over gRPC), the registry.
export {
  classifyCsiError,
  createCsiDriverRegistry,
  createCsiPlugin,
  CSI_DEFAULT_TIMEOUT_MS,
  CSI_PLUGIN_NAME,
  type CsiAccessMode,
  type CsiCallOptions,
  type CsiDriver,
  type CsiDriverRegistry,
  CsiError,
  csiError,
  type CsiMountAccess,
  type CsiNodeCapability,
  type CsiNodeInfo,
  type CsiPluginInfo,
  type CsiPluginOptions,
  type CsiVolumeCapability,
  type CsiVolumePlugin,
  type CsiVolumeStats,
  GRPC_CODES,
  type GrpcCodeName,
  grpcCodeName,
  hasGrpcCode,
  isFinalCsiError,
  type NodeExpandVolumeRequest,
  type NodeGetVolumeStatsRequest,
  type NodePublishVolumeRequest,
  type NodeStageVolumeRequest,
  type NodeUnpublishVolumeRequest,
  type NodeUnstageVolumeRequest,
  type RegisteredCsiDriver,
  withDeadline,
} from './csi/index.js'

// For plugin authors: what the built-in plugins are made of.
export { isBlockSpec, isMultiAttachAllowed, mountOptionsOf } from '../api/volume-spec.js'
export { parseQuantity } from '../api/quantity.js'
export { isNodeExpansionError, NodeExpansionError, type NodeExpansionErrorKind } from './node-expansion-error.js'
export { type OwnershipResult, setVolumeOwnership, type VolumeOwnershipOptions } from './util/fs-group.js'
export { formatAndMount, FormatAndMountError, type FormatAndMountErrorType, type FormatAndMountOptions } from './util/safe-format-and-mount.js'
export { cleanupMountPoint } from './util/cleanup-mount-point.js'
