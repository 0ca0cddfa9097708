import { existsSync } from 'node:fs'
import { LinuxHost } from './linux-host.js'
import type { LinuxHostOptions } from './options.js'

/**
 * Creates the Linux host. Cheap: it loads no FFI library (koffi loads at the first system call)
 * and reads nothing. `loopDevices` is present when `/dev/loop-control` exists; `blockDevices`,
 * `filesystems`, `statfs`, `subPaths` and `selinux` always are (a missing tool fails its call with
 * ENOTSUP).
 *
 * @example
 * const host = createLinuxHost({ callTimeoutMs: 10_000 })
 * await host.mount({ source: 'tmpfs', target: '/var/lib/kubevol/pods/u1/volumes/kubernetes.io~empty-dir/cache', fstype: 'tmpfs', options: ['size=64m'] })
 */
export function createLinuxHost(options: LinuxHostOptions = {}): LinuxHost {
  return new LinuxHost(options, { loopDevices: existsSync('/dev/loop-control') })
}
