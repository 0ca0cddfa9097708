// kubevol side by side with the real kubelet v1.32 VolumeManager (root only, and only where the
// envtest assets are: KUBEVOL_ENVTEST_ASSETS with `kubelet-volumemanager-bench`, see the envtest
// README). The kubelet's side is that binary: the kubelet's own pkg/kubelet/volumemanager with its
// real emptyDir and hostPath plugins and the mount-utils mounter. kubevol's side is the same two
// workloads through the whole manager on the Linux host, printed with the binary's field names:
//
// - latency: a node of 1,000 pods × 10 emptyDir (disk) filled from empty, an idle window, then pods
//   of 10 emptyDir added one at a time (added → waitForAttachAndMount) and removed (→ waitForUnmount);
// - kernel: 200 pods × (5 emptyDir Memory + 5 hostPath Directory) added at once and removed at once,
//   a first round not counted, then two counted rounds.
//
// Every run is a fresh process in a private mount namespace of its own (`unshare -m --propagation
// private`) on a fresh loop-backed ext4 (scratch-fs.js); the kubelet's and kubevol's runs alternate,
// the side that goes first swapping each pair. Reported: each side's median over the runs, the ratio
// of the medians, and the range of the pairs' own ratios.
//
//   node kubelet.js                              the pairs, the table, results/kubelet.{json,md}
//   node kubelet.js run <side> <workload>        one run (in its namespace): its JSON on stdout
//   node kubelet.js kubevol <workload> <dir>     kubevol's side of a workload on a prepared dir
//
// KUBEVOL_BENCH_KUBELET_PAIRS (default 3), KUBEVOL_BENCH_KUBELET_ONLY (latency or kernel) and the
// workload sizes below (KUBEVOL_BENCH_KUBELET_PODS, ...) change the run; KUBEVOL_BENCH_DRY=1 prints
// the table and writes nothing.
import { spawn, spawnSync } from 'node:child_process'
import { accessSync, constants, mkdirSync, readFileSync } from 'node:fs'
import os from 'node:os'
import { join } from 'node:path'
import v8 from 'node:v8'
import { fileURLToPath } from 'node:url'
import { imageLaunch } from './image-launch.js'
import { writeResult } from './results.js'
import { scratchFilesystem } from './scratch-fs.js'
import { compareSides, median, parseRunOutput, percentile } from './side-by-side.js'

const self = fileURLToPath(import.meta.url)
const env = (name, fallback) => Number(process.env[`KUBEVOL_BENCH_KUBELET_${name}`] ?? fallback)

// The binary's defaults (its README), which are the sizes the comparison is recorded at.
const CONFIG = {
  latency: { pods: env('PODS', 1000), volumes: env('VOLUMES', 10), samples: env('SAMPLES', 200), warmup: env('WARMUP', 20), idleSeconds: env('IDLE_SECONDS', 60) },
  kernel: { pods: env('KERNEL_PODS', 200), memory: 5, hostpath: 5, rounds: env('ROUNDS', 2), warmRounds: 1 },
}
const FIELDS = {
  latency: ['startupMs', 'unmountMs', 'fillMs', 'fillCpuSeconds', 'idle.cpuPercent', 'cpuSeconds.self', 'maxRssKiB'],
  kernel: ['rounds', 'maxRssKiB'],
}
const WAIT = { timeoutMs: 600_000 }

// ---- kubevol's side of each workload, in a process of its own ----

