/**
 * The reference CSI node driver for kubevol: file system volumes on host directories, raw block
 * volumes on loop devices, served over gRPC on a unix socket; and a node-driver-registrar stand-in
 * that registers it with a node agent.
 */
export { type HostpathCsiDriverOptions, type HostpathCsiDriverServer, startHostpathCsiDriver } from './driver.js'
export { type Registrar, type RegistrarOptions, startRegistrar } from './registrar.js'
