// Peak RSS (issue 23, item 1): each workload in a fresh Node process, so the peak the kernel keeps
// for the process (VmHWM in /proc/<pid>/status) is that workload's alone. The steps of the
// breakdown (a bare process, the modules, the I/O worker) are workloads of their own, and every
// workload reports V8's heap and the buffers at its peak as well. Root only (real mounts, in a
// private mount namespace, on a fresh ext4 of its own). See README.md ("Memory").
//
//   node memory.js                 every workload, the table, results/memory.{json,md}
//   node memory.js <workload>      one workload, its figures as JSON on stdout
//
// Each workload runs twice, back to back: with node's defaults, and as the image starts the agent
// (deploy/Dockerfile: the node flags of its ENTRYPOINT, its MALLOC_* environment).
// KUBEVOL_BENCH_MEMORY_NODE_FLAGS replaces those flags (e.g. '--max-semi-space-size=4');
// KUBEVOL_BENCH_MEMORY_ONLY (a comma list of workloads) runs only those and writes nothing;
// KUBEVOL_BENCH_MEMORY_AGENT runs another build of the agent.
import { spawn, spawnSync } from 'node:child_process'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import { fileURLToPath } from 'node:url'
import v8 from 'node:v8'
import { imageLaunch } from './image-launch.js'
import { writeResult } from './results.js'
import { scratchFilesystem } from './scratch-fs.js'

const self = fileURLToPath(import.meta.url)
const preload = fileURLToPath(new URL('../packages/adapter-linux/test/mount-namespace.cjs', import.meta.url))
const MiB = 2 ** 20

/** The workloads; `target` (MiB, at most, or under it with `under`) from issue 23, `kubelet` the kubelet's peak on the same work (from the issue). */
const WORKLOADS = [
  { name: 'bare', what: 'node running this script (its own imports only)' },
  { name: 'modules', what: '+ @kubevol/core, its plugins and @kubevol/adapter-linux imported' },
  { name: 'io-worker', what: '+ a Linux host that has made calls: the I/O worker started, koffi loaded in it and in the main thread' },
  { name: 'emptydir-10k', what: '10,000 emptyDir on disk (1,000 pods × 10) converged through the manager on the Linux host', target: 180, kubelet: 181 },
  { name: 'kernel-2k', what: '1,000 tmpfs (emptyDir Memory) + 1,000 hostPath (200 pods × 5 + 5) mounted and unmounted through the manager on the Linux host', target: 100, kubelet: 98 },
  { name: 'agent-static-0', what: 'the agent process (`dist/bundle/main.js --mode=static --host=linux`, as the image) on an empty manifest directory, running' },
  { name: 'agent-static-100', what: 'the agent process (`dist/bundle/main.js --mode=static --host=linux`, as the image) on a manifest directory of 100 pods (3 emptyDir, 1 Memory, a configMap and a secret each: 600 volumes), once every volume is mounted', target: 80, under: true },
]

// ---- in the child: the figures of this process ----

function status() {
  const text = readFileSync('/proc/self/status', 'utf8')
  const kib = (key) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? Number.NaN)
  return { hwmMiB: kib('VmHWM') / 1024, rssMiB: kib('VmRSS') / 1024, threads: Number(/^Threads:\s+(\d+)/m.exec(text)?.[1]) }
}

// The process's memory as V8 and node see it, sampled every 20 ms: the sample at the highest RSS is
// the breakdown at the peak (heap spaces, external and array buffers).
function sampler() {
  let peak = { rss: 0 }
  const take = () => {
    const usage = process.memoryUsage()
    if (usage.rss < peak.rss) return
    const spaces = Object.fromEntries(v8.getHeapSpaceStatistics().map((s) => [s.space_name, s.space_size / MiB]))
    peak = { ...usage, spaces, malloced: v8.getHeapStatistics().malloced_memory }
  }
  const timer = setInterval(take, 20)
  return {
    take,
    stop() {
      clearInterval(timer)
      take()
      const m = (n) => Number((n / MiB).toFixed(1))
      return {
        atPeak: { rssMiB: m(peak.rss), heapTotalMiB: m(peak.heapTotal), heapUsedMiB: m(peak.heapUsed), externalMiB: m(peak.external), arrayBuffersMiB: m(peak.arrayBuffers), mallocedMiB: m(peak.malloced) },
        spacesMiB: Object.fromEntries(Object.entries(peak.spaces).map(([k, v]) => [k, Number(v.toFixed(1))])),
      }
    },
  }
}

