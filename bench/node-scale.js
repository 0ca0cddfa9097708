// Node scale, on the in-memory host:
// - converge: 100,000 volumes (10,000 pods × 10) added at once to an empty node, timed until every
//   pod's volumes are mounted, and the heap the manager holds for them (per volume, after a full GC);
// - idle: a node of 10,000 mounted volumes left alone, CPU time per second of wall time, with the
//   manager's default periods (10 s resync, 60 s remount and stats, 10 s housekeeping), against the
//   kubelet's timing (`pollingCompat`: a pass over every volume each 100 ms) on the same node.
// Run with --expose-gc (the package script does). Sizes: KUBEVOL_BENCH_CONVERGE_PODS,
// KUBEVOL_BENCH_IDLE_PODS, KUBEVOL_BENCH_IDLE_SECONDS. KUBEVOL_BENCH_CONVERGE_ONLY=builtin (or scratch)
// runs that one converge, prints its figures with the process's CPU time, and writes nothing.
import os from 'node:os'
import { createMemoryHost } from '@kubevol/adapter-mock'
import { createVolumeManager } from '@kubevol/core'
import { createBuiltinPlugins } from '@kubevol/core/plugins'
import { buildPod, createFakePlugin, createMemoryObjectReader, createMemoryPodSource } from '@kubevol/core/testing'
import { residentMiB, writeResult } from './results.js'

const env = (name, fallback) => Number(process.env[`KUBEVOL_BENCH_${name}`] ?? fallback)
const CONVERGE_PODS = env('CONVERGE_PODS', 10_000)
const IDLE_PODS = env('IDLE_PODS', 1000)
const IDLE_SECONDS = env('IDLE_SECONDS', 65)
const CONVERGE_ONLY = process.env.KUBEVOL_BENCH_CONVERGE_ONLY
const VOLUMES = 10
const TARGETS = { convergeSeconds: 10, heapBytesPerVolume: 1024, idleCpuPercent: 1 }

if (typeof globalThis.gc !== 'function') {
  console.error('node-scale: run with --expose-gc (npm run bench does)')
  process.exit(1)
}

// Two mixes of ten volumes per pod:
// - scratch: ten volumes of a non-attachable fake plugin (a tmpfs in the pod's directory each), as in
//   the pod start-up benchmark: what kubevol's own machinery costs per volume;
// - builtin: emptyDir on disk and in memory, hostPath, configMap, secret, downwardAPI and projected,
//   the kinds a node runs most, each a real built-in plugin writing its files on the in-memory host.
function pod(i, mix) {
  if (mix === 'scratch') {
    return buildPod({
      uid: `uid-${i}`,
      name: `p${i}`,
      volumes: Array.from({ length: VOLUMES }, (_, v) => ({ name: `v${v}`, fake: { name: `p${i}-v${v}`, plugin: 'bench.kubevol.io/scratch' } })),
    })
  }
  const p = buildPod({
    uid: `uid-${i}`,
    name: `p${i}`,
    volumes: [
      { name: 'scratch', emptyDir: {} },
      { name: 'cache', emptyDir: {} },
      { name: 'shm', emptyDir: { medium: 'Memory', sizeLimit: '64Mi' } },
      { name: 'tmp', emptyDir: { medium: 'Memory' } },
      { name: 'logs', hostPath: { path: '/var/log/pods', type: 'DirectoryOrCreate' } },
      { name: 'config', configMap: { name: `cm-${i % 100}` } },
      { name: 'creds', secret: { secretName: `s-${i % 100}` } },
      { name: 'podinfo', downwardAPI: { items: [{ path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } }] } },
      { name: 'bundle', projected: { sources: [{ configMap: { name: `cm-${i % 100}` } }, { downwardAPI: { items: [{ path: 'name', fieldRef: { fieldPath: 'metadata.name' } }] } }] } },
      { name: 'work', emptyDir: {} },
    ],
  })
  p.metadata.labels = { app: `a${i % 50}` }
  return p
}

