// Reconstruction after a restart: 10,000 volumes (1,000 pods × 10 emptyDir volumes) on the
// in-memory host, from the journal and from the disk scan alone. The figure is the time from a new
// manager's start to its actual state holding every volume again.
import os from 'node:os'
import { createMemoryHost } from '@kubevol/adapter-mock'
import { silentLogger, silentMetrics, silentRecorder, systemClock, createVolumeManager } from '@kubevol/core'
import { createBuiltinPlugins } from '@kubevol/core/plugins'
import { VolumeJournal, createPaths, createPluginManager, reconstructVolumes, ActualStateOfWorld } from '@kubevol/core/engine'
import { buildPod, createMemoryObjectReader, createMemoryPodSource } from '@kubevol/core/testing'
import { writeResult } from './results.js'

const PODS = Number(process.env.KUBEVOL_BENCH_RECONSTRUCT_PODS ?? 1000)
const VOLUMES = 10
const TARGET_SECONDS = 2
const ROOT = '/var/lib/kubevol'

async function fill() {
  const host = createMemoryHost()
  const pods = createMemoryPodSource()
  const manager = createVolumeManager({ host, plugins: createBuiltinPlugins(), podSource: pods, objects: createMemoryObjectReader(), nodeName: 'node-1', rootDir: ROOT, statsPeriodMs: 0 })
  const stop = new AbortController()
  const running = manager.run(stop.signal)
  const all = []
  for (let i = 0; i < PODS; i++) {
    const pod = buildPod({ uid: `uid-${i}`, name: `p${i}`, volumes: Array.from({ length: VOLUMES }, (_, v) => ({ name: `v${v}`, emptyDir: {} })) })
    pods.setPod(pod)
    all.push(pod)
  }
  await Promise.all(all.map((pod) => manager.waitForAttachAndMount(pod, { timeoutMs: 600_000 })))
  stop.abort()
  await running
  return host
}

async function reconstruct(host, withJournal) {
  const paths = createPaths(ROOT)
  const plugins = createPluginManager(createBuiltinPlugins(), { host, paths, nodeName: 'node-1', objects: createMemoryObjectReader(), clock: systemClock, logger: silentLogger, recorder: silentRecorder, metrics: silentMetrics })
  const asw = new ActualStateOfWorld(plugins)
  const started = performance.now()
  const journal = withJournal ? await VolumeJournal.open({ host, path: `${ROOT}/journal/volumes.log`, logger: silentLogger }) : undefined
  const result = await reconstructVolumes({ host, paths, plugins, asw, logger: silentLogger, metrics: silentMetrics, journal })
  const seconds = (performance.now() - started) / 1000
  return { seconds, volumes: asw.getAllMountedVolumes().length, failed: result.failed.length }
}

const host = await fill()
const fromJournal = await reconstruct(host, true)
// The disk alone: the same layout with the journal gone.
await host.remove(`${ROOT}/journal/volumes.log`)
const fromDisk = await reconstruct(host, false)
const volumes = PODS * VOLUMES
const rows = [
  { source: 'journal + disk', ...fromJournal },
  { source: 'disk scan only', ...fromDisk },
]
for (const r of rows) console.log(`reconstruction (${r.source}): ${r.volumes} volumes in ${r.seconds.toFixed(3)} s`)
const md = [
  '## Reconstruction after a restart (in-memory host)',
  '',
  `${volumes.toLocaleString('en')} volumes (${PODS} pods × ${VOLUMES} emptyDir), time for a new manager to rebuild its actual state. Target: under ${TARGET_SECONDS} s.`,
  '',
  '| source | volumes rebuilt | failed | time | target met |',
  '| --- | ---: | ---: | ---: | --- |',
  ...rows.map((r) => `| ${r.source} | ${r.volumes} | ${r.failed} | ${r.seconds.toFixed(3)} s | ${r.seconds < TARGET_SECONDS && r.volumes === volumes ? 'yes' : 'no'} |`),
  '',
]
await writeResult('reconstruction', { benchmark: 'reconstruction', volumes, rows, machine: { cpu: os.cpus()[0]?.model, cores: os.cpus().length, node: process.version, date: new Date().toISOString() } }, md.join('\n'))
