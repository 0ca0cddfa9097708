/**
 * Formats a device only when it is blank, checks it, and mounts it (mount-utils
 * `SafeFormatAndMount`, SPEC §8.5). A device with any signature, a partition table included, is
 * never formatted: that would destroy data.
 */
import { HostError, KubevolError, errorMessage } from '../../errors.js'
import { type VolumeSpec, mountOptionsOf } from '../../api/volume-spec.js'
import type { Filesystems, Host } from '../../host/host.js'
import type { DeviceMountCapability } from '../plugin.js'
import { cleanupMountPoint, mountReferences } from './cleanup-mount-point.js'

/** Why formatting and mounting failed, as the kubelet distinguishes it. */
export type FormatAndMountErrorType =
  | 'UnformattedReadOnly'
  | 'GetDiskFormatFailed'
  | 'FormatFailed'
  | 'HasFilesystemErrors'
  | 'FilesystemMismatch'
  | 'UnknownMountError'

export class FormatAndMountError extends KubevolError {
  readonly type: FormatAndMountErrorType
  constructor(type: FormatAndMountErrorType, message: string, options?: { cause?: unknown }) {
    super(type, message, options)
    this.type = type
  }
}

export interface FormatAndMountOptions {
  /** @default 'ext4' */
  readonly fstype?: string
  readonly readOnly?: boolean
  /** Mount options (from the PV), passed through. */
  readonly options?: readonly string[]
}

/**
 * Mounts `device` on `target`, formatting it first when blank (and not read-only), checking it
 * (`fsck -a`) when it has a filesystem, of whatever type, and is mounted read-write. Read-only
 * means `readOnly` or `ro` among the options, as mount-utils reads it. Throws
 * {@link FormatAndMountError}.
 */
export async function formatAndMount(host: Host, device: string, target: string, options: FormatAndMountOptions = {}): Promise<void> {
  const fs = host.filesystems
  if (!fs) throw new FormatAndMountError('GetDiskFormatFailed', `failed to get disk format of disk ${device}: the host has no filesystem tools`)
  const fstype = options.fstype || 'ext4'
  const readOnly = options.readOnly === true || (options.options ?? []).includes('ro')
  let existing: string | null
  try {
    existing = await fs.detect(device)
  } catch (err) {
    throw new FormatAndMountError('GetDiskFormatFailed', `failed to get disk format of disk ${device}: ${errorMessage(err)}`, { cause: err })
  }
  if (existing === null) await formatBlank(fs, device, target, fstype, readOnly, options.options ?? [])
  // An existing filesystem is checked before every read-write mount, also when it is not the type
  // asked for: the mount is still tried (and fails as FilesystemMismatch if the kernel refuses it),
  // and fsck must have run before anything writes to it.
  else if (!readOnly) await checkBeforeMount(fs, device, existing)
  const mismatch = existing !== null && existing !== fstype
  try {
    await host.mount({
      source: device,
      target,
      fstype,
      readOnly,
      options: [...(options.options ?? [])],
    })
  } catch (err) {
    const type = mismatch ? 'FilesystemMismatch' : 'UnknownMountError'
    const detail = mismatch ? ` (the disk has ${existing}, ${fstype} was requested)` : ''
    throw new FormatAndMountError(type, `mount failed: ${errorMessage(err)}${detail}`, {
      cause: err instanceof HostError ? err : undefined,
    })
  }
}

async function formatBlank(fs: Filesystems, device: string, target: string, fstype: string, readOnly: boolean, options: readonly string[]): Promise<void> {
  if (readOnly) {
    throw new FormatAndMountError('UnformattedReadOnly', `cannot mount unformatted disk ${device} as we are manipulating it in read-only mode`)
  }
  try {
    await fs.format(device, fstype)
  } catch (err) {
    throw new FormatAndMountError(
      'FormatFailed',
      `format of disk "${device}" failed: type:("${fstype}") target:("${target}") options:("${options.join(',')}") errcode:(${errorMessage(err)})`,
      { cause: err },
    )
  }
}

async function checkBeforeMount(fs: Filesystems, device: string, existing: string): Promise<void> {
  try {
    await fs.check(device, existing)
  } catch (err) {
    throw new FormatAndMountError('HasFilesystemErrors', `'fsck' found errors on device ${device} but could not correct them: ${hostErrorDetail(err)}`, {
      cause: err,
    })
  }
}

/** What a HostError says after its `CODE: syscall path: ` prefix (fsck's output, for a check). */
function hostErrorDetail(err: unknown): string {
  const message = errorMessage(err)
  if (!(err instanceof HostError)) return message
  const prefix = `${err.code}: ${err.syscall} ${err.path}: `
  return message.startsWith(prefix) ? message.slice(prefix.length) : message
}

/** Mount options plus the SELinux `context=` option when a label is given. */
function withContext(options: readonly string[], seLinuxLabel: string | undefined): string[] {
  return seLinuxLabel ? [...options, `context="${seLinuxLabel}"`] : [...options]
}

/**
 * The device mount local and fileDisk volumes share: the global directory made, and the device
 * formatted if blank and mounted there with the PV's options (and SELinux context), once.
 */
export async function mountDeviceAt(
  host: Host,
  device: string,
  path: string,
  options: { readonly fstype?: string; readonly readOnly: boolean; readonly mountOptions: readonly string[]; readonly seLinuxLabel?: string },
): Promise<void> {
  await host.mkdir(path, { recursive: true, mode: 0o750 })
  if (await host.isMountPoint(path)) return
  await formatAndMount(host, device, path, {
    fstype: options.fstype,
    readOnly: options.readOnly,
    options: withContext(options.mountOptions, options.seLinuxLabel),
  })
}

/**
 * The device-mount capability of a plugin whose device is formatted if blank and mounted once at a
 * global path (local devices, fileDisk images); `device` and `fstype` say what to mount for a spec.
 */
export function globalDeviceMount(
  host: Host,
  options: {
    readonly canDeviceMount: (spec: VolumeSpec) => boolean
    readonly getDeviceMountPath: (spec: VolumeSpec) => string
    readonly device: (spec: VolumeSpec, devicePath: string) => string
    readonly fstype: (spec: VolumeSpec) => string | undefined
  },
): DeviceMountCapability {
  return {
    canDeviceMount: options.canDeviceMount,
    getDeviceMountPath: options.getDeviceMountPath,
    mountDevice: (spec, devicePath, deviceMountPath, args) =>
      mountDeviceAt(host, options.device(spec, devicePath), deviceMountPath, {
        fstype: options.fstype(spec),
        readOnly: spec.readOnly,
        mountOptions: mountOptionsOf(spec),
        seLinuxLabel: args.seLinuxLabel,
      }),
    unmountDevice: (deviceMountPath) => cleanupMountPoint(host, deviceMountPath),
    getDeviceMountRefs: (deviceMountPath) => mountReferences(host, deviceMountPath),
  }
}
