/**
 * The CSI side of the Linux adapter: the CsiDriver port over gRPC on a unix socket, the kubelet
 * plugin-registration watcher, static registration, and the loaded .proto services for drivers
 * written against them (the reference driver lives in examples/csi-hostpath-driver).
 */
export { createGrpcCsiDriver, type GrpcCsiDriver, type GrpcCsiDriverOptions } from './grpc-csi-driver.js'
export { CSI_PLUGIN_TYPE, type PluginWatcher, type PluginWatcherOptions, startPluginWatcher } from './plugin-watcher.js'
export { type CsiProto, csiProto, PROTO_DIR, type RegistrationProto, registrationProto, socketPath, unixAddress } from './proto.js'
export { registerStaticCsiDrivers, type StaticCsiDriver } from './static-drivers.js'