async function kubevolSide(workload, dir) {
  const { createLinuxHost } = await import('@kubevol/adapter-linux')
  const { createVolumeManager } = await import('@kubevol/core')
  const { createBuiltinPlugins } = await import('@kubevol/core/plugins')
  const { buildPod, createMemoryObjectReader, createMemoryPodSource } = await import('@kubevol/core/testing')
  const host = createLinuxHost({})
  const pods = createMemoryPodSource()
  // As linux-scale.js: no volume statistics and no housekeeping, which the kubelet runs outside its
  // VolumeManager (the stats provider, the pod workers), so the binary has neither.
  const manager = createVolumeManager({ host, plugins: createBuiltinPlugins(), podSource: pods, objects: createMemoryObjectReader(), nodeName: 'node-1', rootDir: join(dir, 'root'), statsPeriodMs: 0, housekeepingPeriodMs: 0, controllerAttachDetach: false })
  const stop = new AbortController()
  const running = manager.run(stop.signal)
  await manager.waitForIdle()
  // Where the peak goes: the process's peak before the first pod (node, the modules, the I/O worker,
  // the manager idle), and V8's main heap spaces at their largest while the workload runs.
  const fixedRssKiB = process.resourceUsage().maxRSS
  const heap = { youngMiB: 0, oldMiB: 0 }
  const sampleHeap = () => {
    for (const space of v8.getHeapSpaceStatistics()) {
      const mib = space.space_size / 2 ** 20
      if (space.space_name === 'new_space') heap.youngMiB = Math.max(heap.youngMiB, mib)
      else if (space.space_name === 'old_space') heap.oldMiB = Math.max(heap.oldMiB, mib)
    }
  }
  // Every 50 ms, and not in the idle window (whose CPU it would add to): the spaces change size only
  // at a collection, and keep it until the next.
  let sampler = setInterval(sampleHeap, 50)
  const cpu = () => {
    const u = process.cpuUsage()
    return (u.user + u.system) / 1e6
  }
  const ms = (t0) => performance.now() - t0
  const addAll = async (all) => {
    for (const pod of all) pods.setPod(pod)
    await Promise.all(all.map((pod) => manager.waitForAttachAndMount(pod, WAIT)))
  }
  const removeAll = async (all) => {
    for (const pod of all) pods.deletePod(pod.metadata.uid)
    await Promise.all(all.map((pod) => manager.waitForUnmount(pod, WAIT)))
  }
  let out
  if (workload === 'latency') {
    const c = CONFIG.latency
    const diskPod = (name) => buildPod({ uid: `uid-${name}`, name, volumes: Array.from({ length: c.volumes }, (_, v) => ({ name: `v${v}`, emptyDir: {} })) })
    const node = Array.from({ length: c.pods }, (_, p) => diskPod(`pod-${p}`))
    const c0 = cpu()
    const t0 = performance.now()
    await addAll(node)
    const fillMs = ms(t0)
    const fillCpuSeconds = cpu() - c0
    await manager.waitForIdle()
    // The idle window: the node left alone, its CPU measured.
    clearInterval(sampler)
    sampleHeap()
    const i0 = cpu()
    const w0 = performance.now()
    await new Promise((resolve) => setTimeout(resolve, c.idleSeconds * 1000))
    const wallSeconds = ms(w0) / 1000
    const idleCpu = cpu() - i0
    sampler = setInterval(sampleHeap, 50)
    const startupMs = []
    const unmountMs = []
    for (let i = 0; i < c.warmup + c.samples; i++) {
      const pod = diskPod(`sample-${i}`)
      const s0 = performance.now()
      pods.setPod(pod)
      await manager.waitForAttachAndMount(pod, WAIT)
      const up = ms(s0)
      const u0 = performance.now()
      pods.deletePod(pod.metadata.uid)
      await manager.waitForUnmount(pod, WAIT)
      const down = ms(u0)
      if (i >= c.warmup) {
        startupMs.push(up)
        unmountMs.push(down)
      }
      await manager.waitForIdle()
    }
    const mounted = manager.snapshot().mounted.length
    if (mounted !== c.pods * c.volumes) throw new Error(`latency: ${mounted} volumes mounted at the end, expected ${c.pods * c.volumes}`)
    out = { workload, config: c, startupMs, unmountMs, fillMs, fillCpuSeconds, idle: { cpuPercent: (idleCpu / wallSeconds) * 100, cpuSeconds: idleCpu, volumes: mounted, wallSeconds } }
  } else {
    const c = CONFIG.kernel
    const per = c.memory + c.hostpath
    const kernelPod = (round, p) =>
      buildPod({
        uid: `uid-r${round}-p${p}`,
        name: `r${round}-p${p}`,
        volumes: [
          ...Array.from({ length: c.memory }, (_, v) => ({ name: `m${v}`, emptyDir: { medium: 'Memory' } })),
          ...Array.from({ length: c.hostpath }, (_, v) => ({ name: `h${v}`, hostPath: { path: join(dir, 'host', `d${p * per + v}`), type: 'Directory' } })),
        ],
      })
    const rounds = []
    for (let round = 0; round < c.warmRounds + c.rounds; round++) {
      const all = Array.from({ length: c.pods }, (_, p) => kernelPod(round, p))
      const c0 = cpu()
      const t0 = performance.now()
      await addAll(all)
      const MountAPIms = ms(t0)
      const t1 = performance.now()
      await removeAll(all)
      const UnmountAPIms = ms(t1)
      await manager.waitForIdle()
      const left = manager.snapshot().mounted.length
      if (left > 0) throw new Error(`kernel: ${left} volumes still mounted after round ${round}`)
      rounds.push({ MountAPIms, UnmountAPIms, CPUSelf: cpu() - c0, CPUChildren: 0 })
    }
    out = { workload, config: c, cold: rounds.slice(0, c.warmRounds), rounds: rounds.slice(c.warmRounds) }
  }
  clearInterval(sampler)
  sampleHeap()
  stop.abort()
  await running
  host.close()
  const total = process.cpuUsage()
  // getrusage's ru_maxrss, KiB: the measure the kubelet's binary prints as maxRssKiB.
  return { ...out, side: 'kubevol', fixedRssKiB, heap, cpuSeconds: { self: (total.user + total.system) / 1e6, children: 0 }, maxRssKiB: process.resourceUsage().maxRSS }
}

