// The Linux host at node scale (root only), in a private mount namespace of its own and on a fresh
// ext4 (scratch-fs.js), against the kubelet's own steps run as plain loops (kubelet-steps.js), the
// floor:
// - 10,000 emptyDir on disk (1,000 pods × 10) converged from empty through the whole manager, then
//   torn down, each timed; kubevol ÷ floor for each (target ≤ 1.25);
// - 1,000 emptyDir (Memory) + 1,000 hostPath mounted, then unmounted, each timed, the same ratio;
// - pod start-up on that node of 1,000 pods × 10 emptyDir: pods of 10 emptyDir added one at a time,
//   pod added → waitForAttachAndMount (median ≤ 1.5 ms, p99 ≤ 5 ms), and the kubelet's steps for
//   such a pod as plain loops (through node:fs, and synchronously on one thread) beside it.
// The manager's runs and the loops' alternate (three each, median), after one uncounted round of each.
import { spawnSync } from 'node:child_process'
import { mkdirSync, rmSync } from 'node:fs'
import os from 'node:os'
import { fileURLToPath } from 'node:url'
import { emptyDirDiskSteps, emptyDirPodStartUpSteps, memoryHostPathSteps } from './kubelet-steps.js'
import { writeResult } from './results.js'
import { scratchFilesystem } from './scratch-fs.js'

const preload = fileURLToPath(new URL('../packages/adapter-linux/test/mount-namespace.cjs', import.meta.url))

if (process.getuid?.() !== 0) {
  console.log('linux-scale benchmark skipped: it needs root (real mounts in a private mount namespace)')
  process.exit(0)
}
if (process.env.KUBEVOL_TEST_MOUNT_NAMESPACE !== 'private') {
  const child = spawnSync(process.execPath, ['--require', preload, ...process.execArgv, fileURLToPath(import.meta.url)], { stdio: 'inherit' })
  process.exit(child.status ?? 1)
}

const { createLinuxHost } = await import('@kubevol/adapter-linux')
const { createVolumeManager } = await import('@kubevol/core')
const { createBuiltinPlugins } = await import('@kubevol/core/plugins')
const { buildPod, createMemoryObjectReader, createMemoryPodSource } = await import('@kubevol/core/testing')

const env = (name, fallback) => Number(process.env[`KUBEVOL_BENCH_${name}`] ?? fallback)
const config = {
  diskPods: env('LINUX_DISK_PODS', 1000),
  mixPods: env('LINUX_MIX_PODS', 200),
  perPod: 10,
  runs: env('LINUX_RUNS', 3),
  samples: env('LINUX_STARTUP_SAMPLES', 200),
  warmup: env('LINUX_STARTUP_WARMUP', 20),
  // 1: the start-up figure alone (no bulk rounds), for before/after pairs of it.
  startupOnly: env('LINUX_STARTUP_ONLY', 0) === 1,
  // 1: the Linux host without its `fileSteps`, so core makes the steps as separate calls (the
  // calls before that capability): the "before" of an interleaved pair.
  separateSteps: env('LINUX_SEPARATE_STEPS', 0) === 1,
}
const TARGET_RATIO = 1.25
const TARGET_MEDIAN_MS = 1.5
const TARGET_P99_MS = 5
const WAIT = { timeoutMs: 600_000 }

const scratch = scratchFilesystem('kubevol-bench-scale-', '8G')
const base = scratch.dir
const hostDir = (i) => `${base}/host/d${i}`
mkdirSync(`${base}/host`)
for (let i = 0; i < config.mixPods * config.perPod; i++) mkdirSync(hostDir(i))

const seconds = (t0) => (performance.now() - t0) / 1000
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const percentile = (sorted, p) => sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)]

function diskPod(n) {
  return buildPod({ uid: `uid-${n}`, name: `p${n}`, volumes: Array.from({ length: config.perPod }, (_, v) => ({ name: `d${v}`, emptyDir: {} })) })
}