// `announcing`: the in-memory reader, which announces every change by name, as a watch or a
// manifest directory does; otherwise the same objects through a reader that does not (as a reader
// caching reads with a TTL), so the one-minute refresh sets up every configMap-like volume again.
function objects(announcing = true) {
  const reader = createMemoryObjectReader()
  for (let i = 0; i < 100; i++) {
    reader.put('ConfigMap', { metadata: { namespace: 'default', name: `cm-${i}` }, data: { 'app.conf': `setting=${i}\n` } })
    reader.put('Secret', { metadata: { namespace: 'default', name: `s-${i}` }, data: { token: btoa(`secret-${i}`) } })
  }
  return announcing ? reader : { ...reader, subscribe: undefined, announcesChanges: undefined }
}

function startManager(mix, extra = {}, announcing = true) {
  const host = createMemoryHost({ memoryBytes: 2 ** 50 })
  const pods = createMemoryPodSource()
  const plugins = mix === 'scratch' ? [createFakePlugin({ name: 'bench.kubevol.io/scratch' })] : createBuiltinPlugins()
  const manager = createVolumeManager({ host, plugins, podSource: pods, objects: objects(announcing), nodeName: 'node-1', ...extra })
  const stop = new AbortController()
  const running = manager.run(stop.signal)
  return {
    host,
    pods,
    manager,
    stop: async () => {
      stop.abort()
      await running
    },
  }
}

const heapUsed = () => {
  globalThis.gc()
  globalThis.gc()
  return process.memoryUsage().heapUsed
}

async function fill(node, count, mix) {
  const all = Array.from({ length: count }, (_, i) => pod(i, mix))
  for (const p of all) node.pods.setPod(p)
  await Promise.all(all.map((p) => node.manager.waitForAttachAndMount(p, { timeoutMs: 3_600_000 })))
  await node.manager.waitForIdle()
  const mounted = node.manager.snapshot().mounted.length
  if (mounted !== count * VOLUMES) throw new Error(`expected ${count * VOLUMES} mounted volumes, found ${mounted}`)
  return all
}

async function converge(mix) {
  // The heap a node's worth of pod objects and host state takes, measured apart from the manager's:
  // an in-memory host holding 100,000 volumes' directories and files is not what kubevol costs.
  const before = heapUsed()
  const node = startManager(mix, { statsPeriodMs: 0 })
  await node.manager.waitForIdle()
  const t0 = performance.now()
  await fill(node, CONVERGE_PODS, mix)
  const seconds = (performance.now() - t0) / 1000
  // RSS converged, and the process's peak so far (the first mix's converge is the whole peak of the
  // first; the second's is the larger of the two).
  const memory = residentMiB()
  const withManager = heapUsed()
  // Take the manager's state away (stop it, drop it) and see what the pods and the host alone hold.
  await node.stop()
  const { host, pods } = node
  node.manager = undefined
  const withoutManager = heapUsed()
  const volumes = CONVERGE_PODS * VOLUMES
  const managerBytes = withManager - withoutManager
  const result = {
    mix,
    pods: CONVERGE_PODS,
    volumes,
    seconds,
    heapTotalBytes: withManager - before,
    heapManagerBytes: managerBytes,
    heapBytesPerVolume: managerBytes / volumes,
    heapBytesPerVolumeAll: (withManager - before) / volumes,
    rssMiB: memory?.rss,
    peakRssMiB: memory?.peak,
  }
  // Keep the host and pods alive until they were measured.
  if (!host || !pods) throw new Error('unreachable')
  return result
}

