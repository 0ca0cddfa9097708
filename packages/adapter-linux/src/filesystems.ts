/**
 * The `filesystems` capability: blkid, mkfs.<type>, fsck, resize2fs and xfs_growfs, and the size
 * query of a resize decision (blockdev, dumpe2fs, xfs_io), as mount-utils runs them (SPEC §8.5, §8.6).
 */
import type { Filesystems, FilesystemSize } from '@kubevol/core'
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
  /** The device's size in bytes (BLKGETSIZE64, the ioctl behind `blockdev --getsize64`). */
  readonly deviceSize: (device: string) => Promise<number>
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
 * How mount-utils reads fsck's exit status (`checkAndRepairFilesystem`): 0 clean and 1 errors
 * corrected are fine; 4, errors left uncorrected, fails the mount; anything else (2 reboot advised,
 * 8 and above an operational error such as no checker for the type, a signal) is logged by the
 * kubelet, which mounts anyway. Only exactly 4 fails, as there: 6 (4 and a reboot advised) passes.
 */
export function fsckVerdict(code: number | null): 'ok' | 'uncorrected' | 'ignored' {
  if (code === 0 || code === 1) return 'ok'
  return code === 4 ? 'uncorrected' : 'ignored'
}

/**
 * Block size and block count from a tool's `key<separator>value` lines (mount-utils
 * `parseFsInfoOutput`): keys compared lower-cased, lines that do not split in two skipped.
 */
export function parseFsInfo(output: string, separator: string, blockSizeKey: string, blockCountKey: string): { blockSize: number; blockCount: number } {
  let blockSize = 0
  let blockCount = 0
  for (const line of output.split('\n')) {
    const tokens = line.split(separator)
    if (tokens.length !== 2) continue
    const key = (tokens[0] ?? '').trim().toLowerCase()
    const value = (tokens[1] ?? '').trim()
    if (key !== blockSizeKey && key !== blockCountKey) continue
    if (!/^\d+$/.test(value)) throw new Error(`failed to parse ${key === blockSizeKey ? 'block size' : 'block count'} ${value}`)
    if (key === blockSizeKey) blockSize = Number(value)
    else blockCount = Number(value)
  }
  return { blockSize, blockCount }
}

const FSTYPE = /^[a-z0-9][a-z0-9._-]*$/

/** The `filesystems` capability. */
export function createFilesystems(deps: FilesystemsDeps): Filesystems {
  return {
    detect: (device) => detect(deps, device),
    format: (device, fstype, options = []) => format(deps, device, fstype, options),
    check: (device, _fstype) => check(deps, device),
    resize: (device, fstype, mountPath) => resize(deps, device, fstype, mountPath),
    size: (device, fstype, mountPath) => filesystemSize(deps, device, fstype, mountPath),
    needResize: (device, mountPath) => needResize(deps, device, mountPath),
  }
}

