// Pod start-up latency: from a pod being added to waitForAttachAndMount resolving, for a pod with
// 10 volumes on a node that already runs 1,000 pods with 10 volumes each, event-driven vs the
// kubelet's polling timing (`pollingCompat`). In-memory host, no injected latency, real clock.
// See README.md for what each figure means. Sizes can be changed through KUBEVOL_BENCH_* variables.
import { writeResult } from './results.js'
import os from 'node:os'
import { createMemoryHost } from '@kubevol/adapter-mock'
import { createVolumeManager } from '@kubevol/core'
import { buildPod, createFakePlugin, createMemoryObjectReader, createMemoryPodSource, seededRandom } from '@kubevol/core/testing'

const env = (name, fallback) => Number(process.env[`KUBEVOL_BENCH_${name}`] ?? fallback)
const config = {
  nodePods: env('NODE_PODS', 1000),
  volumesPerPod: env('VOLUMES', 10),
  samples: { event: env('EVENT_SAMPLES', 200), polling: env('POLLING_SAMPLES', 30) },
  // First samples warm the JIT; they are measured but not counted.
  warmup: { event: env('EVENT_WARMUP', 20), polling: env('POLLING_WARMUP', 2) },
}
// The performance issue's targets (the first issue asked for a 2 ms median and 50x).
const TARGET_MEDIAN_MS = 1
const TARGET_P99_MS = 5
const TARGET_RATIO = 100

// Two fake plugins: per-pod scratch volumes (no device) and attachable disks (attach, mount the
// device once, bind into the pod). Each answers for the volumes whose `fake.plugin` names it.
function plugins() {
  return [
    createFakePlugin({ name: 'bench.kubevol.io/scratch' }),
    createFakePlugin({ name: 'bench.kubevol.io/disk', attachable: true }),
  ]
}

// `per-pod`: every volume is a scratch volume. `mixed`: half are disks of their own (attach + device mount).
const variants = {
  'per-pod': () => 'scratch',
  mixed: (i) => (i % 2 === 0 ? 'scratch' : 'disk'),
}

let podSeq = 0
function benchPod(variant) {
  const n = ++podSeq
  const volumes = Array.from({ length: config.volumesPerPod }, (_, i) => {
    const type = variants[variant](i)
    return { name: `v${i}`, fake: { name: `p${n}-v${i}`, plugin: `bench.kubevol.io/${type}` } }
  })
  return buildPod({ name: `bench-${n}`, uid: `uid-bench-${n}`, volumes })
}

async function scenario(variant, mode) {
  const polling = mode === 'polling'
  const host = createMemoryHost()
  const pods = createMemoryPodSource()
  const manager = createVolumeManager({
    host,
    plugins: plugins(),
    podSource: pods,
    objects: createMemoryObjectReader(),
    nodeName: 'node-1',
    controllerAttachDetach: false,
    pollingCompat: polling,
  })
  const stop = new AbortController()
  const running = manager.run(stop.signal)
  const wait = { timeoutMs: 600_000 }

  // The node: every pod's volumes mounted before the first sample.
  const fillStart = performance.now()
  const existing = Array.from({ length: config.nodePods }, () => benchPod(variant))
  for (const pod of existing) pods.setPod(pod)
  await Promise.all(existing.map((pod) => manager.waitForAttachAndMount(pod, wait)))
  await manager.waitForIdle()
  const fillMs = performance.now() - fillStart
  const mountedBefore = manager.snapshot().mounted.length

  const times = []
  const total = config.samples[mode] + config.warmup[mode]
  const random = seededRandom(1)
  for (let i = 0; i < total; i++) {
    // Pods arrive at any moment of the kubelet's 100 ms / 300 ms cycles, not in step with them: start
    // each polling sample at a random phase (seeded, so runs compare). Event-driven has no cycle.
    if (polling) await new Promise((resolve) => setTimeout(resolve, random() * 300))
    const pod = benchPod(variant)
    const t0 = performance.now()
    pods.setPod(pod)
    await manager.waitForAttachAndMount(pod, wait)
    const ms = performance.now() - t0
    if (i >= config.warmup[mode]) times.push(ms)
    // Back to 1,000 pods, quiet, before the next sample.
    const names = [...manager.getMountedVolumesForPod(pod.metadata.uid).values()].map((v) => v.volumeName)
    pods.deletePod(pod.metadata.uid)
    await manager.waitForUnmount(pod, wait)
    await settle(manager, names)
  }

  const mountedAfter = manager.snapshot().mounted.length
  stop.abort()
  await running
  host.assertNoViolations()
  if (mountedAfter !== mountedBefore || mountedBefore !== config.nodePods * config.volumesPerPod) {
    throw new Error(`${variant}/${mode}: expected ${config.nodePods * config.volumesPerPod} mounted volumes, had ${mountedBefore} then ${mountedAfter}`)
  }
  return { variant, mode, fillMs: round(fillMs), ...stats(times) }
}

// Waits until the sample pod is wholly gone: its devices unmounted and detached too. waitForIdle
// alone is not enough: it resolves between the pod unmount and the device unmount that follows it.
async function settle(manager, volumeNames) {
  for (;;) {
    await manager.waitForIdle()
    await new Promise((resolve) => setImmediate(resolve))
    if (volumeNames.every((name) => !manager.volumeIsAttached(name))) return
  }
}