// ---- one run, inside its own private mount namespace ----

function collect(child, who) {
  return new Promise((resolve, reject) => {
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    // The kubelet logs every operation (klog) to stderr: only its tail is kept, for an error.
    child.stderr.on('data', (d) => (stderr = (stderr + d).slice(-4000)))
    child.on('error', reject)
    child.on('close', (code) => (code === 0 ? resolve(stdout) : reject(new Error(`${who} exited ${code}: ${stderr.trim().split('\n').slice(-5).join('\n')}`))))
  })
}

async function run(side, workload) {
  if (process.env.KUBEVOL_BENCH_KUBELET_NAMESPACE !== 'private') throw new Error('a run must be started through `unshare -m --propagation private`')
  const scratch = scratchFilesystem(`kubevol-bench-kubelet-${side}-`, '4G')
  try {
    const dir = scratch.dir
    if (workload === 'kernel') {
      const c = CONFIG.kernel
      for (let i = 0; i < c.pods * (c.memory + c.hostpath); i++) mkdirSync(join(dir, 'host', `d${i}`), { recursive: true })
    }
    let child
    if (side === 'kubelet') child = spawn(kubeletBinary(), kubeletArgs(workload, dir), { stdio: ['ignore', 'pipe', 'pipe'] })
    else {
      const { flags, env: extra } = kubevolLaunch(side)
      child = spawn(process.execPath, [...flags, self, 'kubevol', workload, dir], { env: { ...process.env, ...extra }, stdio: ['ignore', 'pipe', 'pipe'] })
    }
    const stdout = await collect(child, side === 'kubelet' ? 'kubelet-volumemanager-bench' : `${side}'s side`)
    process.stdout.write(stdout)
  } finally {
    scratch.remove()
  }
}

/**
 * How kubevol's process is started: `kubevol` with Node's defaults (what an embedder runs), or
 * `kubevol-image` as deploy/Dockerfile starts the agent (its node flags and MALLOC_* environment).
 * KUBEVOL_BENCH_KUBELET_NODE_FLAGS and KUBEVOL_BENCH_KUBELET_NODE_ENV (`NAME=value ...`) replace the
 * defaults' (nothing) for trials of other flags.
 */
