/**
 * fsGroup ownership (SPEC §7.2): every file and directory of a volume gets the pod's fsGroup as its
 * group, group read/write (read only on a read-only volume), and directories setgid so new files
 * inherit the group.
 *
 * Beyond the kubelet, the applied gid is recorded beside the volume, so a volume that was already
 * walked for this gid is not walked again on the next set-up (the kubelet walks it on every mount
 * unless the policy is OnRootMismatch); and a long walk reports progress as events.
 */
import type { Pod } from '../../api/kubernetes.js'
import type { Clock } from '../../clock.js'
import { isHostError } from '../../errors.js'
import type { FileInfo, Host } from '../../host/host.js'
import type { Logger, Metrics, Recorder } from '../../observability.js'
import { joinPath } from '../../paths.js'
import { decodeUtf8 } from '../../text.js'

const SETGID = 0o2000
const RW_GROUP = 0o660
const RO_GROUP = 0o440
const DIR_EXEC = 0o110
/** The kubelet: first progress event after 30 s, then every 60 s. */
const FS_GROUP_PROGRESS_FIRST_MS = 30_000
const FS_GROUP_PROGRESS_EVERY_MS = 60_000

export interface VolumeOwnershipOptions {
  readonly host: Host
  readonly clock: Clock
  readonly logger: Logger
  /** The volume's root directory. */
  readonly dir: string
  readonly fsGroup: number | undefined
  /** `Always` (default) or `OnRootMismatch`. */
  readonly policy?: string
  readonly readOnly: boolean
  /** Where to record the gid applied last; absent: no record, walk every time. */
  readonly recordPath?: string
  /** Called with a progress message while a long walk runs (VolumePermissionChangeInProgress). */
  readonly onProgress?: (message: string) => void
  readonly pod?: Pod
}

/** What {@link setVolumeOwnership} did. */
export type OwnershipResult =
  | { readonly status: 'skipped'; readonly reason: 'no-fsgroup' | 'root-matches' | 'already-applied' }
  | { readonly status: 'applied'; readonly entries: number; readonly durationMs: number }

function rootMatches(info: FileInfo, fsGroup: number, readOnly: boolean): boolean {
  const mask = (readOnly ? RO_GROUP : RW_GROUP) | (info.type === 'directory' ? SETGID | DIR_EXEC : 0)
  return info.gid === fsGroup && (info.mode & mask) === mask
}

/**
 * Applies fsGroup to the volume at `dir`. Failures to change one entry are logged and the walk goes
 * on (as in the kubelet); only a failed walk (an unreadable directory) fails the operation.
 */
export async function setVolumeOwnership(options: VolumeOwnershipOptions): Promise<OwnershipResult> {
  const { host, clock, dir, fsGroup, readOnly } = options
  if (fsGroup === undefined) return { status: 'skipped', reason: 'no-fsgroup' }
  const root = await host.stat(dir)
  if (!root) throw new Error(`volume directory ${dir} does not exist`)
  if (options.policy === 'OnRootMismatch' && rootMatches(root, fsGroup, readOnly)) return { status: 'skipped', reason: 'root-matches' }
  const record = `${fsGroup}:${readOnly ? 'ro' : 'rw'}`
  if (options.recordPath && rootMatches(root, fsGroup, readOnly)) {
    const previous = await host.readFile(options.recordPath).then((b) => decodeUtf8(b), () => '')
    if (previous === record) return { status: 'skipped', reason: 'already-applied' }
  }

  const started = clock.now()
  let entries = 0
  let nextProgress = started + FS_GROUP_PROGRESS_FIRST_MS
  const fileMode = readOnly ? RO_GROUP : RW_GROUP
  const apply = async (path: string, info: FileInfo): Promise<void> => {
    try {
      await host.lchown(path, -1, fsGroup)
      if (info.type !== 'symlink') {
        const mode = info.mode | fileMode | (info.type === 'directory' ? SETGID | DIR_EXEC : 0)
        if (mode !== info.mode) await host.chmod(path, mode)
      }
    } catch (err) {
      options.logger.warn('Failed to apply fsGroup', { path, err: String(err) })
    }
    entries++
    const now = clock.now()
    if (now >= nextProgress) {
      nextProgress = now + FS_GROUP_PROGRESS_EVERY_MS
      options.onProgress?.(
        `Setting volume ownership for ${dir} is taking longer than expected, consider using OnRootMismatch - https://kubernetes.io/docs/tasks/configure-pod-container/security-context/#configure-volume-permission-and-ownership-change-policy-for-pods`,
      )
    }
  }
  // Post-order: children before their directory, never following a symlink, never leaving the volume.
  const walk = async (path: string, info: FileInfo): Promise<void> => {
    if (info.type === 'directory') {
      for (const name of await host.readdir(path)) {
        const child = joinPath(path, name)
        const childInfo = await host.lstat(child)
        if (!childInfo) continue
        if (childInfo.type === 'directory' && childInfo.dev !== root.dev) continue
        await walk(child, childInfo)
      }
    }
    await apply(path, info)
  }
  await walk(dir, root)
  if (options.recordPath) {
    try {
      await host.writeFile(options.recordPath, record)
    } catch (err) {
      if (!isHostError(err, 'ENOENT', 'EROFS')) throw err
    }
  }
  return { status: 'applied', entries, durationMs: clock.now() - started }
}

/**
 * {@link setVolumeOwnership} as a plugin runs it: progress as `VolumePermissionChangeInProgress`
 * events on the pod, the walk timed as `volume_fsgroup_recursive_apply`.
 */
export async function applyFsGroup(
  context: {
    readonly host: Host
    readonly clock: Clock
    readonly logger: Logger
    readonly recorder: Recorder
    readonly metrics: Metrics
  },
  options: Omit<VolumeOwnershipOptions, 'host' | 'clock' | 'logger' | 'onProgress'> & { readonly pluginName: string },
): Promise<OwnershipResult> {
  const { pod } = options
  const result = await setVolumeOwnership({
    ...options,
    host: context.host,
    clock: context.clock,
    logger: context.logger,
    onProgress: (message) => {
      if (pod) {
        context.recorder.event({
          type: 'Warning',
          reason: 'VolumePermissionChangeInProgress',
          message,
          target: { kind: 'Pod', metadata: pod.metadata },
          time: context.clock.now(),
        })
      }
    },
  })
  if (result.status === 'applied') {
    context.metrics.observe(
      'storage_operation_duration_seconds',
      { volume_plugin: options.pluginName, operation_name: 'volume_fsgroup_recursive_apply', status: 'success', migrated: 'false' },
      result.durationMs / 1000,
    )
  }
  return result
}