async function idle(mix, polling, announcing = true) {
  const node = startManager(mix, polling ? { pollingCompat: true } : {}, announcing)
  await fill(node, IDLE_PODS, mix)
  // Past the start-up work: let the node settle, then measure a window that holds every period at
  // least once (resync and housekeeping every 10 s, remount and stats every 60 s).
  await new Promise((resolve) => setTimeout(resolve, 2000))
  // What the start-up left for the collector is not idle cost.
  heapUsed()
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  await new Promise((resolve) => setTimeout(resolve, IDLE_SECONDS * 1000))
  const cpu = process.cpuUsage(cpu0)
  const wall = (performance.now() - t0) / 1000
  await node.stop()
  const cpuSeconds = (cpu.user + cpu.system) / 1e6
  return { mix, mode: polling ? 'polling' : 'event', announcing, volumes: IDLE_PODS * VOLUMES, wallSeconds: wall, cpuSeconds, cpuPercent: (cpuSeconds / wall) * 100 }
}

if (CONVERGE_ONLY) {
  // One converge alone, for before/after comparisons: CPU time moves less with the machine's load
  // than wall time does.
  const cpu0 = process.cpuUsage()
  const r = await converge(CONVERGE_ONLY)
  const cpu = process.cpuUsage(cpu0)
  console.log(JSON.stringify({ ...r, cpuSeconds: (cpu.user + cpu.system) / 1e6 }))
  process.exit(0)
}

const machine = `${os.cpus()[0]?.model?.trim()} (${os.cpus().length} cores), Node ${process.version}, ${process.platform}/${process.arch}, ${new Date().toISOString()}`
const c = await converge('scratch')
console.log(`converge (scratch): ${c.volumes} volumes in ${c.seconds.toFixed(2)} s, ${c.heapBytesPerVolume.toFixed(0)} B of manager heap per volume`)
const b = await converge('builtin')
console.log(`converge (builtin): ${b.volumes} volumes in ${b.seconds.toFixed(2)} s, ${b.heapBytesPerVolume.toFixed(0)} B of manager heap per volume`)
const idleScratch = await idle('scratch', false)
console.log(`idle (scratch, event): ${idleScratch.cpuPercent.toFixed(3)} % of a core`)
const idleScratchPolling = await idle('scratch', true)
console.log(`idle (scratch, polling): ${idleScratchPolling.cpuPercent.toFixed(3)} % of a core`)
const idleEvent = await idle('builtin', false)
console.log(`idle (builtin, event): ${idleEvent.cpuPercent.toFixed(3)} % of a core`)
const idleReading = await idle('builtin', false, false)
console.log(`idle (builtin, event, reader without announcements): ${idleReading.cpuPercent.toFixed(3)} % of a core`)
const idlePolling = await idle('builtin', true)
console.log(`idle (builtin, polling): ${idlePolling.cpuPercent.toFixed(3)} % of a core`)

