/**
 * @kubevol/adapter-linux: the Host port of @kubevol/core on the Linux kernel. mount(2), umount2(2),
 * loop ioctls and statfs through koffi (loaded on first use), files through node:fs,
 * the mount table from /proc/self/mountinfo, blkid/mkfs/fsck/resize2fs/xfs_growfs spawned.
 *
 * The front door: the Linux host (`createLinuxHost`, its options and doctor checks), the
 * mountinfo parser, and CSI over gRPC (the driver client, the registration watcher, the protos a
 * driver serves). How the host speaks to the kernel (errno mapping, mkfs and fsck arguments, mount
 * option planning) is not public.
 */
export type { StalledCall } from './call-runner.js'
export { createLinuxHost } from './create-linux-host.js'
export { LinuxHost } from './linux-host.js'
export type { LinuxHostOptions } from './options.js'
export type { HostCheck } from './doctor.js'
export { checkMountNamespace, checkRootPropagation } from './doctor.js'
export { type KernelFloor, kernelFloorRefusal, probeKernelFloor } from './kernel-floor.js'
export type { LinuxMountEntry } from './mountinfo.js'
export { MountInfoParseError, parseMountInfo } from './mountinfo.js'
export {
  CSI_PLUGIN_TYPE,
  createGrpcCsiDriver,
  csiProto,
  PROTO_DIR,
  registerStaticCsiDrivers,
  registrationProto,
  socketPath,
  startPluginWatcher,
  unixAddress,
} from './csi/index.js'
export type { CsiProto, GrpcCsiDriver, GrpcCsiDriverOptions, PluginWatcher, PluginWatcherOptions, RegistrationProto, StaticCsiDriver } from './csi/index.js'
