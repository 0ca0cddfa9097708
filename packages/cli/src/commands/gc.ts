/**
 * `kubevol gc`: the manager's orphan cleanup, once. A pod directory is removed only when no source
 * (the manifests, if given) knows the pod, the journal does not record any of its volumes as set up
 * (unless `--force`), and nothing under it is mounted; what is kept is reported with the reason.
 * gc first takes the root's lock, the one a running agent holds: it never cleans a root an agent
 * manages. `--dry-run` runs on a read-only view of the host.
 */
import { hostname } from 'node:os'
import { isAbsolute, resolve } from 'node:path'
import { type ManifestSource, createManifestSource } from '@kubevol/agent'
import { type Host, type ObjectReader, type OrphanCleanupReport, type PodSource, createVolumeManager, silentLogger } from '@kubevol/core'
import { createBuiltinPlugins } from '@kubevol/core/plugins'
import { VolumeJournal } from '@kubevol/core/engine'
import { joinPath } from '@kubevol/core/host'
import { CommandFailed, EXIT } from '../errors.js'
import { hostFor } from '../host-loader.js'
import { type Io, type OutputFormat, renderData, renderTable, tableOptions } from '../output.js'
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

/** The pods the journal under `rootDir` records a volume set up for, with those volumes' names. */
async function journalSetUps(host: Host, rootDir: string): Promise<Map<string, string[]>> {
  const journal = await VolumeJournal.read({ host, path: joinPath(rootDir, 'journal', 'volumes.log'), logger: silentLogger })
  const pods = new Map<string, string[]>()
  for (const volume of journal.volumes().values()) {
    for (const { podUID, outerName } of volume.pods.values()) pods.set(podUID, [...(pods.get(podUID) ?? []), outerName])
  }
  return pods
}

/** `pods`, where a pod the journal says is set up counts as one whose runtime stays: the cleanup skips it. */
function keepingSetUps(pods: PodSource, setUp: ReadonlyMap<string, unknown>): PodSource {
  return {
    getPods: () => pods.getPods(),
    getPodByUID: (uid) => pods.getPodByUID(uid),
    shouldPodContainersBeTerminating: (uid) => pods.shouldPodContainersBeTerminating(uid),
    shouldPodRuntimeBeRemoved: (uid) => !setUp.has(uid) && pods.shouldPodRuntimeBeRemoved(uid),
    allReady: () => pods.allReady(),
    subscribe: (listener) => pods.subscribe(listener),
  }
}

/**
 * Runs the orphan cleanup on `host` under `rootDir`. Pods the journal records as set up are kept
 * (and reported as refused) unless `force`.
 */
async function collectGarbage(options: { host: Host; rootDir: string; manifestDir?: string; dryRun: boolean; force?: boolean }): Promise<OrphanCleanupReport> {
  const host = options.dryRun ? createReadOnlyHost(options.host).host : options.host
  const setUp = options.force ? new Map<string, string[]>() : await journalSetUps(options.host, options.rootDir)
  let source: ManifestSource | undefined
  if (options.manifestDir) {
    source = createManifestSource({ dir: options.manifestDir, nodeName: hostname().toLowerCase(), rescanMs: 3_600_000, logger: silentLogger })
    await source.start()
  }
  const pods = source?.pods ?? noPods
  try {
    const manager = createVolumeManager({
      host,
      plugins: createBuiltinPlugins(),
      podSource: keepingSetUps(pods, setUp),
      objects: source?.objects ?? noObjects,
      nodeName: hostname().toLowerCase(),
      rootDir: options.rootDir,
      journal: false,
    })
    const report = await manager.cleanupOrphanedPods({ dryRun: options.dryRun })
    const kept: OrphanCleanupReport['refused'] = []
    for (const [uid, volumes] of setUp) {
      if (pods.getPodByUID(uid) !== undefined || (await options.host.lstat(joinPath(options.rootDir, 'pods', uid)))?.type !== 'directory') continue
      kept.push({ pod: uid, reason: `the journal records volumes ${volumes.map((v) => `"${v}"`).join(', ')} of this pod as set up; pass --force to remove it anyway` })
    }
    return { ...report, orphans: [...report.orphans, ...kept.map((k) => k.pod)], refused: [...report.refused, ...kept] }
  } finally {
    source?.stop()
  }
}

/** `kubevol gc`. */
export async function gcCommand(p: ParsedCommand, io: Io, deps: { host?: Host }): Promise<number> {
  const host = await hostFor(p.flags.host, deps.host)
  const dryRun = p.flags['dry-run'] === true
  const rootDir = String(p.flags['root-dir'])
  const dir = p.flags['pod-manifest-path'] === undefined ? undefined : String(p.flags['pod-manifest-path'])
  // The agent's lock: while an agent manages the root, its pods are not orphans, whatever gc sees.
  const lock = await host.lockRoot?.(rootDir)
  if (lock && !lock.locked) throw new CommandFailed(`the root ${rootDir} is in use by kubevol${lock.holderPid ? ` (pid ${lock.holderPid})` : ''}; stop the agent first`)
  let report: OrphanCleanupReport
  try {
    report = await collectGarbage({ host, rootDir, dryRun, force: p.flags.force === true, ...(dir ? { manifestDir: isAbsolute(dir) ? dir : resolve(io.cwd, dir) } : {}) })
  } finally {
    if (lock?.locked) await lock.release()
  }
  const format = p.flags.output as OutputFormat
  const result = { dryRun, orphans: report.orphans, removed: report.removed, wouldRemove: dryRun ? report.orphans.filter((o) => !report.refused.some((r) => r.pod === o)) : [], refused: report.refused }
  if (format === 'json' || format === 'yaml') io.stdout.write(renderData(format, result))
  else {
    const rows: unknown[][] = [
      ...report.removed.map((pod) => [pod, 'removed', '']),
      ...result.wouldRemove.map((pod) => [pod, 'would remove', '']),
      ...report.refused.map((r) => [r.pod, 'refused', r.reason]),
    ]
    // --no-headers: the rows alone, no summary line.
    const table = tableOptions(p)
    if (rows.length > 0) io.stdout.write(renderTable(['pod', 'action', 'reason'], rows, table))
    else if (!table.noHeaders) io.stdout.write('no orphaned pod directories\n')
    if (dryRun && rows.length > 0 && !table.noHeaders) io.stdout.write('\ndry run: nothing was removed\n')
  }
  if (report.refused.length > 0) throw new CommandFailed(`${report.refused.length} orphaned pod directories were kept (see the reasons above)`)
  return EXIT.ok
}
