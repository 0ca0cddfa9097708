/**
 * The CSI plugin's front door: the plugin, the CsiDriver port, the driver registry, gRPC-code
 * classification and vol_data.json helpers.
 */
export { createCsiPlugin, type CsiPluginOptions, type CsiVolumePlugin } from './csi-plugin.js'
export type * from './csi-driver.js'
export { CsiError, GRPC_CODES, type GrpcCodeName, classifyCsiError, csiError, grpcCodeName, hasGrpcCode, isFinalCsiError } from './csi-error.js'
export { CSI_DEFAULT_TIMEOUT_MS, withDeadline } from './deadline.js'
export { type CsiDriverRegistry, type RegisteredCsiDriver, createCsiDriverRegistry } from './driver-registry.js'
export { attachmentName, ephemeralVolumeHandle } from './requests.js'
export { CSI_PLUGIN_NAME } from './runtime.js'
export { sha256Hex } from './sha256.js'
