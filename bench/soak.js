// Soak, on the in-memory host: a node that keeps a steady set of pods while pods come and go, for a
// fixed number of operations (not a fixed time), with the real clock and the manager's default
// periods. Each operation adds a pod and waits for its volumes, or deletes one and waits for them to
// be unmounted. The first and the last window of operations are compared: heap after a full GC, and
// add/delete latency (p50, p99). A leak or a slowdown that grows with the number of operations shows
// as a ratio above the noise threshold; the run fails (exit 1) when it does, or when anything is left
// mounted once every pod is gone. Sizes: KUBEVOL_BENCH_SOAK_OPS, KUBEVOL_BENCH_SOAK_PODS,
// KUBEVOL_BENCH_SOAK_WINDOW; KUBEVOL_BENCH_SOAK_VOLUMES=scratch,own keeps only those volumes of each pod.
// Run with --expose-gc (the package script does).
import os from 'node:os'
import { createMemoryHost } from '@kubevol/adapter-mock'
import { createVolumeManager } from '@kubevol/core'
import { createBuiltinPlugins } from '@kubevol/core/plugins'
import { createFakePlugin, createMemoryObjectReader, createMemoryPodSource } from '@kubevol/core/testing'
import { writeResult } from './results.js'

const env = (name, fallback) => Number(process.env[`KUBEVOL_BENCH_SOAK_${name}`] ?? fallback)
const OPS = env('OPS', 10_000)
const STEADY_PODS = env('PODS', 100)
const WINDOW = env('WINDOW', Math.min(2_000, Math.floor(OPS / 4)))
// What counts as noise between two windows of the same work on a shared machine.
const ONLY = process.env.KUBEVOL_BENCH_SOAK_VOLUMES?.split(',')
const LIMITS = { heapRatio: 1.1, heapSlackBytes: 4 * 2 ** 20, p50Ratio: 1.5 }

if (typeof globalThis.gc !== 'function') {
  console.error('soak: run with --expose-gc (npm run bench does)')
  process.exit(1)
}

// A deterministic sequence, so two runs do the same work.
let seed = 0x5eed
const random = () => {
  seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31
  return seed / 2 ** 31
}

// Five volumes per pod: emptyDir on disk and in memory, a configMap, a per-pod fake volume, and one of
// four shared disks of an attachable fake plugin (attach and device mount once, bind per pod).
function pod(n) {
  const volumes = [
    { name: 'scratch', emptyDir: {} },
    { name: 'shm', emptyDir: { medium: 'Memory', sizeLimit: '16Mi' } },
    { name: 'config', configMap: { name: `cm-${n % 20}` } },
    { name: 'own', fake: { name: `own-${n}`, plugin: 'soak.kubevol.io/own' } },
    { name: 'disk', fake: { name: `disk-${n % 4}`, plugin: 'soak.kubevol.io/disk' } },
  ].filter((v) => !ONLY || ONLY.includes(v.name))
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: `p${n}`, namespace: 'default', uid: `uid-${n}`, labels: { app: `a${n % 10}` } },
    spec: { nodeName: 'node-1', volumes, containers: [{ name: 'main', image: 'busybox', volumeMounts: volumes.map((v) => ({ name: v.name, mountPath: `/${v.name}` })) }] },
  }
}

// Deleted pods' directories go at the next housekeeping (every 10 s): clean them up first, so that
// both measurements see the same node whatever the timing.
const heapAfterCleanup = async () => {
  await manager.waitForIdle()
  await manager.cleanupOrphanedPods()
  return heapUsed()
}

const heapUsed = () => {
  globalThis.gc()
  globalThis.gc()
  return process.memoryUsage().heapUsed
}

const percentile = (values, p) => {
  if (values.length === 0) return 0
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]
}

const host = createMemoryHost({ memoryBytes: 2 ** 50 })
const pods = createMemoryPodSource()
const objects = createMemoryObjectReader()
for (let i = 0; i < 20; i++) objects.put('ConfigMap', { metadata: { namespace: 'default', name: `cm-${i}` }, data: { 'app.conf': `setting=${i}\n` } })
const manager = createVolumeManager({
  host,
  plugins: [createFakePlugin({ name: 'soak.kubevol.io/own' }), createFakePlugin({ name: 'soak.kubevol.io/disk', attachable: true }), ...createBuiltinPlugins()],
  podSource: pods,
  objects,
  nodeName: 'node-1',
  controllerAttachDetach: false,
})
const stop = new AbortController()
const running = manager.run(stop.signal)

const live = []
let next = 0
const add = async () => {
  const p = pod(next++)
  const t0 = performance.now()
  pods.setPod(p)
  await manager.waitForAttachAndMount(p, { timeoutMs: 60_000 })
  live.push(p)
  return performance.now() - t0
}
const remove = async () => {
  const [p] = live.splice(Math.floor(random() * live.length), 1)
  const t0 = performance.now()
  pods.deletePod(p.metadata.uid)
  await manager.waitForUnmount(p, { timeoutMs: 60_000 })
  return performance.now() - t0
}

// The steady node first; it is not counted.
while (live.length < STEADY_PODS) await add()
await manager.waitForIdle()