function mixPod(p) {
  const half = config.perPod / 2
  return buildPod({
    uid: `uid-${p}`,
    name: `p${p}`,
    volumes: [
      ...Array.from({ length: half }, (_, v) => ({ name: `m${v}`, emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } })),
      ...Array.from({ length: half }, (_, v) => ({ name: `h${v}`, hostPath: { path: hostDir(p * config.perPod + v), type: 'Directory' } })),
    ],
  })
}

// A manager of its own on the Linux host, its journal synced, under `root`.
async function startManager(root) {
  const host = createLinuxHost({})
  if (config.separateSteps) Object.defineProperty(host, 'fileSteps', { value: undefined })
  const pods = createMemoryPodSource()
  const manager = createVolumeManager({ host, plugins: createBuiltinPlugins(), podSource: pods, objects: createMemoryObjectReader(), nodeName: 'node-1', rootDir: root, statsPeriodMs: 0, housekeepingPeriodMs: 0, controllerAttachDetach: false })
  const stop = new AbortController()
  const running = manager.run(stop.signal)
  await manager.waitForIdle()
  return {
    host,
    pods,
    manager,
    async close() {
      stop.abort()
      await running
      host.close()
      rmSync(root, { recursive: true, force: true })
    },
  }
}

async function mountAll(m, all) {
  const t0 = performance.now()
  for (const pod of all) m.pods.setPod(pod)
  await Promise.all(all.map((pod) => m.manager.waitForAttachAndMount(pod, WAIT)))
  return seconds(t0)
}

async function unmountAll(m, all) {
  const t0 = performance.now()
  for (const pod of all) m.pods.deletePod(pod.metadata.uid)
  await Promise.all(all.map((pod) => m.manager.waitForUnmount(pod, WAIT)))
  await m.manager.waitForIdle()
  const elapsed = seconds(t0)
  const left = m.manager.snapshot().mounted.length
  if (left > 0) throw new Error(`${left} volumes still mounted after their pods were deleted`)
  return elapsed
}

// The same volumes through the whole manager: mounted from empty, then unmounted, each timed.
async function throughManager(makePod, count) {
  const m = await startManager(`${base}/root`)
  const all = Array.from({ length: count }, (_, n) => makePod(n))
  const mounted = await mountAll(m, all)
  const unmounted = await unmountAll(m, all)
  await m.close()
  return { mounted, unmounted }
}

// Pod start-up on a node of `diskPods` × 10 emptyDir: a pod of 10 emptyDir added, timed until
// waitForAttachAndMount resolves, then deleted and waited for (not timed), one at a time.
async function startUp() {
  const m = await startManager(`${base}/root`)
  const node = Array.from({ length: config.diskPods }, (_, n) => diskPod(n))
  const fill = await mountAll(m, node)
  await m.manager.waitForIdle()
  const times = []
  const cpu = []
  for (let i = 0; i < config.warmup + config.samples; i++) {
    const pod = diskPod(config.diskPods + i)
    const c0 = process.cpuUsage()
    const t0 = performance.now()
    m.pods.setPod(pod)
    await m.manager.waitForAttachAndMount(pod, WAIT)
    const ms = performance.now() - t0
    const used = process.cpuUsage(c0)
    if (i >= config.warmup) {
      times.push(ms)
      // The process's CPU (every thread: the manager's and the I/O worker's), which the other
      // processes on a shared machine disturb less than the wall time.
      cpu.push((used.user + used.system) / 1000)
    }
    m.pods.deletePod(pod.metadata.uid)
    await m.manager.waitForUnmount(pod, WAIT)
    await m.manager.waitForIdle()
  }
  const mounted = m.manager.snapshot().mounted.length
  await unmountAll(m, node)
  await m.close()
  if (mounted !== config.diskPods * config.perPod) throw new Error(`start-up: ${mounted} volumes mounted on the node, expected ${config.diskPods * config.perPod}`)
  const sorted = times.sort((a, b) => a - b)
  return { samples: sorted.length, fillSeconds: fill, medianMs: percentile(sorted, 50), p90Ms: percentile(sorted, 90), p99Ms: percentile(sorted, 99), maxMs: sorted.at(-1), cpuMedianMs: median(cpu) }
}

