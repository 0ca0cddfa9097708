/**
 * @kubevol/adapter-linux: the Host port of @kubevol/core on the Linux kernel. mount(2), umount2(2),
 * loop ioctls and statfs through koffi (loaded on first use), files through node:fs,
 * the mount table from /proc/self/mountinfo, blkid/mkfs/fsck/resize2fs/xfs_growfs spawned.
 *
 * The front door: every public name is listed here.
 */
export type { StalledCall } from './call-runner.js'
export { createLinuxHost } from './create-linux-host.js'
export type { HostCheck } from './doctor.js'
export { checkMountNamespace, checkRootPropagation } from './doctor.js'
export { errnoError, toHostError } from './errno.js'
export { fsckVerdict, mkfsArgs, PARTITIONED, parseBlkidExport } from './filesystems.js'
export { LinuxHost } from './linux-host.js'
export type { MountCall, ParsedMountOptions } from './mount-options.js'
export { parseMountOptions, planMount } from './mount-options.js'
export type { LinuxMountEntry } from './mountinfo.js'
export {
  containingMount,
  deviceNumber,
  MountInfoParseError,
  mountsOfDevice,
  parseMountInfo,
  parseMountInfoLine,
  splitMountOptions,
  unescapeMountField,
} from './mountinfo.js'
export type { LinuxHostOptions } from './options.js'
export { resolveLinuxHostOptions } from './options.js'
export {
  CSI_PLUGIN_TYPE,
  createGrpcCsiDriver,
  csiProto,
  PROTO_DIR,
  registerStaticCsiDrivers,
  registrationProto,
  socketPath,
  startPluginWatcher,
  toCsiError,
  unixAddress,
} from './csi/index.js'
export type { CsiProto, GrpcCsiDriver, GrpcCsiDriverOptions, PluginWatcher, PluginWatcherOptions, RegistrationProto, StaticCsiDriver } from './csi/index.js'
