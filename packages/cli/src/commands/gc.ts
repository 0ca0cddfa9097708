/**
 * `kubevol gc`: the manager's orphan cleanup, once. A pod directory is removed only when no source
 * (the manifests, if given) knows the pod and nothing under it is mounted; what is kept is reported
 * with the reason. `--dry-run` runs on a read-only view of the host.
 */
import { hostname } from 'node:os'
import { isAbsolute, resolve } from 'node:path'
import { type ManifestSource, createManifestSource } from '@kubevol/agent'
import { type Host, type ObjectReader, type OrphanCleanupReport, type PodSource, createBuiltinPlugins, createVolumeManager, silentLogger } from '@kubevol/core'
import { CommandFailed, EXIT } from '../errors.js'
import { hostFor } from '../host-loader.js'
import { type Io, type OutputFormat, renderData, renderTable } from '../output.js'
import type { ParsedCommand } from '../parse.js'
import { createReadOnlyHost } from '../read-only-host.js'

const noPods: PodSource = {
  getPods: () => [],
  getPodByUID: () => undefined,
  shouldPodContainersBeTerminating: () => true,
  shouldPodRuntimeBeRemoved: () => true,
  allReady: () => true,
  subscribe: () => () => {},
}
const noObjects: ObjectReader = {
  getPersistentVolumeClaim: () => Promise.reject(new Error('no objects')),
  getPersistentVolume: () => Promise.reject(new Error('no objects')),
}

/** Runs the orphan cleanup on `host` under `rootDir`. */
export async function collectGarbage(options: { host: Host; rootDir: string; manifestDir?: string; dryRun: boolean }): Promise<OrphanCleanupReport> {
  const host = options.dryRun ? createReadOnlyHost(options.host).host : options.host
  let source: ManifestSource | undefined
  if (options.manifestDir) {
    source = createManifestSource({ dir: options.manifestDir, nodeName: hostname().toLowerCase(), rescanMs: 3_600_000, logger: silentLogger })
    await source.start()
  }
  try {
    const manager = createVolumeManager({
      host,
      plugins: createBuiltinPlugins(),
      podSource: source?.pods ?? noPods,
      objects: source?.objects ?? noObjects,
      nodeName: hostname().toLowerCase(),
      rootDir: options.rootDir,
      journal: false,
    })
    return await manager.cleanupOrphanedPods({ dryRun: options.dryRun })
  } finally {
    source?.stop()
  }
}

/** `kubevol gc`. */
export async function gcCommand(p: ParsedCommand, io: Io, deps: { host?: Host }): Promise<number> {
  const host = await hostFor(p.flags.host, deps.host)
  const dryRun = p.flags['dry-run'] === true
  const dir = p.flags.manifests === undefined ? undefined : String(p.flags.manifests)
  const report = await collectGarbage({ host, rootDir: String(p.flags.root), dryRun, ...(dir ? { manifestDir: isAbsolute(dir) ? dir : resolve(io.cwd, dir) } : {}) })
  const format = p.flags.output as OutputFormat
  const result = { dryRun, orphans: report.orphans, removed: report.removed, wouldRemove: dryRun ? report.orphans.filter((o) => !report.refused.some((r) => r.pod === o)) : [], refused: report.refused }
  if (format === 'json' || format === 'yaml') io.stdout.write(renderData(format, result))
  else {
    const rows: unknown[][] = [
      ...report.removed.map((pod) => [pod, 'removed', '']),
      ...result.wouldRemove.map((pod) => [pod, 'would remove', '']),
      ...report.refused.map((r) => [r.pod, 'refused', r.reason]),
    ]
    io.stdout.write(rows.length === 0 ? 'no orphaned pod directories\n' : renderTable(['pod', 'action', 'reason'], rows))
    if (dryRun && rows.length > 0) io.stdout.write('\ndry run: nothing was removed\n')
  }
  if (report.refused.length > 0) throw new CommandFailed(`${report.refused.length} orphaned pod directories were kept (see the reasons above)`)
  return EXIT.ok
}
