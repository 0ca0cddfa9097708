// Start-up weight: wall time and peak RSS of short `kubevol` commands, each a fresh Node process, as
// a person or a probe starts them. A budget per command; the script exits 1 when a median is over.
// See README.md ("Start-up weight"). Runs per command: KUBEVOL_BENCH_STARTUP_RUNS (7).
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { writeResult } from './results.js'

const repo = fileURLToPath(new URL('../', import.meta.url))
const cli = join(repo, 'packages/cli/dist/main.js')
const runs = Number(process.env.KUBEVOL_BENCH_STARTUP_RUNS ?? 7)

// The budget (issue 21): the help and a static run on the examples stay well below what loading the
// Kubernetes client cost them (0.86 s and 136 MB for --help before it was loaded only in API mode).
const commands = [
  { name: 'kubevol --help', args: [cli, '--help'], budget: { ms: 600, rssMiB: 100 } },
  { name: 'kubevol run --once (examples/manifests)', args: [cli, 'run', '--once', '--pod-manifest-path', 'examples/manifests'], budget: { ms: 800, rssMiB: 110 } },
  // For scale, not budgeted: what API mode adds when it loads the client.
  { name: "import('@kubevol/agent')", args: ['--input-type=module', '-e', "await import('@kubevol/agent')"] },
  { name: "import('@kubevol/agent/kube')", args: ['--input-type=module', '-e', "await import('@kubevol/agent/kube')"] },
  // The agent process's own --help: from the packages' files, and from the bundle the image runs.
  { name: 'agent --help (dist/main.js)', args: [join(repo, 'packages/agent/dist/main.js'), '--help'] },
  { name: 'agent --help (dist/bundle/main.js, as the image)', args: [join(repo, 'packages/agent/dist/bundle/main.js'), '--help'] },
]

// Peak RSS as the kernel counts it for the process (getrusage ru_maxrss), written by a preload at exit.
const work = mkdtempSync(join(os.tmpdir(), 'kubevol-bench-startup-'))
const preload = join(work, 'max-rss.cjs')
writeFileSync(preload, "process.on('exit', () => require('node:fs').writeFileSync(process.env.KUBEVOL_MAXRSS_OUT, String(process.resourceUsage().maxRSS)))\n")

function once(args) {
  const out = join(work, 'rss')
  const started = performance.now()
  const child = spawnSync(process.execPath, ['--require', preload, ...args], { cwd: repo, env: { ...process.env, KUBEVOL_MAXRSS_OUT: out, NO_COLOR: '1' }, encoding: 'utf8' })
  const ms = performance.now() - started
  if (child.status !== 0) throw new Error(`node ${args.join(' ')} exited ${child.status}: ${child.stderr}`)
  return { ms, rssMiB: Number(readFileSync(out, 'utf8')) / 1024 }
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor((s.length - 1) / 2)]
}

const rows = []
try {
  for (const command of commands) {
    once(command.args) // warm the file cache; not counted
    const samples = Array.from({ length: runs }, () => once(command.args))
    const row = {
      command: command.name,
      runs,
      medianMs: median(samples.map((s) => s.ms)),
      maxMs: Math.max(...samples.map((s) => s.ms)),
      medianRssMiB: median(samples.map((s) => s.rssMiB)),
      maxRssMiB: Math.max(...samples.map((s) => s.rssMiB)),
      ...(command.budget ? { budget: command.budget } : {}),
    }
    row.met = command.budget ? row.medianMs <= command.budget.ms && row.medianRssMiB <= command.budget.rssMiB : undefined
    rows.push(row)
  }
} finally {
  rmSync(work, { recursive: true, force: true })
}

const f = (n) => n.toFixed(0)
const md = [
  '## Start-up weight',
  '',
  `Each command a fresh Node process from the repository root, ${runs} runs after one uncounted; wall time and peak RSS (ru_maxrss). ${os.cpus()[0]?.model?.trim()} (${os.cpus().length} cores), Node ${process.version}, ${new Date().toISOString()}.`,
  '',
  '| command | median ms | max ms | median peak RSS MiB | max MiB | budget | met |',
  '| --- | --- | --- | --- | --- | --- | --- |',
  ...rows.map((r) => `| ${r.command} | ${f(r.medianMs)} | ${f(r.maxMs)} | ${f(r.medianRssMiB)} | ${f(r.maxRssMiB)} | ${r.budget ? `≤ ${r.budget.ms} ms, ≤ ${r.budget.rssMiB} MiB` : '(for scale)'} | ${r.met === undefined ? '' : r.met ? 'yes' : '**no**'} |`),
  '',
]
console.log(md.join('\n'))
await writeResult('start-up', { benchmark: 'start-up', runs, rows, machine: { cpu: os.cpus()[0]?.model, cores: os.cpus().length, node: process.version, date: new Date().toISOString() } }, md.join('\n'))
if (rows.some((r) => r.met === false)) {
  console.error('start-up: a command is over its budget')
  process.exitCode = 1
}
