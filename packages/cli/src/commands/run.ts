/**
 * `kubevol run`: the agent, configured by the agent's own loader (file, environment, flags), with
 * friendlier aliases (--manifests, --root, --listen). `--once` reconciles until every pod's volumes are
 * mounted or the deadline passes, prints a summary and exits, leaving mounts in place.
 */
import { isAbsolute, resolve } from 'node:path'
import { AGENT_OPTIONS, type Agent, type AgentDependencies, type ManifestError, loadAgentConfig, startAgent } from '@kubevol/agent'
import type { Host } from '@kubevol/core'
import { CommandFailed, UsageError } from '../errors.js'
import { createPreparedMemoryHost } from '../mock-setup.js'
import { type Io, type OutputFormat, renderData, renderTable } from '../output.js'
import { type ParsedCommand, parseDuration } from '../parse.js'

/** What tests and embedders can give `run` instead of what flags name. */
export interface RunDependencies {
  /** A host to use instead of `--host` (tests keep a memory host to inspect). */
  readonly host?: Host
  /** Called with the started agent (tests stop it, or read it). */
  readonly onStarted?: (agent: Agent) => void
  /** Resolves to stop a long-running `run` (default: SIGINT or SIGTERM). */
  readonly stopSignal?: Promise<void>
}

/** One row of the `--once` summary. */
export interface VolumeSummary {
  readonly pod: string
  readonly volume: string
  readonly type: string
  readonly phase: string
  readonly attempts: number
  readonly error?: string
}

/** What `--once` found. */
export interface OnceReport {
  readonly converged: boolean
  readonly elapsedMs: number
  readonly volumes: readonly VolumeSummary[]
  /** Why it did not converge (empty when it did). */
  readonly reasons: readonly string[]
}

/** `127.0.0.1:80`, `:80`, `80`, `[::1]:80` → address and port. */
export function parseListen(text: string): { address?: string; port: number } {
  const t = text.trim()
  const m = /^(\d+)$/.exec(t) ?? /^\[([^\]]+)\]:(\d+)$/.exec(t) ?? /^([^:[\]]*):(\d+)$/.exec(t)
  if (!m) throw new UsageError(`--listen: "${text}" is not HOST:PORT, :PORT or PORT`)
  const address = m.length === 3 ? m[1] : undefined
  const port = Number(m.length === 3 ? m[2] : m[1])
  if (port > 65_535) throw new UsageError(`--listen: port ${port} is above 65535`)
  return { ...(address ? { address } : {}), port }
}

const abs = (io: Io, p: string): string => (isAbsolute(p) ? p : resolve(io.cwd, p))

/** The agent flags `run`'s parsed flags stand for, for the agent's loader. */
export function agentArgv(p: ParsedCommand, io: Io): string[] {
  const f = p.flags
  if (p.given.has('manifests') && p.given.has('kubeconfig')) throw new UsageError('run: give --manifests (static mode) or --kubeconfig (API mode), not both')
  const argv: string[] = []
  for (const flag of p.command.flags) {
    if (!flag.agentKey || !p.given.has(flag.name)) continue
    const option = AGENT_OPTIONS.find((o) => o.key === flag.agentKey)
    if (!option) continue
    let value = f[flag.name]
    if (flag.agentKey === 'rootDir' || flag.agentKey === 'manifestDir' || flag.agentKey === 'kubeconfig') value = abs(io, String(value))
    argv.push(`${option.flag}=${String(value)}`)
  }
  if (p.given.has('kubeconfig') && !p.given.has('mode')) argv.push('--mode=api')
  if (p.given.has('manifests') && !p.given.has('mode')) argv.push('--mode=static')
  if (p.given.has('listen')) {
    const { address, port } = parseListen(String(f.listen))
    if (address) argv.push(`--address=${address}`)
    argv.push(`--port=${port}`)
  } else if (f.once === true && !p.given.has('port')) {
    argv.push('--port=0')
  }
  return argv
}

const NOTICE =
  'kubevol: running on the in-memory host: nothing on this machine is mounted. To run for real: sudo kubevol run --host linux --root /var/lib/kubevol ...\n'

/** Runs `kubevol run`. Resolves with the exit code. */
export async function runCommand(p: ParsedCommand, io: Io, deps: RunDependencies = {}): Promise<number> {
  const once = p.flags.once === true
  const timeoutMs = parseDuration('timeout', String(p.flags.timeout))
  const config = await loadAgentConfig({ argv: agentArgv(p, io), env: io.env })
  let host = deps.host
  if (!host && config.host === 'mock') {
    io.stderr.write(NOTICE)
    host = await createPreparedMemoryHost(config.mode === 'static' ? config.manifestDir : undefined)
  }
  const agentDeps: AgentDependencies = {
    env: io.env,
    ...(host ? { host } : {}),
    // --once prints a report on stdout: logs go to stderr, and only when asked for with --verbosity.
    ...(once ? { log: p.given.has('verbosity') ? { destination: { write: (line: string) => io.stderr.write(line), isTTY: false } } : { silent: true } } : {}),
  }
  const agent = await startAgent(config, agentDeps)
  deps.onStarted?.(agent)
  if (!once) {
    io.stderr.write(`kubevol: agent ${config.nodeName} (${config.mode} mode, host ${host && deps.host ? 'given' : config.host}) serving ${agent.url}\n`)
    await (deps.stopSignal ?? waitForSignal())
    await agent.stop()
    return 0
  }
  try {
    const report = await reconcileOnce(agent, timeoutMs)
    writeOnceReport(io, p.flags.output as OutputFormat, report)
    if (!report.converged) throw new CommandFailed(`not converged: ${report.reasons.join('; ')}`)
    return 0
  } finally {
    // Mounts stay in place: stop() only stops the loops and the endpoints.
    await agent.stop()
  }
}

