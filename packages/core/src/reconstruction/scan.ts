/**
 * The disk scan of reconstruction (SPEC §5.4): every pod volume directory under the pods directory.
 * Every level is listed by the entry's own type (lstat), as the kubelet does: a symlink (or a file)
 * where a pod, `volumes`, `volumeDevices` or plugin directory should be is skipped and logged, never
 * followed, so a link to a directory elsewhere can never make kubevol tear down what is there.
 */
import type { UniquePodName } from '../api/names.js'
import { isHostError } from '../errors.js'
import type { FileInfo, Host } from '../host/host.js'
import type { Logger } from '../observability.js'
import { type Paths, joinPath, unescapePluginName } from '../paths.js'
import { isCorruptedMountError } from '../plugins/util/cleanup-mount-point.js'

/** One volume directory found on disk. */
export interface PodVolumeOnDisk {
  readonly podName: UniquePodName
  /** The inner volume name (the directory's name). */
  readonly volumeSpecName: string
  readonly volumePath: string
  readonly pluginName: string
  readonly volumeMode: 'Filesystem' | 'Block'
}

async function list(host: Host, path: string): Promise<readonly string[]> {
  try {
    return await host.readdir(path)
  } catch (err) {
    if (isHostError(err, 'ENOENT', 'ENOTDIR')) return []
    throw err
  }
}

/**
 * The names in `dir` that are real directories (lstat), in order. Anything else is skipped, and
 * `onSkip` is told (once per scan: each path is seen once).
 */
async function listRealDirs(host: Host, dir: string, onSkip: (path: string, type: string) => void): Promise<string[]> {
  const found: string[] = []
  for (const name of await list(host, dir)) {
    const path = joinPath(dir, name)
    const info = await host.lstat(path)
    if (!info) continue
    if (info.type === 'directory') found.push(name)
    else onSkip(path, info.type)
  }
  return found
}

/**
 * True when `path` is a real directory, logging what it is otherwise. Missing: false, silently.
 */
async function isRealDir(host: Host, path: string, onSkip: (path: string, type: string) => void): Promise<boolean> {
  const info = await host.lstat(path)
  if (info && info.type !== 'directory') onSkip(path, info.type)
  return info?.type === 'directory'
}

/**
 * Whether a volume entry is one to reconstruct. A file system volume is a directory (a mount point
 * whose filesystem no longer answers included: it must be torn down); a block volume is the link
 * to its device (kept as the link, never followed) or a device node.
 */
function isVolumeEntry(info: FileInfo | 'corrupted' | null, volumeMode: 'Filesystem' | 'Block'): boolean {
  if (info === null) return false
  if (info === 'corrupted') return volumeMode === 'Filesystem'
  if (volumeMode === 'Filesystem') return info.type === 'directory'
  return info.type === 'symlink' || info.type === 'block-device' || info.type === 'file' || info.type === 'directory'
}

async function volumeEntry(host: Host, path: string): Promise<FileInfo | 'corrupted' | null> {
  try {
    return await host.lstat(path)
  } catch (err) {
    if (isCorruptedMountError(err)) return 'corrupted'
    throw err
  }
}

/**
 * Lists `pods/<uid>/{volumes,volumeDevices}/<plugin>/<volume>`. An unreadable plugin dir is logged
 * and skipped; so is every entry that is not what the layout puts there (a symlink in place of a
 * directory above all).
 */
export async function scanPodVolumes(host: Host, paths: Paths, logger: Logger): Promise<PodVolumeOnDisk[]> {
  const result: PodVolumeOnDisk[] = []
  const skip = (path: string, type: string): void => logger.warn('Skipping an entry that is not a directory in the pods directory', { path, type })
  for (const podName of await listRealDirs(host, paths.podsDir, skip)) {
    for (const [dir, volumeMode] of [
      [paths.podVolumesDir(podName), 'Filesystem'],
      [paths.podVolumeDevicesDir(podName), 'Block'],
    ] as const) {
      if (!(await isRealDir(host, dir, skip))) continue
      for (const escaped of await listRealDirs(host, dir, skip)) {
        const pluginDir = joinPath(dir, escaped)
        let volumes: readonly string[]
        try {
          volumes = await list(host, pluginDir)
        } catch (err) {
          logger.warn('Could not read a plugin directory', { dir: pluginDir, err: String(err) })
          continue
        }
        for (const volume of volumes) {
          const volumePath = joinPath(pluginDir, volume)
          const info = await volumeEntry(host, volumePath)
          if (!isVolumeEntry(info, volumeMode)) {
            if (info) skip(volumePath, info === 'corrupted' ? 'unreadable entry' : info.type)
            continue
          }
          result.push({ podName, volumeSpecName: volume, volumePath, pluginName: unescapePluginName(escaped), volumeMode })
        }
      }
    }
  }
  return result
}