function stats(times) {
  const sorted = [...times].sort((a, b) => a - b)
  // Nearest rank: with 30 samples p99 is the slowest one.
  const pct = (p) => sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)]
  const mean = sorted.reduce((a, b) => a + b, 0) / sorted.length
  return {
    samples: sorted.length,
    medianMs: round(pct(50)),
    p90Ms: round(pct(90)),
    p99Ms: round(pct(99)),
    minMs: round(sorted[0]),
    maxMs: round(sorted.at(-1)),
    meanMs: round(mean),
  }
}

const round = (ms) => Math.round(ms * 1000) / 1000

function summary(results, comparisons, machine) {
  const lines = [
    '# Pod start-up benchmark',
    '',
    `Time from a pod with ${config.volumesPerPod} volumes being added to \`waitForAttachAndMount\` resolving, on a node that`,
    `already has ${config.nodePods} pods with ${config.volumesPerPod} volumes each (in-memory host, no injected latency, real clock).`,
    'See [README.md](../README.md) for the method.',
    '',
    `${machine.cpu} (${machine.cores} cores), Node ${machine.node}, ${machine.platform}/${machine.arch}, ${machine.date}`,
    '',
    '| volumes | mode | samples | median | p90 | p99 | max | node fill |',
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...results.map(
      (r) =>
        `| ${r.variant} | ${r.mode} | ${r.samples} | ${ms(r.medianMs)} | ${ms(r.p90Ms)} | ${ms(r.p99Ms)} | ${ms(r.maxMs)} | ${(r.fillMs / 1000).toFixed(1)} s |`,
    ),
    '',
    `| volumes | polling median / event median | event median < ${TARGET_MEDIAN_MS} ms | event p99 < ${TARGET_P99_MS} ms | ≥ ${TARGET_RATIO}x faster |`,
    '| --- | ---: | --- | --- | --- |',
    ...comparisons.map(
      (c) =>
        `| ${c.variant} | ${c.ratio.toFixed(0)}x | ${c.medianTargetMet ? 'met' : 'NOT met'} | ${c.p99TargetMet ? 'met' : 'NOT met'} | ${c.ratioTargetMet ? 'met' : 'NOT met'} |`,
    ),
    '',
    `Targets (from the issue): event-driven median under ${TARGET_MEDIAN_MS} ms and p99 under ${TARGET_P99_MS} ms, and at least ${TARGET_RATIO}x faster than polling.`,
    `Percentiles are nearest-rank: with ${config.samples.polling} polling samples, p99 is the slowest sample.`,
    'Polling results land on the 300 ms wait poll: a mount needs a populator tick and two reconciler passes (verify, then',
    'mount), each 100 ms after the last ended, so a pod resolves at the first poll (~300 ms) or the second (~600 ms),',
    'depending on when it arrives in the cycle; each polling sample starts at a random (seeded) phase.',
    '',
  ]
  return lines.join('\n')
}

const ms = (value) => `${value < 10 ? value.toFixed(2) : value.toFixed(1)} ms`

async function main() {
  const machine = {
    cpu: os.cpus()[0]?.model?.trim() ?? 'unknown',
    cores: os.cpus().length,
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    node: process.version,
    platform: process.platform,
    arch: process.arch,
    date: new Date().toISOString(),
  }
  const results = []
  // KUBEVOL_BENCH_ONLY=mixed/event runs one scenario (for profiling); nothing is written then.
  const only = process.env.KUBEVOL_BENCH_ONLY
  for (const variant of Object.keys(variants)) {
    for (const mode of ['event', 'polling']) {
      if (only && only !== `${variant}/${mode}`) continue
      const started = performance.now()
      const result = await scenario(variant, mode)
      results.push({ ...result, wallSeconds: round((performance.now() - started) / 1000) })
      console.log(`${variant} / ${mode}: median ${ms(result.medianMs)}, p99 ${ms(result.p99Ms)} (${result.samples} samples)`)
    }
  }
  if (only) return
  const comparisons = Object.keys(variants).map((variant) => {
    const event = results.find((r) => r.variant === variant && r.mode === 'event')
    const polling = results.find((r) => r.variant === variant && r.mode === 'polling')
    const ratio = polling.medianMs / event.medianMs
    return {
      variant,
      ratio: round(ratio),
      medianTargetMet: event.medianMs < TARGET_MEDIAN_MS,
      p99TargetMet: event.p99Ms < TARGET_P99_MS,
      ratioTargetMet: ratio >= TARGET_RATIO,
    }
  })
  const report = { benchmark: 'pod-startup', config, machine, targets: { eventMedianMs: TARGET_MEDIAN_MS, eventP99Ms: TARGET_P99_MS, ratio: TARGET_RATIO }, results, comparisons }
  const text = summary(results, comparisons, machine).replace(/^# /, '## ')
  await writeResult('pod-startup', report, text)
  console.log(`\n${text}`)
}

main().catch((err) => {
  console.error(err?.stack ?? err)
  process.exit(1)
})
