/**
 * The `filesystems` capability: blkid, mkfs.<type>, fsck, resize2fs and xfs_growfs, as mount-utils
 * runs them (SPEC §8.5, §8.6).
 */
import type { Filesystems } from '@kubevol/core'
import { HostError } from '@kubevol/core'
import type { ToolRunner } from './exec.js'
import { toolError } from './exec.js'

/** What `detect` returns for a device with a partition table: any non-null value stops a format. */
export const PARTITIONED = 'unknown data, probably partitions'

/** What the filesystem tools need from the host. */
export interface FilesystemsDeps {
  readonly run: ToolRunner
  /** ENOENT (as a HostError) when the device does not exist. */
  readonly requireDevice: (device: string, syscall: string) => Promise<void>
  /** True when a filesystem of `device` is mounted somewhere (the kernel's mount table). */
  readonly isMounted: (device: string) => Promise<boolean>
}

/** Parses `blkid -o export` output (`TYPE=ext4`, `PTTYPE=gpt`). Throws on a line that is not KEY=VALUE. */
export function parseBlkidExport(output: string): Map<string, string> {
  const values = new Map<string, string>()
  for (const line of output.split('\n')) {
    const trimmed = line.trim()
    if (trimmed === '') continue
    const eq = trimmed.indexOf('=')
    if (eq <= 0) throw new Error(`blkid returns invalid output: ${output}`)
    values.set(trimmed.slice(0, eq), trimmed.slice(eq + 1))
  }
  return values
}

/** The `mkfs.<type>` arguments mount-utils uses: ext3/ext4 `-F -m0`, xfs `-f`, others none. */
export function mkfsArgs(fstype: string, device: string, options: readonly string[] = []): string[] {
  if (fstype === 'ext3' || fstype === 'ext4') return [...options, '-F', '-m0', device]
  if (fstype === 'xfs') return [...options, '-f', device]
  return [...options, device]
}

/**
 * How the kubelet reads fsck's exit status (a bit mask, fsck(8)): 0 clean, 1 errors corrected,
 * 2 corrected and a reboot advised: fine; 4 errors left uncorrected: fail; 8 and above (operational
 * error, e.g. no checker for this type): the kubelet logs it and mounts anyway.
 */
export function fsckVerdict(code: number): 'ok' | 'uncorrected' | 'ignored' {
  if (code >= 8) return 'ignored'
  return code & 4 ? 'uncorrected' : 'ok'
}

const FSTYPE = /^[a-z0-9][a-z0-9._-]*$/

/** The `filesystems` capability. */
export function createFilesystems(deps: FilesystemsDeps): Filesystems {
  const { run } = deps

  async function detect(device: string): Promise<string | null> {
    await deps.requireDevice(device, 'blkid')
    const result = await run('blkid', ['-p', '-s', 'TYPE', '-s', 'PTTYPE', '-o', 'export', device], device)
    // blkid exits 2 when it finds no signature at all: the device is blank.
    if (result.code === 2) return null
    if (result.code !== 0) throw toolError('blkid', device, result, `failed to get disk format of disk ${device}`)
    let values: Map<string, string>
    try {
      values = parseBlkidExport(result.stdout)
    } catch (err) {
      throw new HostError('EIO', 'blkid', device, (err as Error).message)
    }
    const type = values.get('TYPE')
    if (type) return type
    // A partition table is data: such a disk must never be formatted.
    if (values.has('PTTYPE')) return PARTITIONED
    return null
  }

  return {
    detect,

    async format(device, fstype, options = []) {
      if (!FSTYPE.test(fstype)) throw new HostError('EINVAL', 'mkfs', device, `invalid filesystem type "${fstype}"`)
      // The port says format is never called on a device with a signature; the tool checks again
      // because a wrong format destroys data and one blkid costs a few milliseconds.
      const existing = await detect(device)
      if (existing !== null) throw new HostError('EEXIST', `mkfs.${fstype}`, device, `the device already has ${existing}; refusing to format it`)
      const result = await run(`mkfs.${fstype}`, mkfsArgs(fstype, device, options), device)
      if (result.code !== 0) throw toolError(`mkfs.${fstype}`, device, result, `format of disk ${device} failed`)
    },

    async check(device, _fstype) {
      await deps.requireDevice(device, 'fsck')
      let result: Awaited<ReturnType<ToolRunner>>
      try {
        result = await run('fsck', ['-a', device], device)
      } catch (err) {
        // No fsck on the machine: the kubelet warns and mounts anyway.
        if (err instanceof HostError && err.code === 'ENOTSUP') return
        throw err
      }
      if (result.code === null) throw toolError('fsck', device, result)
      if (fsckVerdict(result.code) === 'uncorrected') {
        throw toolError('fsck', device, result, `'fsck' found errors on device ${device} but could not correct them`)
      }
    },

    async resize(device, fstype, mountPath) {
      await deps.requireDevice(device, 'resize')
      if (fstype === 'ext2' || fstype === 'ext3' || fstype === 'ext4') {
        const mounted = await deps.isMounted(device)
        if (!mounted) {
          // Offline: resize2fs insists on a fresh full check first.
          const check = await run('e2fsck', ['-f', '-p', device], device)
          if (check.code === null || check.code > 2) throw toolError('e2fsck', device, check, `check before the resize of ${device} failed`)
        }
        const result = await run('resize2fs', [device], device)
        if (result.code === 0) return
        if (mounted && /Permission denied|Operation not permitted/.test(result.output)) {
          // The kernel refused the online grow (EXT4_IOC_RESIZE_FS needs CAP_SYS_RESOURCE): the
          // offline path needs the filesystem unmounted, which only the caller can decide.
          throw new HostError(
            'EPERM',
            'resize2fs',
            device,
            `the kernel refused to grow the mounted filesystem online (${result.output.split('\n').at(-1)}); unmount it and resize again to grow it offline`,
          )
        }
        throw toolError('resize2fs', device, result, `resize of device ${device} failed`)
      }
      if (fstype === 'xfs') {
        if (!mountPath) throw new HostError('EINVAL', 'xfs_growfs', device, 'xfs grows only while mounted: a mount path is needed')
        const result = await run('xfs_growfs', ['-d', mountPath], device)
        if (result.code !== 0) throw toolError('xfs_growfs', device, result, `resize of device ${device} failed`)
        return
      }
      if (fstype === 'btrfs') {
        if (!mountPath) throw new HostError('EINVAL', 'btrfs', device, 'btrfs grows only while mounted: a mount path is needed')
        const result = await run('btrfs', ['filesystem', 'resize', 'max', mountPath], device)
        if (result.code !== 0) throw toolError('btrfs', device, result, `resize of device ${device} failed`)
        return
      }
      throw new HostError('ENOTSUP', 'resize', device, `resize of format ${fstype} is not supported for device ${device} mounted at ${mountPath ?? '(not mounted)'}`)
    },
  }
}