const windows = []
let current
const started = performance.now()
for (let i = 0; i < OPS; i++) {
  if (i % WINDOW === 0 && (i === 0 || i === OPS - WINDOW)) {
    current = { from: i, heapBefore: await heapAfterCleanup(), add: [], delete: [] }
    windows.push(current)
  }
  // Keep the node around its steady size: add when below, delete when above, else either.
  const adding = live.length < STEADY_PODS * 0.9 || (live.length <= STEADY_PODS * 1.1 && random() < 0.5)
  const ms = adding ? await add() : await remove()
  if (current && i < current.from + WINDOW) current[adding ? 'add' : 'delete'].push(ms)
}
const seconds = (performance.now() - started) / 1000
const heapEnd = await heapAfterCleanup()

// Everything goes: nothing may be left mounted, attached or desired.
while (live.length > 0) await remove()
await manager.waitForIdle()
const snap = manager.snapshot()
const leftover = {
  hostMounts: host.mountTargets().length,
  desired: snap.desired.length,
  mounted: snap.mounted.length,
  attached: snap.attached.length,
}
stop.abort()
await running

const [first, last] = windows
const summarize = (w, heapAfter) => ({
  from: w.from,
  operations: w.add.length + w.delete.length,
  heapBytes: w.heapBefore,
  heapBytesAfter: heapAfter,
  addP50Ms: percentile(w.add, 50),
  addP99Ms: percentile(w.add, 99),
  deleteP50Ms: percentile(w.delete, 50),
  deleteP99Ms: percentile(w.delete, 99),
})
const start = summarize(first, last.heapBefore)
const end = summarize(last, heapEnd)
const heapGrowth = end.heapBytesAfter - start.heapBytes
const heapRatio = end.heapBytesAfter / start.heapBytes
const addRatio = end.addP50Ms / start.addP50Ms
const deleteRatio = end.deleteP50Ms / start.deleteP50Ms
const checks = {
  heap: heapRatio <= LIMITS.heapRatio || heapGrowth <= LIMITS.heapSlackBytes,
  addLatency: addRatio <= LIMITS.p50Ratio,
  deleteLatency: deleteRatio <= LIMITS.p50Ratio,
  nothingLeft: Object.values(leftover).every((n) => n === 0),
}
const passed = Object.values(checks).every(Boolean)

const machine = `${os.cpus()[0]?.model?.trim()} (${os.cpus().length} cores), Node ${process.version}, ${process.platform}/${process.arch}, ${new Date().toISOString()}`
const mib = (b) => `${(b / 2 ** 20).toFixed(1)} MiB`
const ms = (v) => `${v.toFixed(2)} ms`
const yes = (ok) => (ok ? 'pass' : 'FAIL')
const md = [
  '## Soak (in-memory host)',
  '',
  machine,
  '',
  `${OPS.toLocaleString('en')} operations (a pod added and waited for until mounted, or deleted and waited for until unmounted) on a node kept at about ${STEADY_PODS} pods of 5 volumes (emptyDir on disk and in memory, configMap, a per-pod fake volume, one of 4 shared attachable disks), real clock, default periods; ${seconds.toFixed(1)} s. The first and the last ${WINDOW.toLocaleString('en')} operations are compared.`,
  '',
  '| figure | start | end | end / start | limit | result |',
  '| --- | ---: | ---: | ---: | --- | --- |',
  `| heap after a full GC | ${mib(start.heapBytes)} | ${mib(end.heapBytesAfter)} | ${heapRatio.toFixed(3)} | ≤ ${LIMITS.heapRatio} or ≤ ${mib(LIMITS.heapSlackBytes)} more | ${yes(checks.heap)} |`,
  `| add: setPod → mounted, p50 | ${ms(start.addP50Ms)} | ${ms(end.addP50Ms)} | ${addRatio.toFixed(2)} | ≤ ${LIMITS.p50Ratio} | ${yes(checks.addLatency)} |`,
  `| add, p99 | ${ms(start.addP99Ms)} | ${ms(end.addP99Ms)} | ${(end.addP99Ms / start.addP99Ms).toFixed(2)} | | |`,
  `| delete: deletePod → unmounted, p50 | ${ms(start.deleteP50Ms)} | ${ms(end.deleteP50Ms)} | ${deleteRatio.toFixed(2)} | ≤ ${LIMITS.p50Ratio} | ${yes(checks.deleteLatency)} |`,
  `| delete, p99 | ${ms(start.deleteP99Ms)} | ${ms(end.deleteP99Ms)} | ${(end.deleteP99Ms / start.deleteP99Ms).toFixed(2)} | | |`,
  `| left after every pod is gone (host mounts, desired, mounted, attached) | | ${Object.values(leftover).join(', ')} | | all 0 | ${yes(checks.nothingLeft)} |`,
  '',
  'The start heap is measured after the steady node is built and before the first window; the end heap after the last',
  'window. The p99 figures are reported, not judged: on a shared machine a single pause moves them.',
  '',
]
console.log(md.join('\n'))
await writeResult('soak', { benchmark: 'soak', operations: OPS, steadyPods: STEADY_PODS, window: WINDOW, limits: LIMITS, seconds, start, end, ratios: { heap: heapRatio, addP50: addRatio, deleteP50: deleteRatio }, leftover, checks, passed, machine }, md.join('\n'))
if (!passed) {
  console.error('soak: FAILED', checks)
  process.exit(1)
}