async function linuxSetup(scratch) {
  const { createLinuxHost } = await import('@kubevol/adapter-linux')
  const core = await import('@kubevol/core')
  const { createBuiltinPlugins } = await import('@kubevol/core/plugins')
  const testing = await import('@kubevol/core/testing')
  return { createLinuxHost, core, createBuiltinPlugins, testing, root: `${scratch.dir}/root` }
}

// The manager on the Linux host with `pods` added at once, waited until mounted; then, with
// `unmount`, deleted and waited until unmounted.
async function throughManager(scratch, makePods, unmount) {
  const { createLinuxHost, core, createBuiltinPlugins, testing, root } = await linuxSetup(scratch)
  const host = createLinuxHost({})
  const pods = testing.createMemoryPodSource()
  const manager = core.createVolumeManager({ host, plugins: createBuiltinPlugins(), podSource: pods, objects: testing.createMemoryObjectReader(), nodeName: 'node-1', rootDir: root, statsPeriodMs: 0, housekeepingPeriodMs: 0, controllerAttachDetach: false })
  const stop = new AbortController()
  const running = manager.run(stop.signal)
  const all = makePods(testing.buildPod)
  const t0 = performance.now()
  for (const pod of all) pods.setPod(pod)
  await Promise.all(all.map((pod) => manager.waitForAttachAndMount(pod, { timeoutMs: 600_000 })))
  const mounted = manager.snapshot().mounted.length
  const mountedAt = status()
  if (unmount) {
    for (const pod of all) pods.deletePod(pod.metadata.uid)
    await Promise.all(all.map((pod) => manager.waitForUnmount(pod, { timeoutMs: 600_000 })))
    await manager.waitForIdle()
  }
  const seconds = (performance.now() - t0) / 1000
  stop.abort()
  await running
  host.close()
  return { volumes: mounted, seconds, hwmWhenMountedMiB: mountedAt.hwmMiB, threads: mountedAt.threads }
}

const CHILD = {
  bare: async () => ({}),
  modules: async () => {
    await import('@kubevol/core')
    await import('@kubevol/core/plugins')
    await import('@kubevol/adapter-linux')
    return {}
  },
  'io-worker': async (scratch) => {
    const { createLinuxHost } = await import('@kubevol/adapter-linux')
    const host = createLinuxHost({})
    const dir = `${scratch.dir}/t`
    await host.mkdir(dir, { recursive: true })
    await host.mount({ source: 'tmpfs', target: dir, fstype: 'tmpfs' })
    await host.isMountPoint(dir)
    await host.unmount(dir)
    await host.lstat(dir)
    const threads = status().threads
    host.close()
    return { threads }
  },
  'emptydir-10k': (scratch) =>
    throughManager(scratch, (buildPod) => Array.from({ length: 1000 }, (_, p) => buildPod({ uid: `uid-${p}`, name: `p${p}`, volumes: Array.from({ length: 10 }, (_, v) => ({ name: `e${v}`, emptyDir: {} })) })), false),
  'kernel-2k': (scratch) => {
    for (let i = 0; i < 1000; i++) mkdirSync(`${scratch.dir}/host/d${i}`, { recursive: true })
    return throughManager(
      scratch,
      (buildPod) =>
        Array.from({ length: 200 }, (_, p) =>
          buildPod({
            uid: `uid-${p}`,
            name: `p${p}`,
            volumes: [
              ...Array.from({ length: 5 }, (_, v) => ({ name: `m${v}`, emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } })),
              ...Array.from({ length: 5 }, (_, v) => ({ name: `h${v}`, hostPath: { path: `${scratch.dir}/host/d${p * 5 + v}`, type: 'Directory' } })),
            ],
          }),
        ),
      true,
    )
  },
}

async function child(name) {
  const scratch = name === 'bare' || name === 'modules' ? undefined : scratchFilesystem('kubevol-bench-memory-', '2G')
  const sample = sampler()
  const cpu0 = process.cpuUsage()
  try {
    const figures = await CHILD[name](scratch)
    const cpu = process.cpuUsage(cpu0)
    const peak = sample.stop()
    // CPU time as well as wall time: on a shared machine it moves less with the other load.
    process.stdout.write(`${JSON.stringify({ workload: name, ...status(), ...figures, cpuSeconds: (cpu.user + cpu.system) / 1e6, ...peak })}\n`)
  } finally {
    scratch?.remove()
  }
}

// ---- the agent, a process of its own: its peak read from outside ----

