/**
 * Orphaned pod directories (the kubelet's housekeeping, SPEC §5.7): directories of pods that no
 * source knows and that have nothing possibly mounted are removed, without ever deleting through a
 * mount point. What cannot be removed is reported once per directory, not on every pass.
 */
import type { UniquePodName } from '../api/names.js'
import { errorMessage, isHostError } from '../errors.js'
import type { Host } from '../host/host.js'
import type { Logger } from '../observability.js'
import { cleanVolumeSubPaths } from '../operations/clean-sub-paths.js'
import { type Paths, joinPath } from '../paths.js'
import { isCorruptedMountError } from '../plugins/util/cleanup-mount-point.js'

export interface OrphanCleanupContext {
  readonly host: Host
  readonly paths: Paths
  readonly logger: Logger
  /** True while the pod is known to a source or may still have a mount. */
  readonly podInUse: (podName: UniquePodName) => boolean
}

export interface OrphanCleanupReport {
  /** Orphaned pod directories seen in this pass. */
  readonly orphans: UniquePodName[]
  readonly removed: UniquePodName[]
  /** Orphans kept, and why. */
  readonly refused: { readonly pod: UniquePodName; readonly reason: string }[]
}

async function list(host: Host, path: string): Promise<readonly string[]> {
  try {
    return await host.readdir(path)
  } catch (err) {
    if (isHostError(err, 'ENOENT', 'ENOTDIR')) return []
    throw err
  }
}

/** Removes `pods/<uid>` of every orphaned pod it safely can. `dryRun` reports without removing. */
export async function cleanupOrphanedPodDirs(ctx: OrphanCleanupContext, options: { dryRun?: boolean } = {}): Promise<OrphanCleanupReport> {
  const { host, paths } = ctx
  const report: OrphanCleanupReport = { orphans: [], removed: [], refused: [] }
  for (const pod of await list(host, paths.podsDir)) {
    if (ctx.podInUse(pod)) continue
    // By the entry's own type: a symlink in place of a pod directory is never followed (its
    // target is somewhere else, and nothing there is kubevol's to remove).
    const info = await host.lstat(paths.podDir(pod))
    if (!info) continue
    if (info.type !== 'directory') {
      report.refused.push({ pod, reason: `${paths.podDir(pod)} is a ${info.type}, not a pod directory: skipped` })
      continue
    }
    report.orphans.push(pod)
    try {
      await removePodDir(ctx, pod, options.dryRun ?? false)
      if (!options.dryRun) report.removed.push(pod)
    } catch (err) {
      report.refused.push({ pod, reason: errorMessage(err) })
    }
  }
  return report
}

/** The entry at `path` must be a real directory that is not a mount point (or be missing: false). */
async function checkRealDir(host: Host, pod: UniquePodName, path: string, what: string): Promise<boolean> {
  let info: Awaited<ReturnType<Host['lstat']>>
  try {
    info = await host.lstat(path)
    if (!info) return false
    if (info.type === 'directory' && !(await host.isMountPoint(path))) return true
  } catch (err) {
    if (!isCorruptedMountError(err)) throw err
    throw new Error(`orphaned pod "${pod}" found, but ${what} ${path} is still mounted (a corrupted mount)`)
  }
  if (info.type === 'directory') throw new Error(`orphaned pod "${pod}" found, but ${what} ${path} is still mounted`)
  throw new Error(`orphaned pod "${pod}" found, but ${what} ${path} is a ${info.type}, not a directory`)
}

/**
 * Checks the whole pod directory first (every level a real directory, nothing mounted), then
 * removes: volume directories and what subPath binds left only when empty, the rest without
 * crossing a mount.
 */
async function removePodDir(ctx: OrphanCleanupContext, pod: UniquePodName, dryRun: boolean): Promise<void> {
  const { host, paths } = ctx
  const podDir = paths.podDir(pod)
  const volumesDir = paths.podVolumesDir(pod)
  await checkRealDir(host, pod, podDir, 'pod directory')
  // Any volume still mounted keeps the whole pod directory.
  const volumeDirs: string[] = []
  const pluginDirs: string[] = []
  if (await checkRealDir(host, pod, volumesDir, 'volumes directory')) {
    for (const plugin of await list(host, volumesDir)) {
      const pluginDir = joinPath(volumesDir, plugin)
      if (!(await checkRealDir(host, pod, pluginDir, 'plugin directory'))) continue
      pluginDirs.push(pluginDir)
      for (const volume of await list(host, pluginDir)) {
        const path = joinPath(pluginDir, volume)
        if (await checkRealDir(host, pod, path, 'volume')) volumeDirs.push(path)
      }
    }
  }
  const subpaths = joinPath(podDir, 'volume-subpaths')
  const subpathVolumes = (await checkRealDir(host, pod, subpaths, 'subpath directory')) ? await list(host, subpaths) : []
  const cleanSubPaths = async (check: boolean): Promise<void> => {
    for (const volume of subpathVolumes) {
      try {
        await cleanVolumeSubPaths(host, joinPath(subpaths, volume), { unmount: false, dryRun: check })
      } catch (err) {
        throw new Error(`orphaned pod "${pod}" found, but volume subpaths are still present: ${errorMessage(err)}`, { cause: err })
      }
    }
  }
  await cleanSubPaths(true)
  if (dryRun) return
  // Volume directories are removed only when empty: content that is still there is never deleted.
  for (const path of volumeDirs) {
    try {
      await host.remove(path)
    } catch (err) {
      throw new Error(`orphaned pod "${pod}" found, but volume directory ${path} could not be removed: ${errorMessage(err)}`)
    }
  }
  await cleanSubPaths(false)
  for (const path of pluginDirs) await host.remove(path)
  for (const name of await list(host, podDir)) {
    if (name === 'volumes') await host.remove(volumesDir)
    else if (name === 'volume-subpaths') await host.remove(subpaths)
    // removeAll never follows a symlink and never crosses a mount point.
    else await host.removeAll(joinPath(podDir, name))
  }
  await host.remove(podDir)
}
