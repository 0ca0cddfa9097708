/**
 * `kubevol reconstruct`: what a restarted kubevol would find under the root, read only: the journal
 * (what kubevol set out to do and how far it got), the pod volume directories on disk (and whether
 * each is a mount point), and the mounts under the root.
 */
import { type Host, isHostError, silentLogger } from '@kubevol/core'
import { createPaths, parseJournal, replay, scanPodVolumes } from '@kubevol/core/engine'
import { decodeUtf8, joinPath } from '@kubevol/core/host'
import { EXIT } from '../errors.js'
import { hostFor } from '../host-loader.js'
import { type Io, type OutputFormat, renderData, renderTable, tableOptions } from '../output.js'
import type { ParsedCommand } from '../parse.js'
import { createReadOnlyHost } from '../read-only-host.js'

/** What is under the root. */
export interface Reconstruction {
  readonly root: string
  readonly volumes: readonly { pod: string; plugin: string; volume: string; mode: string; mounted: boolean; path: string }[]
  readonly mounts: readonly { target: string; source: string; fstype: string }[]
  readonly journal: {
    readonly records: number
    readonly dropped: number
    readonly volumes: readonly { volume: string; attached?: string; device?: string; pods: string[] }[]
  }
}

/** Reads what is under `rootDir` on `host` (wrapped read-only). */
async function readReconstruction(host: Host, rootDir: string): Promise<Reconstruction> {
  const ro = createReadOnlyHost(host).host
  const paths = createPaths(rootDir)
  const onDisk = await scanPodVolumes(ro, paths, silentLogger)
  const volumes = []
  for (const v of onDisk) {
    volumes.push({ pod: v.podName, plugin: v.pluginName, volume: v.volumeSpecName, mode: v.volumeMode, mounted: await ro.isMountPoint(v.volumePath).catch(() => false), path: v.volumePath })
  }
  const prefix = `${paths.root.replace(/\/+$/, '')}/`
  const mounts = (await ro.mounts()).filter((m) => m.target.startsWith(prefix)).map((m) => ({ target: m.target, source: m.source, fstype: m.fstype }))
  let text = ''
  try {
    text = decodeUtf8(await ro.readFile(joinPath(paths.root, 'journal', 'volumes.log')))
  } catch (err) {
    if (!isHostError(err, 'ENOENT', 'ENOTDIR')) throw err
  }
  const { records, dropped } = parseJournal(text)
  const journal = [...replay(records).values()].map((v) => ({
    volume: v.volume,
    ...(v.attached ? { attached: v.attached.devicePath } : {}),
    ...(v.device ? { device: `${v.device.devicePath} at ${v.device.path}` } : {}),
    pods: [...v.pods.keys()],
  }))
  return { root: paths.root, volumes, mounts, journal: { records: records.length, dropped, volumes: journal } }
}

/** `kubevol reconstruct`. */
export async function reconstructCommand(p: ParsedCommand, io: Io, deps: { host?: Host }): Promise<number> {
  const host = await hostFor(p.flags.host, deps.host)
  const r = await readReconstruction(host, String(p.flags['root-dir']))
  const format = p.flags.output as OutputFormat
  if (format === 'json' || format === 'yaml') {
    io.stdout.write(renderData(format, r))
    return EXIT.ok
  }
  io.stdout.write(`root ${r.root}\n\nPod volumes on disk:\n`)
  io.stdout.write(r.volumes.length === 0 ? '  none\n' : renderTable(['pod', 'plugin', 'volume', 'mode', 'mounted'], r.volumes.map((v) => [v.pod, v.plugin, v.volume, v.mode, v.mounted ? 'yes' : 'no']), tableOptions(p)))
  io.stdout.write('\nMounts under the root:\n')
  io.stdout.write(r.mounts.length === 0 ? '  none\n' : renderTable(['target', 'source', 'fstype'], r.mounts.map((m) => [m.target, m.source, m.fstype]), tableOptions(p)))
  io.stdout.write(`\nJournal: ${r.journal.records} records${r.journal.dropped ? `, ${r.journal.dropped} torn or corrupt dropped` : ''}\n`)
  if (r.journal.volumes.length > 0) {
    io.stdout.write(renderTable(['volume', 'attached', 'device', 'pods'], r.journal.volumes.map((v) => [v.volume, v.attached ?? '', v.device ?? '', v.pods.join(',')]), tableOptions(p)))
  }
  io.stdout.write('\nA restart marks all of this uncertain; the first pass mounts again what pods want and tears down the rest.\n')
  return EXIT.ok
}