function kubevolLaunch(side) {
  if (side === 'kubevol-image') {
    const image = imageLaunch()
    return { flags: image.flags, env: image.env }
  }
  if (side !== 'kubevol') throw new Error(`no side ${JSON.stringify(side)} (kubelet, kubevol, kubevol-image)`)
  const words = (name) => process.env[name]?.split(' ').filter(Boolean) ?? []
  return { flags: words('KUBEVOL_BENCH_KUBELET_NODE_FLAGS'), env: Object.fromEntries(words('KUBEVOL_BENCH_KUBELET_NODE_ENV').map((w) => w.split('=', 2))) }
}

function kubeletArgs(workload, dir) {
  if (workload === 'latency') {
    const c = CONFIG.latency
    return ['latency', '-root', join(dir, 'root'), '-pods', c.pods, '-volumes', c.volumes, '-samples', c.samples, '-warmup', c.warmup, '-idle-seconds', c.idleSeconds].map(String)
  }
  const c = CONFIG.kernel
  return ['kernel', '-root', join(dir, 'root'), '-hostdir', join(dir, 'host'), '-pods', c.pods, '-memory', c.memory, '-hostpath', c.hostpath, '-rounds', c.rounds, '-warm-rounds', c.warmRounds].map(String)
}

function kubeletBinary() {
  return join(process.env.KUBEVOL_ENVTEST_ASSETS ?? '', 'kubelet-volumemanager-bench')
}

// ---- the parent: the pairs, the table ----

/** Why the comparison cannot run here, or undefined. */
function missing() {
  if (process.getuid?.() !== 0) return 'it needs root (real mounts in private mount namespaces)'
  if (!process.env.KUBEVOL_ENVTEST_ASSETS) return 'KUBEVOL_ENVTEST_ASSETS is not set (the envtest assets: `../shared/envtest/setup` prints the directory)'
  try {
    accessSync(kubeletBinary(), constants.X_OK)
  } catch {
    return `${kubeletBinary()} is not there or not executable (unpack kubelet-volumemanager-bench.tar.xz into KUBEVOL_ENVTEST_ASSETS)`
  }
  if (spawnSync('unshare', ['--version']).status !== 0) return 'unshare(1) (util-linux) is not on PATH'
  return undefined
}

/** The recorded results/kubelet.json, or undefined. */
function readRecorded() {
  try {
    return JSON.parse(readFileSync(new URL('./results/kubelet.json', import.meta.url), 'utf8'))
  } catch {
    return undefined
  }
}

function oneRun(side, workload) {
  const out = spawnSync('unshare', ['-m', '--propagation', 'private', process.execPath, self, 'run', side, workload], {
    env: { ...process.env, KUBEVOL_BENCH_KUBELET_NAMESPACE: 'private' },
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
    maxBuffer: 64 * 2 ** 20,
  })
  if (out.status !== 0) throw new Error(`the ${side} run of the ${workload} workload exited ${out.status}`)
  return parseRunOutput(out.stdout, { workload, fields: FIELDS[workload], who: `${side}, ${workload}` })
}

