/**
 * The CSI side of the Linux adapter: the CsiDriver port over gRPC on a unix socket, the kubelet
 * plugin-registration watcher, static registration, and the hostpath reference driver.
 */
export { createGrpcCsiDriver, type GrpcCsiDriver, type GrpcCsiDriverOptions, toCsiError } from './grpc-csi-driver.js'
export { type HostpathCsiDriverOptions, type HostpathCsiDriverServer, startHostpathCsiDriver } from './hostpath-driver.js'
export { CSI_PLUGIN_TYPE, type PluginWatcher, type PluginWatcherOptions, startPluginWatcher } from './plugin-watcher.js'
export { PROTO_DIR } from './proto.js'
export { registerStaticCsiDrivers, type StaticCsiDriver } from './static-drivers.js'
