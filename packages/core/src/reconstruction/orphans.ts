/**
 * Orphaned pod directories (the kubelet's housekeeping, SPEC §5.7): directories of pods that no
 * source knows and that have nothing possibly mounted are removed, without ever deleting through a
 * mount point. What cannot be removed is reported once per directory, not on every pass.
 */
import type { UniquePodName } from '../api/names.js'
import { errorMessage, isHostError } from '../errors.js'
import type { Host } from '../host/host.js'
import type { Logger } from '../observability.js'
import { type Paths, joinPath } from '../paths.js'

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

async function removePodDir(ctx: OrphanCleanupContext, pod: UniquePodName, dryRun: boolean): Promise<void> {
  const { host, paths } = ctx
  const volumesDir = paths.podVolumesDir(pod)
  // Any volume still mounted keeps the whole pod directory.
  const volumeDirs: string[] = []
  for (const plugin of await list(host, volumesDir)) {
    for (const volume of await list(host, joinPath(volumesDir, plugin))) {
      const path = joinPath(volumesDir, plugin, volume)
      if (await host.isMountPoint(path)) throw new Error(`orphaned pod "${pod}" found, but volume ${path} is still mounted`)
      volumeDirs.push(path)
    }
  }
  const subpaths = joinPath(paths.podDir(pod), 'volume-subpaths')
  const subpathEntries: string[] = []
  const walk = async (path: string): Promise<void> => {
    if (await host.isMountPoint(path)) throw new Error(`orphaned pod "${pod}" found, but subpath ${path} is still mounted`)
    const info = await host.lstat(path)
    if (info?.type === 'directory') for (const name of await list(host, path)) await walk(joinPath(path, name))
    subpathEntries.push(path)
  }
  if (await host.lstat(subpaths)) await walk(subpaths)
  if (dryRun) return
  // Volume directories are removed only when empty: content that is still there is never deleted.
  for (const path of volumeDirs) {
    try {
      await host.remove(path)
    } catch (err) {
      throw new Error(`orphaned pod "${pod}" found, but volume directory ${path} could not be removed: ${errorMessage(err)}`)
    }
  }
  for (const path of subpathEntries) await host.remove(path)
  for (const plugin of await list(host, volumesDir)) await host.remove(joinPath(volumesDir, plugin))
  for (const name of await list(host, paths.podDir(pod))) {
    if (name === 'volumes') await host.remove(volumesDir)
    else await host.removeAll(joinPath(paths.podDir(pod), name))
  }
  await host.remove(paths.podDir(pod))
}