function waitForSignal(): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      process.off('SIGINT', done)
      process.off('SIGTERM', done)
      resolve()
    }
    process.once('SIGINT', done)
    process.once('SIGTERM', done)
  })
}

interface PodVolumeView {
  readonly name: string
  readonly pluginName?: string
  readonly phase: string
  readonly attempts?: number
  readonly lastError?: string
}

/** The summary of every pod the source has (terminating ones left out). */
export function summarize(agent: Agent): { volumes: VolumeSummary[]; pending: string[] } {
  const volumes: VolumeSummary[] = []
  const pending: string[] = []
  for (const pod of agent.pods.getPods()) {
    const uid = pod.metadata.uid ?? ''
    if (agent.pods.shouldPodContainersBeTerminating(uid)) continue
    const name = `${pod.metadata.namespace ?? 'default'}/${pod.metadata.name ?? uid}`
    const view = agent.pod(uid) as { volumes?: PodVolumeView[]; podErrors?: string[] } | undefined
    for (const v of view?.volumes ?? []) {
      const row: VolumeSummary = {
        pod: name,
        volume: v.name,
        type: typeOf(v.pluginName, pod.spec?.volumes?.find((s) => s.name === v.name)),
        phase: v.phase,
        attempts: v.attempts ?? 0,
        ...(v.lastError ? { error: v.lastError } : {}),
      }
      volumes.push(row)
      if (v.phase !== 'mounted') pending.push(`${name} volume ${v.name} is ${v.phase}${v.lastError ? ` (${v.lastError})` : ''}`)
    }
    for (const e of view?.podErrors ?? []) pending.push(`${name}: ${e}`)
  }
  return { volumes, pending }
}

/** `kubernetes.io/empty-dir` → `empty-dir`; a Memory emptyDir → `empty-dir (Memory)`. */
function typeOf(plugin: string | undefined, spec: { emptyDir?: { medium?: string } } | undefined): string {
  if (!plugin) return 'unknown'
  const type = plugin.slice(plugin.lastIndexOf('/') + 1)
  return spec?.emptyDir?.medium ? `${type} (${spec.emptyDir.medium})` : type
}

function manifestErrors(agent: Agent): ManifestError[] {
  const state = agent.state() as { manifests?: { errors?: ManifestError[] } }
  return state.manifests?.errors ?? []
}

/** Polls every 20 ms until every pod's volumes are mounted or `timeoutMs` passes. */
export async function reconcileOnce(agent: Agent, timeoutMs: number): Promise<OnceReport> {
  const started = Date.now()
  const deadline = started + timeoutMs
  for (;;) {
    const ready = agent.pods.allReady() && agent.manager.snapshot().sourcesReady
    const { volumes, pending } = summarize(agent)
    const errors = manifestErrors(agent)
    const settled = ready && pending.length === 0
    if (settled || Date.now() >= deadline) {
      const reasons = [
        ...errors.map((e) => `${e.file}:${e.line}: ${e.reason}`),
        ...(ready ? [] : ['the pod source has not been read']),
        ...(settled ? [] : pending),
      ]
      if (!settled && reasons.length === pending.length && pending.length === 0) reasons.push(`deadline of ${timeoutMs} ms passed`)
      return { converged: settled && errors.length === 0, elapsedMs: Date.now() - started, volumes, reasons }
    }
    await new Promise((r) => setTimeout(r, 20))
  }
}

function writeOnceReport(io: Io, format: OutputFormat, report: OnceReport): void {
  if (format === 'json' || format === 'yaml') {
    io.stdout.write(renderData(format, report))
    return
  }
  const wide = format === 'wide'
  const head = wide ? ['pod', 'volume', 'type', 'phase', 'attempts', 'error'] : ['pod', 'volume', 'type', 'phase']
  const rows = report.volumes.map((v) => (wide ? [v.pod, v.volume, v.type, v.phase, v.attempts, v.error ?? ''] : [v.pod, v.volume, v.type, v.phase]))
  io.stdout.write(renderTable(head, rows))
  const pods = new Set(report.volumes.map((v) => v.pod)).size
  if (report.converged) io.stdout.write(`\nconverged: ${pods} pods, ${report.volumes.length} volumes mounted in ${report.elapsedMs} ms\n`)
  else io.stdout.write(`\nnot converged after ${report.elapsedMs} ms:\n${report.reasons.map((r) => `  - ${r}`).join('\n')}\n`)
}
