/**
 * An OCI bundle for one container: `config.json` next to a root file system, with the container's
 * volumes as bind mounts (`ociMounts`) and its block devices as device nodes, as containerd writes
 * them for runc and crun.
 */
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { type ContainerDevice, type ContainerMount, ociMounts, ociRootfsPropagation } from '@kubevol/core'

export interface BundleOptions {
  /** The container's root file system (read-only in the container). */
  readonly rootfs: string
  /** The process: `command` and `args` of the container. */
  readonly args: readonly string[]
  readonly env?: Readonly<Record<string, string>>
  readonly hostname?: string
  /** From `containerMounts()`. */
  readonly mounts: readonly ContainerMount[]
  readonly devices: readonly ContainerDevice[]
  /** `securityContext.privileged`: every capability (a Bidirectional mount needs it to mount). */
  readonly privileged?: boolean
}

/** The capabilities by number (linux/capability.h). */
const CAPABILITIES = [
  'CHOWN', 'DAC_OVERRIDE', 'DAC_READ_SEARCH', 'FOWNER', 'FSETID', 'KILL', 'SETGID', 'SETUID', 'SETPCAP', 'LINUX_IMMUTABLE',
  'NET_BIND_SERVICE', 'NET_BROADCAST', 'NET_ADMIN', 'NET_RAW', 'IPC_LOCK', 'IPC_OWNER', 'SYS_MODULE', 'SYS_RAWIO', 'SYS_CHROOT',
  'SYS_PTRACE', 'SYS_PACCT', 'SYS_ADMIN', 'SYS_BOOT', 'SYS_NICE', 'SYS_RESOURCE', 'SYS_TIME', 'SYS_TTY_CONFIG', 'MKNOD', 'LEASE',
  'AUDIT_WRITE', 'AUDIT_CONTROL', 'SETFCAP', 'MAC_OVERRIDE', 'MAC_ADMIN', 'SYSLOG', 'WAKE_ALARM', 'BLOCK_SUSPEND', 'AUDIT_READ',
  'PERFMON', 'BPF', 'CHECKPOINT_RESTORE',
]

/**
 * A privileged container's capabilities: every one this process may hand on (its bounding set), as
 * containerd gives a privileged container all of its own.
 */
function privilegedCapabilities(): string[] {
  const bounding = BigInt(`0x${/^CapBnd:\s*([0-9a-f]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? '0'}`)
  return CAPABILITIES.filter((_, bit) => (bounding >> BigInt(bit)) & 1n).map((c) => `CAP_${c}`)
}

// The kernel's encoding of a device number (glibc's gnu_dev_major / gnu_dev_minor).
const major = (rdev: number): number => Number((BigInt(rdev) >> 8n) & 0xfffn) | Number((BigInt(rdev) >> 32n) & ~0xfffn)
const minor = (rdev: number): number => Number(BigInt(rdev) & 0xffn) | Number((BigInt(rdev) >> 12n) & ~0xffn)

/**
 * The device node of a container's block device: the pod's link (`hostPath`) is followed to the
 * mapped device, whose numbers the node gets; the device cgroup allows it with the permissions the
 * kubelet chose (`mrw`, or `r` for a read-only claim).
 */
function deviceNode(device: ContainerDevice) {
  const stat = statSync(device.hostPath)
  if (!stat.isBlockDevice()) throw new Error(`${device.hostPath} is not a block device`)
  const numbers = { major: major(stat.rdev), minor: minor(stat.rdev) }
  return {
    node: { path: device.containerPath, type: 'b', ...numbers, fileMode: 0o660, uid: 0, gid: 0 },
    allow: { allow: true, type: 'b', ...numbers, access: device.permissions === 'r' ? 'r' : 'rwm' },
  }
}

/** The runtime spec of one container. */
export function runtimeSpec(options: BundleOptions) {
  const devices = options.devices.map(deviceNode)
  const rootfsPropagation = ociRootfsPropagation(options.mounts)
  const capabilities = options.privileged ? privilegedCapabilities() : undefined
  return {
    ociVersion: '1.0.2',
    process: {
      terminal: false,
      user: { uid: 0, gid: 0 },
      args: [...options.args],
      env: ['PATH=/bin:/usr/bin:/sbin:/usr/sbin', ...Object.entries(options.env ?? {}).map(([k, v]) => `${k}=${v}`)],
      cwd: '/',
      noNewPrivileges: !options.privileged,
      ...(capabilities ? { capabilities: { bounding: capabilities, effective: capabilities, permitted: capabilities } } : {}),
    },
    root: { path: options.rootfs, readonly: true },
    hostname: options.hostname ?? 'pod',
    mounts: [
      { destination: '/proc', type: 'proc', source: 'proc' },
      { destination: '/dev', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'strictatime', 'mode=755', 'size=65536k'] },
      // The pod's volumes, in the order of the container's volumeMounts.
      ...ociMounts(options.mounts),
    ],
    linux: {
      namespaces: [{ type: 'pid' }, { type: 'mount' }, { type: 'ipc' }, { type: 'uts' }],
      devices: devices.map((d) => d.node),
      resources: { devices: [{ allow: false, access: 'rwm' }, ...devices.map((d) => d.allow)] },
      // A host-to-container mount sees the host's later mounts only in a mount tree that is the
      // host's slave (a bidirectional one: shared).
      ...(rootfsPropagation ? { rootfsPropagation } : {}),
    },
  }
}

/** Writes `<dir>/config.json` and returns `dir`. */
export function writeBundle(dir: string, options: BundleOptions): string {
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, 'config.json'), `${JSON.stringify(runtimeSpec(options), null, 2)}\n`)
  return dir
}