// The same start-up at the floor: the kubelet's steps for such a pod on such a node, as plain loops.
async function startUpFloor() {
  const floorDir = `${base}/floor`
  const t = await emptyDirPodStartUpSteps(floorDir, { pods: config.diskPods, perPod: config.perPod, samples: config.samples, warmup: config.warmup })
  rmSync(floorDir, { recursive: true, force: true })
  const figures = (sorted) => ({ medianMs: percentile(sorted, 50), p99Ms: percentile(sorted, 99) })
  return { libuv: figures(t.libuv), sync: figures(t.sync) }
}

// One round of each workload, manager then loop; `disk` and `mix` are the sizes in pods.
async function round(disk, mix) {
  const floorDir = `${base}/floor`
  const d = await emptyDirDiskSteps(floorDir, { pods: disk, perPod: config.perPod })
  rmSync(floorDir, { recursive: true, force: true })
  const dm = await throughManager(diskPod, disk)
  const x = await memoryHostPathSteps(floorDir, { pods: mix, perPod: config.perPod, hostDir })
  rmSync(floorDir, { recursive: true, force: true })
  const xm = await throughManager(mixPod, mix)
  return { disk: { floor: { mounted: d.converge, unmounted: d.teardown }, manager: dm }, mix: { floor: { mounted: x.mounted, unmounted: x.unmounted }, manager: xm } }
}

const load = () => os.loadavg().map((l) => l.toFixed(2)).join(', ')
const loadBefore = load()
// One uncounted round of each at a tenth of the size: V8 compiles the manager's code (its first
// volumes took 1.6-2x as long as the same volumes later) and the loops'.
if (config.startupOnly) {
  const startup = await startUp()
  const floor = await startUpFloor()
  scratch.remove()
  const f = (ms) => `${ms.toFixed(2)} ms`
  console.log(
    `start-up (${config.separateSteps ? 'separate calls' : 'fileSteps'}), load ${loadBefore} → ${load()}: median ${f(startup.medianMs)}, p90 ${f(startup.p90Ms)}, p99 ${f(startup.p99Ms)}, max ${f(startup.maxMs)}; CPU median ${f(startup.cpuMedianMs)} a pod`,
  )
  console.log(`the kubelet's steps: through libuv median ${f(floor.libuv.medianMs)}, p99 ${f(floor.libuv.p99Ms)}; on one thread median ${f(floor.sync.medianMs)}, p99 ${f(floor.sync.p99Ms)}`)
  process.exit(0)
}
const cold = await round(Math.ceil(config.diskPods / 10), Math.ceil(config.mixPods / 10))
const rounds = []
for (let r = 0; r < config.runs; r++) rounds.push(await round(config.diskPods, config.mixPods))
const startup = await startUp()
startup.floor = await startUpFloor()
const loadAfter = load()
scratch.remove()