const yes = (ok) => (ok ? 'yes' : 'no')
const mib = (n) => (n === undefined ? 'n/a' : `${n.toFixed(0)} MiB`)
const md = [
  '## Node scale (in-memory host)',
  '',
  machine,
  '',
  '| benchmark | result | target | met |',
  '| --- | ---: | --- | --- |',
  `| converge ${c.volumes.toLocaleString('en')} volumes (${c.pods.toLocaleString('en')} pods × ${VOLUMES} fake scratch volumes) from empty | ${c.seconds.toFixed(2)} s | < ${TARGETS.convergeSeconds} s | ${yes(c.seconds < TARGETS.convergeSeconds)} |`,
  `| manager heap per volume after converging (scratch) | ${c.heapBytesPerVolume.toFixed(0)} B (${(c.heapManagerBytes / 2 ** 20).toFixed(1)} MiB in all) | < 1 KiB | ${yes(c.heapBytesPerVolume < TARGETS.heapBytesPerVolume)} |`,
  `| converge ${b.volumes.toLocaleString('en')} volumes of the built-in mix (emptyDir, hostPath, configMap, secret, downwardAPI, projected) | ${b.seconds.toFixed(2)} s | | |`,
  `| manager heap per volume after converging (built-in mix) | ${b.heapBytesPerVolume.toFixed(0)} B | | |`,
  `| RSS converged, scratch mix (peak of the process so far) | ${mib(c.rssMiB)} (peak ${mib(c.peakRssMiB)}) | | |`,
  `| RSS converged, built-in mix (peak of the process so far) | ${mib(b.rssMiB)} (peak ${mib(b.peakRssMiB)}) | | |`,
  `| idle CPU with ${idleScratch.volumes.toLocaleString('en')} mounted volumes (scratch) | ${idleScratch.cpuPercent.toFixed(3)} % of one core (${idleScratch.cpuSeconds.toFixed(2)} s CPU in ${idleScratch.wallSeconds.toFixed(0)} s) | < 1 % | ${yes(idleScratch.cpuPercent < TARGETS.idleCpuPercent)} |`,
  `| the same node with the kubelet's timing (pollingCompat) | ${idleScratchPolling.cpuPercent.toFixed(2)} % of one core | | ${(idleScratchPolling.cpuPercent / idleScratch.cpuPercent).toFixed(0)}× the event-driven cost |`,
  `| idle CPU with ${idleEvent.volumes.toLocaleString('en')} mounted volumes (built-in mix, 4,000 of them configMap, secret, downwardAPI and projected; objects from a reader that announces changes) | ${idleEvent.cpuPercent.toFixed(3)} % of one core (${idleEvent.cpuSeconds.toFixed(2)} s CPU in ${idleEvent.wallSeconds.toFixed(0)} s) | < 1 % | ${yes(idleEvent.cpuPercent < TARGETS.idleCpuPercent)} |`,
  `| the same node, objects from a reader that does not announce changes (those 4,000 set up again each minute, as the kubelet) | ${idleReading.cpuPercent.toFixed(3)} % of one core (${idleReading.cpuSeconds.toFixed(2)} s CPU in ${idleReading.wallSeconds.toFixed(0)} s) | | |`,
  `| the same node with the kubelet's timing (pollingCompat) | ${idlePolling.cpuPercent.toFixed(2)} % of one core | | ${(idlePolling.cpuPercent / idleEvent.cpuPercent).toFixed(0)}× the event-driven cost |`,
  '',
  'The scratch mix is ten volumes of a fake plugin (a tmpfs in the pod directory each), as in the pod start-up benchmark:',
  'what kubevol itself costs per volume. The built-in mix runs the real plugins, whose file writes on the in-memory host',
  'are part of the figure. Heap per volume is what the running manager holds beyond the pods and the in-memory host: the',
  'heap after a full GC with the manager, minus the heap once it is stopped and dropped (the pods and host stay).',
  'RSS includes the in-memory host holding every directory and file of 100,000 volumes; a real node\'s RSS for its',
  'volumes is in the memory section (bench/memory.js, each workload a process of its own).',
  `Everything together (pods, host, manager) is ${(c.heapBytesPerVolumeAll / 1024).toFixed(1)} KiB per volume (scratch), ${(b.heapBytesPerVolumeAll / 1024).toFixed(1)} KiB (built-in).`,
  `Idle CPU is the whole process (process.cpuUsage) over ${IDLE_SECONDS} s of wall time after the node settled and a`,
  'full GC, a window holding every periodic task at least once: resync and housekeeping every 10 s, stats every 60 s,',
  'and the one-minute content refresh. With a reader that announces changes (a watch, a manifest directory, memory),',
  'configMap, secret, downwardAPI and projected volumes without a token are set up again when their pod or object',
  "changes, not each minute. With one that does not, each minute's refresh sets up all 4,000 again, re-reading their",
  "files to compare them with the objects, as the kubelet's pod sync does.",
  '',
]
console.log(md.join('\n'))
await writeResult('node-scale', { benchmark: 'node-scale', targets: TARGETS, converge: [c, b], idle: [idleScratch, idleScratchPolling, idleEvent, idleReading, idlePolling], machine }, md.join('\n'))