const n = (x) => x.toLocaleString('en')
const L = CONFIG.latency
const K = CONFIG.kernel
/** The rows of the table: what each is, its unit, and how a run's figure is read. */
const ROWS = [
  { workload: 'latency', id: 'startup-median', what: `pod start-up, median: a pod of ${L.volumes} emptyDir added → mounted, on a node of ${n(L.pods)} such pods`, unit: 'ms', pick: (r) => median(r.startupMs) },
  { workload: 'latency', id: 'startup-p99', what: 'pod start-up, p99', unit: 'ms', pick: (r) => percentile(r.startupMs, 99) },
  { workload: 'latency', id: 'unmount-median', what: 'pod removed → its volumes unmounted, median', unit: 'ms', pick: (r) => median(r.unmountMs) },
  { workload: 'latency', id: 'fill', what: `the node filled from empty: ${n(L.pods * L.volumes)} emptyDir, ${n(L.pods)} pods added at once`, unit: 's', pick: (r) => r.fillMs / 1000 },
  { workload: 'latency', id: 'fill-cpu', what: 'CPU for that fill', unit: 'CPU s', pick: (r) => r.fillCpuSeconds },
  { workload: 'latency', id: 'idle-cpu', what: `idle CPU with ${n(L.pods * L.volumes)} volumes mounted`, unit: '% of a core', pick: (r) => r.idle.cpuPercent },
  { workload: 'latency', id: 'latency-rss', what: 'peak RSS, the latency workload', unit: 'MiB', pick: (r) => r.maxRssKiB / 1024 },
  { workload: 'kernel', id: 'kernel-mount', what: `${n(K.pods * K.memory)} emptyDir (Memory, tmpfs) + ${n(K.pods * K.hostpath)} hostPath: ${n(K.pods)} pods added → all mounted`, unit: 'ms', pick: (r) => median(r.rounds.map((x) => x.MountAPIms)) },
  { workload: 'kernel', id: 'kernel-unmount', what: `those ${n(K.pods)} pods removed → all unmounted`, unit: 'ms', pick: (r) => median(r.rounds.map((x) => x.UnmountAPIms)) },
  { workload: 'kernel', id: 'kernel-cpu', what: 'CPU a round (the process and the mount(8)/umount(8) it runs)', unit: 'CPU s', pick: (r) => median(r.rounds.map((x) => x.CPUSelf + x.CPUChildren)) },
  { workload: 'kernel', id: 'kernel-rss', what: 'peak RSS, the kernel workload', unit: 'MiB', pick: (r) => r.maxRssKiB / 1024 },
]

/** Where kubevol's peak goes (its side only: the kubelet's binary prints its peak alone). */
const PARTS = [
  { id: 'peak', what: 'peak RSS', pick: (r) => r.maxRssKiB / 1024 },
  { id: 'fixed', what: 'the peak before the first pod: node, the modules, the I/O worker, the manager idle', pick: (r) => (r.fixedRssKiB ?? Number.NaN) / 1024 },
  { id: 'young', what: "V8's young generation at its largest (the main thread's two semispaces)", pick: (r) => r.heap?.youngMiB ?? Number.NaN },
  { id: 'old', what: "V8's old space at its largest (live data and the garbage it lets build up before it collects)", pick: (r) => r.heap?.oldMiB ?? Number.NaN },
]

/** The parts table: each kubevol side's median over the pairs of each workload run. */
function partsTable(pairs) {
  const columns = [
    ['latency', 'kubevol', "latency, Node's defaults"],
    ['kernel', 'kubevol', "kernel, Node's defaults"],
    ['kernel', 'kubevol-image', 'kernel, as the image'],
  ].filter(([w, side]) => pairs[w]?.every((p) => p[side]))
  if (columns.length === 0) return { rows: [], md: [] }
  const med = (xs) => (xs.some(Number.isNaN) ? Number.NaN : median(xs))
  const rows = PARTS.map((part) => ({ ...part, values: columns.map(([w, side]) => med(pairs[w].map((p) => part.pick(p[side])))) }))
  const kubelet = columns.map(([w]) => median(pairs[w].map((p) => p.kubelet.maxRssKiB / 1024)))
  const cell = (v) => (Number.isNaN(v) ? '–' : `${fmt(v)} MiB`)
  return {
    rows: rows.map(({ id, what, values }) => ({ id, what, values: Object.fromEntries(columns.map(([w, side], i) => [`${w} ${side}`, values[i]])) })),
    md: [
      "Where kubevol's peak goes (medians over the pairs; the kubelet's peak beside it):",
      '',
      `| | ${columns.map((c) => c[2]).join(' | ')} |`,
      `| --- |${columns.map(() => ' ---: |').join('')}`,
      `| the kubelet's peak RSS, the same workload | ${kubelet.map(cell).join(' | ')} |`,
      ...rows.map((r) => `| kubevol: ${r.what} | ${r.values.map(cell).join(' | ')} |`),
      '',
    ],
  }
}