const rows = []
for (const workload of ['disk', 'mix']) {
  for (const phase of ['mounted', 'unmounted']) {
    const manager = median(rounds.map((r) => r[workload].manager[phase]))
    const floor = median(rounds.map((r) => r[workload].floor[phase]))
    const ratios = rounds.map((r) => r[workload].manager[phase] / r[workload].floor[phase])
    rows.push({ workload, phase, manager, floor, ratio: manager / floor, ratios })
  }
}
const describe = {
  'disk/mounted': `converge ${(config.diskPods * config.perPod).toLocaleString('en')} emptyDir on disk (${config.diskPods.toLocaleString('en')} pods × ${config.perPod}) from empty`,
  'disk/unmounted': `tear down those ${(config.diskPods * config.perPod).toLocaleString('en')} emptyDir`,
  'mix/mounted': `mount ${((config.mixPods * config.perPod) / 2).toLocaleString('en')} emptyDir (Memory) + ${((config.mixPods * config.perPod) / 2).toLocaleString('en')} hostPath (${config.mixPods} pods × 5 + 5)`,
  'mix/unmounted': 'unmount those volumes (tear-down)',
}
const met = (ok) => (ok ? 'met' : 'not met')
const md = [
  '## Linux at node scale (real kernel, fresh ext4, against the kubelet\'s own steps)',
  '',
  `${os.cpus()[0]?.model} (${os.cpus().length} cores), Node ${process.version}, Linux ${os.release()}, ${new Date().toISOString()}; load average before ${loadBefore}, after ${loadAfter}`,
  '',
  `The floor is the kubelet's own steps for the same volumes as a plain loop (bench/kubelet-steps.js: node:fs and koffi, 64 volumes at a time, no manager, no journal). The manager's runs and the loop's alternate, ${config.runs} each after one uncounted round at a tenth of the size; medians, and the ratio of the medians (each run's own ratio in brackets).`,
  '',
  '| workload | kubevol (whole manager) | floor (kubelet steps, plain loop) | kubevol ÷ floor | target | |',
  '| --- | ---: | ---: | ---: | --- | --- |',
  ...rows.map((r) => `| ${describe[`${r.workload}/${r.phase}`]} | ${r.manager.toFixed(3)} s | ${r.floor.toFixed(3)} s | ${r.ratio.toFixed(2)}× (${r.ratios.map((x) => x.toFixed(2)).join(', ')}) | ≤ ${TARGET_RATIO}× | ${met(r.ratio <= TARGET_RATIO)} |`),
  '',
  `| pod start-up on the Linux host: a pod of ${config.perPod} emptyDir (disk) added → waitForAttachAndMount, on a node of ${config.diskPods.toLocaleString('en')} pods × ${config.perPod} | value | target | |`,
  '| --- | ---: | --- | --- |',
  `| median (${startup.samples} samples after ${config.warmup} warm-up) | ${startup.medianMs.toFixed(2)} ms | ≤ ${TARGET_MEDIAN_MS} ms | ${met(startup.medianMs <= TARGET_MEDIAN_MS)} |`,
  `| p99 (nearest rank) | ${startup.p99Ms.toFixed(2)} ms | ≤ ${TARGET_P99_MS} ms | ${met(startup.p99Ms <= TARGET_P99_MS)} |`,
  `| p90, max | ${startup.p90Ms.toFixed(2)} ms, ${startup.maxMs.toFixed(2)} ms | | |`,
  `| CPU of the process a pod (every thread), median | ${startup.cpuMedianMs.toFixed(2)} ms | | |`,
  `| node fill (${config.diskPods.toLocaleString('en')} pods added at once) | ${startup.fillSeconds.toFixed(2)} s | | |`,
  `| the kubelet's steps for the same pod as a plain loop (bench/kubelet-steps.js), through node:fs (the pod's volumes at once on libuv's pool): median / p99 | ${startup.floor.libuv.medianMs.toFixed(2)} ms / ${startup.floor.libuv.p99Ms.toFixed(2)} ms | | |`,
  `| the same steps made synchronously on one thread, no hand-off: median / p99 | ${startup.floor.sync.medianMs.toFixed(2)} ms / ${startup.floor.sync.p99Ms.toFixed(2)} ms | | |`,
  '',
]
console.log(md.join('\n'))
// KUBEVOL_BENCH_DRY=1 (trial runs at other sizes) prints the table and writes nothing.
if (!process.env.KUBEVOL_BENCH_DRY) await writeResult('linux-scale', { benchmark: 'linux-scale', config, loadBefore, loadAfter, cold, rounds, rows, startup }, md.join('\n'))
