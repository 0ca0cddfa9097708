/**
 * `kubevol simulate`: the volume manager on the in-memory host at scale, with seeded fault injection.
 * A fault is decided from the seed, the call (method and path) and how many times that call has been
 * made, never from timing, so one seed injects the same faults, and gives the same operation counts,
 * on every run.
 */
import { type MemoryHost, createMemoryHost } from '@kubevol/adapter-mock'
import { formatDuration } from '@kubevol/agent'
import { elapsed } from '../age.js'
import { HostError, type Pod, type Volume, createVolumeManager } from '@kubevol/core'
import { createBuiltinPlugins } from '@kubevol/core/plugins'
import { createMemoryObjectReader, createMemoryPodSource } from '@kubevol/core/testing'
import { CommandFailed, EXIT, UsageError } from '../errors.js'
import { type Io, type OutputFormat, renderData, renderTable, tableOptions } from '../output.js'
import type { ParsedCommand } from '../parse.js'

/** What the simulation is asked to do. */
export interface SimulationOptions {
  readonly pods: number
  readonly volumesPerPod: number
  /** 0 to 1. */
  readonly faultRate: number
  readonly seed: number
  readonly timeoutMs: number
  /** Called with the number of pods mounted so far. */
  readonly onProgress?: (mounted: number, total: number) => void
}

/** What the simulation found. Everything but the times and memory is the same for the same options. */
export interface SimulationReport {
  readonly pods: number
  readonly volumes: number
  readonly converged: boolean
  readonly podsMounted: number
  readonly convergeMs: number
  readonly faultsInjected: number
  /** Operation name → outcome (`ok`, `failed`) → count, sorted. */
  readonly operations: Readonly<Record<string, Readonly<Record<string, number>>>>
  /** Time from a pod being desired to all its volumes mounted. */
  readonly latencyMs: { readonly p50: number; readonly p99: number; readonly max: number }
  readonly peakRssBytes: number
}

const ROOT = '/var/lib/kubevol'
const MUTATING = new Set(['mkdir', 'mount', 'writeFile', 'rename', 'symlink'])
/** A call fails at most this many times in a row, so every run converges. */
const MAX_FAULTS_PER_CALL = 3

/** A 32-bit hash of the seed and a string (FNV-1a, then mixed): uniform enough for fault decisions. */
function chance(seed: number, key: string): number {
  let h = (2166136261 ^ seed) >>> 0
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 16777619) >>> 0
  h = (h ^ (h >>> 15)) >>> 0
  h = Math.imul(h, 0x2c1b3c6d) >>> 0
  h = (h ^ (h >>> 12)) >>> 0
  return h / 0x1_0000_0000
}

function volumeOf(kind: number, name: string): Volume {
  switch (kind % 4) {
    case 0:
      return { name, emptyDir: {} }
    case 1:
      return { name, emptyDir: { medium: 'Memory' } }
    case 2:
      return { name, configMap: { name: 'sim-config' } }
    default:
      return { name, secret: { secretName: 'sim-secret' } }
  }
}

function podOf(i: number, volumes: number): Pod {
  const vols = Array.from({ length: volumes }, (_, j) => volumeOf(i + j, `v${j}`))
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: `sim-${i}`, namespace: 'default', uid: `sim-uid-${i}` },
    spec: { nodeName: 'sim-node', volumes: vols, containers: [{ name: 'main', image: 'none', volumeMounts: vols.map((v) => ({ name: v.name, mountPath: `/mnt/${v.name}` })) }] },
  } as Pod
}

const percentile = (sorted: readonly number[], p: number): number => (sorted.length === 0 ? 0 : (sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? 0))

/**
 * EIO for a seeded share (`rate`) of the mutating calls under the pods' directory, each call at
 * most {@link MAX_FAULTS_PER_CALL} times; counts what it injected.
 */
function injectFaults(host: MemoryHost, seed: number, rate: number): { readonly injected: number } {
  const counter = { injected: 0 }
  const attempts = new Map<string, number>()
  host.faults.intercept((call, next) => {
    if (!MUTATING.has(call.method) || !call.path?.startsWith(`${ROOT}/pods/`)) return next()
    // The atomic writer's directories are named by time: leave the name out of the decision.
    const key = `${call.method} ${call.path.replace(/\/\.\.[^/]+/g, '/..tmp')}`
    const n = (attempts.get(key) ?? 0) + 1
    attempts.set(key, n)
    if (n <= MAX_FAULTS_PER_CALL && chance(seed, `${key}#${n}`) < rate) {
      counter.injected++
      return Promise.reject(new HostError('EIO', call.method, call.path, 'injected fault'))
    }
    return next()
  })
  return counter
}