const fmt = (n) => (n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n >= 1 ? n.toFixed(2) : n.toFixed(3))
const times = (n) => `${n >= 10 ? n.toFixed(0) : n.toFixed(2)}×`

async function main() {
  const why = missing()
  if (why) {
    console.log(`kubelet side-by-side benchmark skipped: ${why}`)
    return
  }
  const pairsWanted = env('PAIRS', 3)
  const only = process.env.KUBEVOL_BENCH_KUBELET_ONLY
  const workloads = ['latency', 'kernel'].filter((w) => !only || only === w)
  const load = () => os.loadavg().map((l) => l.toFixed(2)).join(', ')
  // The kernel workload also as the image starts the agent (its flags and malloc environment), the
  // memory figure a deployed node has; KUBEVOL_BENCH_KUBELET_IMAGE=0 leaves it out.
  const image = process.env.KUBEVOL_BENCH_KUBELET_IMAGE !== '0'
  const sides = { latency: ['kubelet', 'kubevol'], kernel: image ? ['kubelet', 'kubevol', 'kubevol-image'] : ['kubelet', 'kubevol'] }
  const pairs = {}
  const runs = {}
  // One workload run again (KUBEVOL_BENCH_KUBELET_ONLY) keeps the other's recorded pairs, when they
  // were taken at the same sizes: each workload's date and load are recorded with it.
  const recorded = only ? readRecorded() : undefined
  for (const w of ['latency', 'kernel']) {
    if (workloads.includes(w) || !recorded?.pairs?.[w]) continue
    if (JSON.stringify(recorded.config[w]) !== JSON.stringify(CONFIG[w])) continue
    pairs[w] = recorded.pairs[w]
    runs[w] = recorded.runs?.[w] ?? { date: recorded.machine.date, loadBefore: recorded.loadBefore, loadAfter: recorded.loadAfter, pairs: recorded.pairs[w].length }
  }
  for (const w of workloads) {
    pairs[w] = []
    runs[w] = { date: new Date().toISOString(), loadBefore: load(), pairs: pairsWanted }
  }
  for (let i = 0; i < pairsWanted; i++) {
    for (const workload of workloads) {
      // The side that runs first changes each pair (the sides rotate): the machine's speed drifts within minutes.
      const all = sides[workload]
      const order = [...all.slice(i % all.length), ...all.slice(0, i % all.length)]
      const pair = { first: order[0], loadBefore: load() }
      for (const side of order) {
        const t0 = performance.now()
        pair[side] = oneRun(side, workload)
        console.error(`kubelet bench: pair ${i + 1} of ${pairsWanted}, ${workload}, ${side}: ${((performance.now() - t0) / 1000).toFixed(0)} s; load ${load()}`)
      }
      pair.loadAfter = load()
      pairs[workload].push(pair)
    }
  }
  for (const w of workloads) runs[w].loadAfter = load()
  const compare = (row, a, b) => {
    const c = compareSides(
      pairs[row.workload].map((p) => ({ a: p[a], b: p[b] })),
      row.pick,
    )
    return { workload: row.workload, id: row.id, what: row.what, unit: row.unit, [a]: c.a, [b]: c.b, ratio: c.ratio, ratios: c.ratios, range: c.range }
  }
  const rows = ROWS.filter((row) => pairs[row.workload]).map((row) => compare(row, 'kubelet', 'kubevol'))
  // The image's flags against the kubelet, and against Node's defaults (the JIT): what they cost in time.
  const withImage = pairs.kernel?.every((p) => p['kubevol-image'])
  const imageRows = !withImage ? [] : ROWS.filter((row) => row.workload === 'kernel').flatMap((row) => [compare(row, 'kubelet', 'kubevol-image'), compare(row, 'kubevol-image', 'kubevol')])
  const parts = partsTable(pairs)
  const cpu = os.cpus()
  const latest = Object.values(runs).map((r) => r.date).sort().at(-1)
  const machine = { cpu: cpu[0]?.model?.trim(), cores: cpu.length, node: process.version, platform: process.platform, arch: process.arch, linux: os.release(), date: latest }
  const when = Object.entries(runs).map(([w, r]) => `${w} workload ${r.date} (${r.pairs} pairs), load average before ${r.loadBefore}, after ${r.loadAfter}`)
  const md = [
    '## kubevol and the kubelet v1.32 VolumeManager, side by side',
    '',
    `${machine.cpu} (${machine.cores} cores), Node ${machine.node}, Linux ${machine.linux}; ${when.join('; ')}`,
    '',
    `kubelet v1.32 is \`kubelet-volumemanager-bench\` from the envtest assets: the kubelet's own VolumeManager (pkg/kubelet/volumemanager, v1.32.13) with its real emptyDir and hostPath plugins and the mount-utils mounter (mount(8) and umount(8)). kubevol is the whole manager on the Linux host with Node's defaults (no flags). Each run is a fresh process in a private mount namespace on a fresh ext4, the sides alternating and the first changing each pair; each side's median over its runs, and kubelet ÷ kubevol as the ratio of the medians with the range of the pairs' own ratios (above 1: kubevol takes less).`,
    '',
    '| figure | kubelet v1.32 | kubevol | kubelet ÷ kubevol (range over the pairs) |',
    '| --- | ---: | ---: | ---: |',
    ...rows.map((r) => `| ${r.what} | ${fmt(r.kubelet.median)} ${r.unit} | ${fmt(r.kubevol.median)} ${r.unit} | ${times(r.ratio)} (${times(r.range[0])}–${times(r.range[1])}) |`),
    '',
    ...(imageRows.length === 0
      ? []
      : [
          `The kernel workload as deploy/Dockerfile starts the agent (\`${[...Object.entries(imageLaunch().env).map(([k, v]) => `${k}=${v}`), 'node', ...imageLaunch().flags].join(' ')}\`), a third run in each pair:`,
          '',
          '| figure | kubelet v1.32 | kubevol, as the image | kubelet ÷ image (range) | kubevol, Node\'s defaults | image ÷ defaults (range) |',
          '| --- | ---: | ---: | ---: | ---: | ---: |',
          ...ROWS.filter((row) => row.workload === 'kernel').map((row) => {
            const k = imageRows.find((r) => r.id === row.id && r.kubelet)
            const d = imageRows.find((r) => r.id === row.id && r.kubevol)
            const range = (r) => `${times(r.ratio)} (${times(r.range[0])}–${times(r.range[1])})`
            return `| ${row.what} | ${fmt(k.kubelet.median)} ${row.unit} | ${fmt(k['kubevol-image'].median)} ${row.unit} | ${range(k)} | ${fmt(d.kubevol.median)} ${row.unit} | ${range(d)} |`
          }),
          '',
        ]),
    ...parts.md,
    `Sizes: ${Object.keys(pairs).map((w) => `${w} ${JSON.stringify(CONFIG[w])}`).join('; ')}. The kubelet waits by polling (its reconciler every 100 ms, \`WaitForAttachAndMount\` every 300 ms), so its start-up and unmount times are 300 ms or more whatever the work (more when the machine is loaded); kubevol's \`pollingCompat\` reproduces that timing with kubevol's own code (run.js), and is not this comparison. Its kernel round times include the mount(8) and umount(8) processes the mounter starts; kubevol makes the system calls itself.`,
    '',
  ]
  console.log(md.join('\n'))
  if (!process.env.KUBEVOL_BENCH_DRY) await writeResult('kubelet', { benchmark: 'kubelet', config: { ...CONFIG, image: withImage ? imageLaunch() : undefined }, runs, machine, rows, imageRows, parts: parts.rows, pairs }, md.join('\n'))
}

const [mode, a, b] = process.argv.slice(2)
if (mode === 'kubevol') process.stdout.write(`${JSON.stringify(await kubevolSide(a, b))}\n`)
else if (mode === 'run') await run(a, b)
else if (process.argv[1] === self) await main()