async function detect(deps: FilesystemsDeps, device: string): Promise<string | null> {
  await deps.requireDevice(device, 'blkid')
  const result = await deps.run('blkid', ['-p', '-s', 'TYPE', '-s', 'PTTYPE', '-o', 'export', device], device)
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

async function format(deps: FilesystemsDeps, device: string, fstype: string, options: readonly string[]): Promise<void> {
  if (!FSTYPE.test(fstype)) throw new HostError('EINVAL', 'mkfs', device, `invalid filesystem type "${fstype}"`)
  // The port says format is never called on a device with a signature; the tool checks again
  // because a wrong format destroys data and one blkid costs a few milliseconds.
  const existing = await detect(deps, device)
  if (existing !== null) throw new HostError('EEXIST', `mkfs.${fstype}`, device, `the device already has ${existing}; refusing to format it`)
  const result = await deps.run(`mkfs.${fstype}`, mkfsArgs(fstype, device, options), device)
  if (result.code !== 0) throw toolError(`mkfs.${fstype}`, device, result, `format of disk ${device} failed`)
}

async function check(deps: FilesystemsDeps, device: string): Promise<void> {
  await deps.requireDevice(device, 'fsck')
  let result: Awaited<ReturnType<ToolRunner>>
  try {
    result = await deps.run('fsck', ['-a', device], device)
  } catch (err) {
    // No fsck on the machine: the kubelet warns and mounts anyway.
    if (err instanceof HostError && err.code === 'ENOTSUP') return
    throw err
  }
  // The detail is fsck's output alone: the mount's error text puts it after the kubelet's words.
  if (fsckVerdict(result.code) === 'uncorrected') throw new HostError('EIO', 'fsck', device, result.output || 'exit status 4')
}

async function resize(deps: FilesystemsDeps, device: string, fstype: string, mountPath: string | undefined): Promise<void> {
  const { run } = deps
  await deps.requireDevice(device, 'resize')
  if (fstype === 'ext2' || fstype === 'ext3' || fstype === 'ext4') return resizeExt(deps, device)
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
}

/** resize2fs, online when mounted, else after the full check it insists on. */
async function resizeExt(deps: FilesystemsDeps, device: string): Promise<void> {
  const { run } = deps
  const mounted = await deps.isMounted(device)
  if (!mounted) {
    // Offline: resize2fs insists on a fresh full check first.
    const checked = await run('e2fsck', ['-f', '-p', device], device)
    if (checked.code === null || checked.code > 2) throw toolError('e2fsck', device, checked, `check before the resize of ${device} failed`)
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

async function needResize(deps: FilesystemsDeps, device: string, mountPath?: string): Promise<boolean> {
  await deps.requireDevice(device, 'blockdev')
  if (await isReadOnly(deps, device)) return false
  const deviceSize = await deps.deviceSize(device)
  const format = await detect(deps, device)
  // A blank device: mkfs takes the whole device anyway.
  if (format === null) return false
  const fs = await filesystemSize(deps, device, format, mountPath)
  // One block of slack, as mount-utils allows for rounding.
  return deviceSize > fs.sizeBytes + fs.blockSize
}

async function isReadOnly({ run }: FilesystemsDeps, device: string): Promise<boolean> {
  const result = await run('blockdev', ['--getro', device], device)
  if (result.code !== 0) throw toolError('blockdev', device, result, `failed to get readonly bit from device ${device}`)
  const answer = result.stdout.trim()
  if (answer !== '0' && answer !== '1') throw new HostError('EIO', 'blockdev', device, `failed to get readonly bit from device ${device}: ${answer}`)
  return answer === '1'
}

async function filesystemSize(deps: FilesystemsDeps, device: string, fstype: string, mountPath?: string): Promise<FilesystemSize> {
  await deps.requireDevice(device, 'size')
  let command: string
  let args: string[]
  let keys: [separator: string, size: string, count: string]
  if (fstype === 'ext2' || fstype === 'ext3' || fstype === 'ext4') {
    ;[command, args, keys] = ['dumpe2fs', ['-h', device], [':', 'block size', 'block count']]
  } else if (fstype === 'xfs') {
    // xfs_io asks the mounted filesystem: xfs has no offline size query in its tools.
    if (!mountPath) throw new HostError('EINVAL', 'xfs_io', device, 'the size of an xfs filesystem is read while mounted: a mount path is needed')
    ;[command, args, keys] = ['xfs_io', ['-c', 'statfs', mountPath], ['=', 'geom.bsize', 'geom.datablocks']]
  } else {
    throw new HostError('ENOTSUP', 'size', device, `Could not parse fs info on given filesystem format: ${fstype}. Supported fs types are: xfs, ext3, ext4`)
  }
  const result = await deps.run(command, args, device)
  if (result.code !== 0) throw toolError(command, device, result, `failed to read size of filesystem on ${device}`)
  let parsed: { blockSize: number; blockCount: number }
  try {
    parsed = parseFsInfo(result.stdout, ...keys)
  } catch (err) {
    throw new HostError('EIO', command, device, (err as Error).message)
  }
  if (parsed.blockSize === 0) throw new HostError('EIO', command, device, `could not find block size of device ${device}`)
  if (parsed.blockCount === 0) throw new HostError('EIO', command, device, `could not find block count of device ${device}`)
  return { blockSize: parsed.blockSize, sizeBytes: parsed.blockSize * parsed.blockCount }
}