/** Runs a simulation. */
export async function simulate(options: SimulationOptions): Promise<SimulationReport> {
  const host = createMemoryHost()
  const faults = options.faultRate > 0 ? injectFaults(host, options.seed, options.faultRate) : { injected: 0 }
  const objects = createMemoryObjectReader()
  objects.put('ConfigMap', { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'sim-config', namespace: 'default' }, data: { a: '1', b: '2' } } as never)
  objects.put('Secret', { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'sim-secret', namespace: 'default' }, data: { p: 'cA==' } } as never)
  const pods = Array.from({ length: options.pods }, (_, i) => podOf(i, options.volumesPerPod))
  const source = createMemoryPodSource(pods)
  const manager = createVolumeManager({
    host,
    plugins: createBuiltinPlugins(),
    podSource: source,
    objects,
    nodeName: 'sim-node',
    rootDir: ROOT,
    controllerAttachDetach: false,
    housekeepingPeriodMs: 0,
    remountPeriodMs: 0,
    statsPeriodMs: 0,
    backoff: { initialMs: 5, maxMs: 100 },
    // Backoff expiry is noticed by the periodic resync (10 s by default): keep it near the backoff.
    resyncPeriodMs: 100,
  })
  const operations: Record<string, Record<string, number>> = {}
  const unsubscribe = manager.subscribe((event) => {
    if (event.type !== 'operation' || event.operation.endedAt === undefined) return
    const byOutcome = (operations[event.operation.name] ??= {})
    const outcome = event.operation.error === undefined ? 'ok' : 'failed'
    byOutcome[outcome] = (byOutcome[outcome] ?? 0) + 1
  })
  let peakRss = process.memoryUsage().rss
  const sampler = setInterval(() => {
    peakRss = Math.max(peakRss, process.memoryUsage().rss)
  }, 50)
  const abort = new AbortController()
  const started = performance.now()
  const run = manager.run(abort.signal)
  const latencies: number[] = []
  let mounted = 0
  options.onProgress?.(0, pods.length)
  const results = await Promise.allSettled(
    pods.map((pod) =>
      manager.waitForAttachAndMount(pod, { timeoutMs: options.timeoutMs }).then(() => {
        latencies.push(performance.now() - started)
        mounted++
        options.onProgress?.(mounted, pods.length)
      }),
    ),
  )
  const convergeMs = performance.now() - started
  await manager.waitForIdle()
  abort.abort()
  await run
  clearInterval(sampler)
  unsubscribe()
  peakRss = Math.max(peakRss, process.memoryUsage().rss)
  latencies.sort((a, b) => a - b)
  const sortedOps = Object.fromEntries(Object.keys(operations).sort().map((k) => [k, operations[k] as Record<string, number>]))
  return {
    pods: pods.length,
    volumes: pods.length * options.volumesPerPod,
    converged: results.every((r) => r.status === 'fulfilled'),
    podsMounted: mounted,
    convergeMs: Math.round(convergeMs),
    faultsInjected: faults.injected,
    operations: sortedOps,
    latencyMs: { p50: Math.round(percentile(latencies, 50)), p99: Math.round(percentile(latencies, 99)), max: Math.round(latencies.at(-1) ?? 0) },
    peakRssBytes: peakRss,
  }
}

function progressBar(io: Io): (mounted: number, total: number) => void {
  let last = -1
  return (mounted, total) => {
    const width = 30
    const filled = total === 0 ? width : Math.round((mounted / total) * width)
    if (filled === last && mounted !== total) return
    last = filled
    io.stderr.write(`\r[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${mounted}/${total} pods mounted${mounted === total ? '\n' : ''}`)
  }
}

/** `kubevol simulate`. */
export async function simulateCommand(p: ParsedCommand, io: Io): Promise<number> {
  const pods = Number(p.flags.pods)
  const volumesPerPod = Number(p.flags['volumes-per-pod'])
  const faultRate = Number(p.flags['fault-rate'])
  if (pods < 1 || pods > 100_000) throw new UsageError('--pods: must be from 1 to 100000')
  if (volumesPerPod < 1 || volumesPerPod > 100) throw new UsageError('--volumes-per-pod: must be from 1 to 100')
  if (faultRate < 0 || faultRate > 1) throw new UsageError('--fault-rate: must be from 0 to 1')
  const showProgress = p.given.has('progress') ? p.flags.progress === true : io.isTTY
  const report = await simulate({
    pods,
    volumesPerPod,
    faultRate,
    seed: Number(p.flags.seed),
    timeoutMs: Number(p.flags.timeout),
    ...(showProgress ? { onProgress: progressBar(io) } : {}),
  })
  const format = p.flags.output as OutputFormat
  if (format === 'json' || format === 'yaml') io.stdout.write(renderData(format, report))
  else {
    // --no-headers: the rows alone, no summary lines.
    if (p.flags['no-headers'] !== true) io.stdout.write(
      `${report.pods} pods, ${report.volumes} volumes: ${report.converged ? 'converged' : `NOT converged (${report.podsMounted} pods mounted)`} in ${elapsed(report.convergeMs)}\n` +
        `desired to mounted: p50 ${report.latencyMs.p50} ms, p99 ${report.latencyMs.p99} ms, max ${report.latencyMs.max} ms\n` +
        `faults injected: ${report.faultsInjected}; peak memory (RSS): ${(report.peakRssBytes / 1048576).toFixed(0)} MiB\n\n`,
    )
    io.stdout.write(renderTable(['operation', 'ok', 'failed'], Object.entries(report.operations).map(([name, o]) => [name, o.ok ?? 0, o.failed ?? 0]), tableOptions(p)))
  }
  if (!report.converged) throw new CommandFailed(`not converged within ${formatDuration(Number(p.flags.timeout))}`)
  return EXIT.ok
}