function manifests(dir, pods) {
  mkdirSync(dir, { recursive: true })
  const docs = []
  for (let p = 0; p < pods; p++) {
    docs.push(`apiVersion: v1
kind: ConfigMap
metadata: { name: cm-${p}, namespace: default }
data: { app.conf: "setting=${p}" }
---
apiVersion: v1
kind: Secret
metadata: { name: s-${p}, namespace: default }
data: { token: ${btoa(`secret-${p}`)} }
---
apiVersion: v1
kind: Pod
metadata: { name: p${p}, namespace: default, uid: uid-${p} }
spec:
  nodeName: node-1
  containers:
    - name: c
      image: busybox
      volumeMounts: [{ name: scratch, mountPath: /s }, { name: cache, mountPath: /c }, { name: work, mountPath: /w }, { name: shm, mountPath: /dev/shm }, { name: config, mountPath: /etc/app }, { name: creds, mountPath: /etc/creds }]
  volumes:
    - { name: scratch, emptyDir: {} }
    - { name: cache, emptyDir: {} }
    - { name: work, emptyDir: {} }
    - { name: shm, emptyDir: { medium: Memory, sizeLimit: 64Mi } }
    - { name: config, configMap: { name: cm-${p} } }
    - { name: creds, secret: { secretName: s-${p} } }
`)
  }
  for (let f = 0; f * 10 < pods; f++) writeFileSync(`${dir}/pods-${f}.yaml`, docs.slice(f * 10, f * 10 + 10).join('---\n'))
  return pods * 6
}

async function agentStatic(pods, launch) {
  const scratch = scratchFilesystem('kubevol-bench-memory-', '2G')
  const expected = manifests(`${scratch.dir}/manifests`, pods)
  const port = 20_000 + Math.floor(Math.random() * 20_000)
  const args = [...launch.flags, AGENT_MAIN, '--mode=static', '--host=linux', '--node-name=node-1', `--root-dir=${scratch.dir}/root`, `--pod-manifest-path=${scratch.dir}/manifests`, `--port=${port}`]
  const agent = spawn(process.execPath, args, { env: { ...process.env, ...launch.env }, stdio: ['ignore', 'ignore', 'inherit'] })
  const t0 = performance.now()
  try {
    for (;;) {
      await new Promise((resolve) => setTimeout(resolve, 500))
      if (agent.exitCode !== null) throw new Error(`the agent exited with ${agent.exitCode}`)
      if (performance.now() - t0 > 120_000) throw new Error('the agent did not mount every volume in 120 s')
      const state = await fetch(`http://127.0.0.1:${port}/v1/state`).then((r) => r.json(), () => undefined)
      if (state?.actual?.mounted?.length === expected && state.pendingOperations.length === 0 && state.sourcesReady) break
    }
    const seconds = (performance.now() - t0) / 1000
    // Settled: what a node holds while it runs, not only at its start.
    await new Promise((resolve) => setTimeout(resolve, 2000))
    const text = readFileSync(`/proc/${agent.pid}/status`, 'utf8')
    const kib = (key) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(text)?.[1]) / 1024
    // utime and stime (fields 14 and 15 of /proc/<pid>/stat, after the command's parenthesis), in
    // the kernel's USER_HZ ticks: 100 a second on every Linux architecture.
    const statLine = readFileSync(`/proc/${agent.pid}/stat`, 'utf8')
    const stat = statLine.slice(statLine.lastIndexOf(')') + 2).split(' ')
    const cpuSeconds = (Number(stat[11]) + Number(stat[12])) / 100
    return { workload: `agent-static-${pods}`, volumes: expected, seconds, cpuSeconds, hwmMiB: kib('VmHWM'), rssMiB: kib('VmRSS'), threads: Number(/^Threads:\s+(\d+)/m.exec(text)?.[1]) }
  } finally {
    agent.kill('SIGTERM')
    await new Promise((resolve) => (agent.exitCode !== null ? resolve() : agent.once('exit', resolve)))
    scratch.remove()
  }
}

// ---- the parent: every workload in a fresh process, the table ----

function runChild(name, launch) {
  // No preload (it loads koffi) where nothing is mounted: the bare process is bare.
  const namespace = name === 'bare' || name === 'modules' ? [] : ['--require', preload]
  const out = spawnSync(process.execPath, [...launch.flags, ...namespace, self, name], { env: { ...process.env, ...launch.env }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 16 * MiB })
  if (out.status !== 0) throw new Error(`memory workload ${name} exited ${out.status}`)
  return JSON.parse(out.stdout.trim().split('\n').at(-1))
}

async function measure(name, launch) {
  return name.startsWith('agent-static-') ? await agentStatic(Number(name.slice('agent-static-'.length)), launch) : runChild(name, launch)
}

