/**
 * The disk scan of reconstruction (SPEC §5.4): every pod volume directory under the pods directory.
 */
import type { UniquePodName } from '../api/names.js'
import { isHostError } from '../errors.js'
import type { Host } from '../host/host.js'
import type { Logger } from '../observability.js'
import { type Paths, joinPath, unescapePluginName } from '../paths.js'

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

/** Lists `pods/<uid>/{volumes,volumeDevices}/<plugin>/<volume>`. An unreadable plugin dir is logged and skipped. */
export async function scanPodVolumes(host: Host, paths: Paths, logger: Logger): Promise<PodVolumeOnDisk[]> {
  const result: PodVolumeOnDisk[] = []
  for (const podName of await list(host, paths.podsDir)) {
    for (const [dir, volumeMode] of [
      [paths.podVolumesDir(podName), 'Filesystem'],
      [paths.podVolumeDevicesDir(podName), 'Block'],
    ] as const) {
      for (const escaped of await list(host, dir)) {
        let volumes: readonly string[]
        try {
          volumes = await list(host, joinPath(dir, escaped))
        } catch (err) {
          logger.warn('Could not read a plugin directory', { dir: joinPath(dir, escaped), err: String(err) })
          continue
        }
        for (const volume of volumes) {
          result.push({
            podName,
            volumeSpecName: volume,
            volumePath: joinPath(dir, escaped, volume),
            pluginName: unescapePluginName(escaped),
            volumeMode,
          })
        }
      }
    }
  }
  return result
}