// The agent as the image starts it; KUBEVOL_BENCH_MEMORY_AGENT names another build of it to compare
// (dist/main.js, the packages' own files; or a copy of the code before a change).
const AGENT_MAIN = process.env.KUBEVOL_BENCH_MEMORY_AGENT ?? imageLaunch().script

const f1 = (n) => (n === undefined || Number.isNaN(n) ? '' : n.toFixed(1))
const heapAt = (r) => (r.atPeak ? `${f1(r.atPeak.heapTotalMiB)} / ${f1(r.atPeak.heapUsedMiB)} (new space ${f1(r.spacesMiB.new_space)})` : '')

function table(pairs, launch) {
  const shipped = [...Object.entries(launch.env).map(([k, v]) => `${k}=${v}`), 'node', ...launch.flags].join(' ')
  const lines = [
    `| workload | peak RSS, node's defaults | CPU s | peak RSS, \`${shipped}\` as the image starts the agent | CPU s | target | met (as the image) | heap MiB at the peak, total / used: defaults; flags |`,
    '| --- | ---: | ---: | ---: | ---: | --- | --- | --- |',
  ]
  for (const w of WORKLOADS) {
    const pair = pairs[w.name]
    if (!pair) continue
    const [plain, tuned] = pair
    const met = w.target === undefined ? '' : (w.under ? tuned.hwmMiB < w.target : tuned.hwmMiB <= w.target) ? 'yes' : '**no**'
    const target = w.target === undefined ? '' : `${w.under ? '<' : '≤'} ${w.target} MiB${w.kubelet ? ` (kubelet v1.32: ${w.kubelet})` : ''}`
    lines.push(`| ${w.what} | ${f1(plain.hwmMiB)} MiB | ${f1(plain.cpuSeconds)} | ${f1(tuned.hwmMiB)} MiB | ${f1(tuned.cpuSeconds)} | ${target} | ${met} | ${heapAt(plain)}; ${heapAt(tuned)} |`)
  }
  return lines
}

async function main() {
  if (process.getuid?.() !== 0) {
    console.log('memory benchmark skipped: it needs root (real mounts in a private mount namespace)')
    return
  }
  // The scratch filesystems and the agent's mounts in a private mount namespace, as linux-host.js.
  if (process.env.KUBEVOL_TEST_MOUNT_NAMESPACE !== 'private') {
    const again = spawnSync(process.execPath, ['--require', preload, self], { stdio: 'inherit' })
    process.exitCode = again.status ?? 1
    return
  }
  const image = imageLaunch()
  const launch = { flags: process.env.KUBEVOL_BENCH_MEMORY_NODE_FLAGS?.split(' ').filter(Boolean) ?? image.flags, env: image.env }
  const only = process.env.KUBEVOL_BENCH_MEMORY_ONLY?.split(',')
  const pairs = {}
  // Each workload with node's defaults, then as the image starts it, one after the other: the machine's
  // speed drifts within minutes, so the two CPU figures of a row are the ones to compare.
  for (const w of WORKLOADS) {
    if (only && !only.includes(w.name)) continue
    pairs[w.name] = [await measure(w.name, { flags: [], env: {} }), await measure(w.name, launch)]
  }
  const md = [
    '## Memory (peak RSS, each workload a fresh process)',
    '',
    `${os.cpus()[0]?.model?.trim()} (${os.cpus().length} cores), Node ${process.version}, Linux ${os.release()}, ${new Date().toISOString()}`,
    '',
    ...table(pairs, launch),
    '',
    "Peak RSS is the kernel's high-water mark of the process (VmHWM); CPU is the process's user + system time for the",
    'workload. The first three rows are the steps every Linux workload starts from (the bare process without the',
    'private-namespace preload, which loads koffi). Each workload runs with node\'s defaults (as an embedder who passes no',
    'flags) and as deploy/Dockerfile starts the agent (node flags, malloc environment), back to back; targets are judged on the latter.',
    'Heap figures are from the sample (every 20 ms) with the highest RSS; the agent is read from outside, so only its',
    'peak and CPU are given. bench/README.md ("Memory") says where the memory goes and why a target is not met.',
    '',
  ]
  console.log(md.join('\n'))
  if (!only) await writeResult('memory', { benchmark: 'memory', launch, workloads: WORKLOADS, pairs, machine: { cpu: os.cpus()[0]?.model, cores: os.cpus().length, node: process.version, date: new Date().toISOString() } }, md.join('\n'))
}

const name = process.argv[2]
if (name) await child(name)
else if (process.argv[1] === self) await main()
