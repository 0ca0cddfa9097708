/**
 * `kubevol run`: the agent, configured by the agent's own loader (file, environment, flags) under the
 * option table's flags. `--once` reconciles until the actual state equals the desired state (every
 * wanted volume mounted, everything else unmounted and detached) or the deadline passes, prints a
 * summary and exits, leaving the wanted mounts in place.
 */
import { stat } from 'node:fs/promises'
import { isAbsolute, resolve } from 'node:path'
import {
  AGENT_OPTIONS,
  type Agent,
  type AgentDependencies,
  type ManifestError,
  hostExitNow,
  loadAgentConfig,
  shutdownOnSignal,
  startAgent,
} from '@kubevol/agent'
import { type Host, errorMessage } from '@kubevol/core'
import { elapsed, humanDuration } from '../age.js'
import { CliError, CommandFailed, EXIT, UsageError } from '../errors.js'
import { createPreparedMemoryHost } from '../mock-setup.js'
import { type Io, type OutputFormat, type TableOptions, causeOf, renderData, renderTable, tableOptions } from '../output.js'
import type { ParsedCommand } from '../parse.js'

/** What tests and embedders can give `run` instead of what flags name. */
export interface RunDependencies {
  /** A host to use instead of `--host` (tests keep a memory host to inspect). */
  readonly host?: Host
  /** Called with the started agent (tests stop it, or read it). */
  readonly onStarted?: (agent: Agent) => void
  /**
   * Resolves to stop a long-running `run`, which then resolves with 0. Without it, SIGINT or SIGTERM
   * stop the agent as the agent's own process does (the agent's `shutdownOnSignal`): within the
   * shutdown grace period plus a margin, ending the process at once (`_exit(2)`) when a host call is
   * stuck in the kernel.
   */
  readonly stopSignal?: Promise<void>
  /** What the kernel offers the Linux host (tests inject an old one). @default adapter-linux's probe */
  readonly probeKernelFloor?: AgentDependencies['probeKernelFloor']
  /** The path of the running script, for the command the in-memory notice suggests. @default process.argv[1] */
  readonly argv0?: string
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

const abs = (io: Io, p: string): string => (isAbsolute(p) ? p : resolve(io.cwd, p))

/** The agent options whose values are paths: relative ones are read from the current directory. */
const PATH_KEYS = new Set(['rootDir', 'manifestDir', 'kubeconfig', 'bootstrapKubeconfig', 'certDir', 'pluginRegistrationDir', 'authTokenFile', 'config'])

/** The agent flags `run`'s parsed flags stand for, for the agent's loader (its own names, durations in ms). */
function agentArgv(p: ParsedCommand, io: Io): string[] {
  const f = p.flags
  if (p.given.has('pod-manifest-path') && p.given.has('kubeconfig')) throw new UsageError('give --pod-manifest-path (static mode) or --kubeconfig (API mode), not both', 'run')
  const argv: string[] = []
  for (const flag of p.command.flags) {
    if (!flag.agentKey || !p.given.has(flag.name)) continue
    const option = AGENT_OPTIONS.find((o) => o.key === flag.agentKey)
    if (!option) continue
    let value = f[flag.name]
    if (PATH_KEYS.has(flag.agentKey)) value = abs(io, String(value))
    if (flag.type === 'duration') value = `${String(value)}ms`
    argv.push(`${option.flag}=${String(value)}`)
  }
  if ((p.given.has('kubeconfig') || p.given.has('bootstrap-kubeconfig')) && !p.given.has('mode')) argv.push('--mode=api')
  if (p.given.has('pod-manifest-path') && !p.given.has('mode')) argv.push('--mode=static')
  // --once is a command, not a server: any free port, so that it runs beside an agent.
  if (f.once === true && !p.given.has('port')) argv.push('--port=0')
  return argv
}

/** Manifest files, as the agent reads them. */
const MANIFEST_FILE = /\.(ya?ml|json)$/i

/**
 * A typo must not look like an empty node: the manifest path must be a directory or one manifest
 * file. Throws CliError (exit 2, one line).
 */
async function checkManifestPath(path: string): Promise<void> {
  let st: Awaited<ReturnType<typeof stat>>
  try {
    st = await stat(path)
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    throw new CliError(`--pod-manifest-path ${path}: ${code === 'ENOENT' ? 'no such file or directory' : errorMessage(err)}`, EXIT.usage)
  }
  if (st.isFile() && !MANIFEST_FILE.test(path)) throw new CliError(`--pod-manifest-path ${path}: not a directory or a manifest file (.yaml, .yml or .json)`, EXIT.usage)
  if (!st.isFile() && !st.isDirectory()) throw new CliError(`--pod-manifest-path ${path}: not a directory or a manifest file`, EXIT.usage)
}

/**
 * Printed when the host is the in-memory one. The command it suggests must work where the user is:
 * `sudo` resets PATH (secure_path), so the binary is named by its path, not by `kubevol`.
 */
export function mockNotice(argv0: string | undefined): string {
  const command = argv0 && isAbsolute(argv0) ? `${process.execPath} ${argv0}` : 'kubevol'
  return `kubevol: running on the in-memory host: nothing on this machine is mounted. To run for real (as root): sudo ${command} run --host linux --root-dir /var/lib/kubevol ...\n`
}

/** Runs `kubevol run`. Resolves with the exit code. */
export async function runCommand(p: ParsedCommand, io: Io, deps: RunDependencies = {}): Promise<number> {
  const once = p.flags.once === true
  const timeoutMs = Number(p.flags.timeout)
  const config = await loadAgentConfig({ argv: agentArgv(p, io), env: io.env })
  // The agent (a DaemonSet) waits for a missing directory as the kubelet does; a command line names one on purpose.
  if (config.mode === 'static' && (once || p.given.has('pod-manifest-path'))) await checkManifestPath(config.manifestDir)
  let host = deps.host
  if (!host && config.host === 'mock') {
    io.stderr.write(mockNotice(deps.argv0 ?? process.argv[1]))
    host = await createPreparedMemoryHost(config.mode === 'static' ? config.manifestDir : undefined)
  }
  const agentDeps: AgentDependencies = {
    env: io.env,
    ...(host ? { host } : {}),
    ...(deps.probeKernelFloor ? { probeKernelFloor: deps.probeKernelFloor } : {}),
    // --once prints a report on stdout: logs go to stderr, and only when asked for with -v.
    ...(once ? { log: p.given.has('v') ? { destination: { write: (line: string) => io.stderr.write(line), isTTY: false } } : { silent: true } } : {}),
  }
  const agent = await startAgent(config, agentDeps)
  deps.onStarted?.(agent)
  if (!once) {
    io.stderr.write(`kubevol: agent ${config.nodeName} (${config.mode} mode, host ${host && deps.host ? 'given' : config.host}) serving ${agent.url}\n`)
    if (deps.stopSignal) {
      await deps.stopSignal
      await agent.stop()
      return 0
    }
    // A stuck host call would keep node's exit waiting forever: the process may end here, through _exit(2).
    return await new Promise<number>((resolve) => {
      shutdownOnSignal(agent, { signals: process, exit: resolve, exitNow: hostExitNow(agent), stderr: io.stderr, program: 'kubevol' })
    })
  }
  try {
    const format = p.flags.output as OutputFormat
    const report = await reconcileOnce(agent, timeoutMs)
    writeOnceReport(io, format, report, tableOptions(p))
    if (!report.converged) throw new CommandFailed(notConverged(report, format))
    return 0
  } finally {
    // Mounts stay in place: stop() only stops the loops and the endpoints.
    await agent.stop()
  }
}

interface PodVolumeView {
  readonly name: string
  readonly type?: string
  readonly phase: string
  readonly attempts?: number
  readonly lastError?: string
  readonly reason?: string
}

/** What one summary pass found. */
interface Summary {
  readonly volumes: VolumeSummary[]
  /** Why it has not converged yet (it may still). */
  readonly pending: string[]
  /** What will not change by waiting (an unsupported volume type). */
  readonly final: string[]
}

/**
 * Every pod volume the source has (terminating pods left out), and what stands between the actual
 * and the desired state: a wanted volume not mounted, a pod error, and teardown not finished (a
 * volume still mounted for a pod that no longer wants it, a device still mounted or attached that no
 * pod needs). A volume no container mounts is shown as `unused` and waited for by nobody.
 */
function summarize(agent: Agent): Summary {
  const volumes: VolumeSummary[] = []
  const pending: string[] = []
  const final: string[] = []
  for (const pod of agent.pods.getPods()) {
    const uid = pod.metadata.uid ?? ''
    if (agent.pods.shouldPodContainersBeTerminating(uid)) continue
    const name = `${pod.metadata.namespace ?? 'default'}/${pod.metadata.name ?? uid}`
    const view = agent.pod(uid) as { volumes?: PodVolumeView[]; podErrors?: string[] } | undefined
    let unsupported = false
    for (const v of view?.volumes ?? []) {
      const error = v.lastError ?? v.reason
      volumes.push({ pod: name, volume: v.name, type: v.type ?? 'unknown', phase: v.phase, attempts: v.attempts ?? 0, ...(error ? { error } : {}) })
      if (v.phase === 'mounted' || v.phase === 'unused') continue
      if (v.phase === 'unsupported') {
        unsupported = true
        final.push(`${name} volume ${v.name}: ${v.reason}`)
      } else pending.push(`${name} volume ${v.name} is ${v.phase}${v.lastError ? ` (${causeOf(v.lastError, REASON_WIDTH)})` : ''}`)
    }
    // The unsupported volume's own error ("no volume plugin matched") is already said, better.
    if (!unsupported) for (const e of view?.podErrors ?? []) pending.push(`${name}: ${e}`)
  }
  const snap = agent.manager.snapshot()
  const wanted = new Set(snap.desired.map((d) => `${d.podName}\n${d.volumeName}`))
  const wantedVolumes = new Set(snap.desired.map((d) => d.volumeName))
  for (const m of snap.mounted) {
    if (!wanted.has(`${m.podName}\n${m.volumeName}`)) pending.push(`volume ${m.outerVolumeSpecName} of pod ${m.podUID} is still mounted (no pod wants it)`)
  }
  for (const a of snap.attached) {
    if (wantedVolumes.has(a.volumeName)) continue
    const device = a.deviceMountState !== 'not-mounted' && a.deviceMountPath ? `globally mounted at ${a.deviceMountPath}` : a.devicePath ? `attached at ${a.devicePath}` : 'attached'
    pending.push(`volume ${a.volumeName} is still ${device} (no pod wants it)`)
  }
  if (snap.runningOperations > 0 && pending.length === 0) pending.push(`${snap.runningOperations} operations are still running`)
  return { volumes, pending, final }
}

function manifestErrors(agent: Agent): ManifestError[] {
  const state = agent.state() as { manifests?: { errors?: ManifestError[] } }
  return state.manifests?.errors ?? []
}

/**
 * Polls every 20 ms until the actual state equals the desired state, or only what waiting cannot
 * fix is left (an unsupported volume type: reported at once), or `timeoutMs` passes.
 */
async function reconcileOnce(agent: Agent, timeoutMs: number): Promise<OnceReport> {
  const started = Date.now()
  const deadline = started + timeoutMs
  for (;;) {
    const ready = agent.pods.allReady() && agent.manager.snapshot().sourcesReady
    const { volumes, pending, final } = summarize(agent)
    const errors = manifestErrors(agent)
    const settled = ready && pending.length === 0
    if (settled || Date.now() >= deadline) {
      const reasons = [
        ...errors.map((e) => `${e.file}:${e.line}: ${e.reason}`),
        ...final,
        ...(ready ? [] : ['the pod source has not been read']),
        ...(settled ? [] : pending),
      ]
      if (!settled && reasons.length === 0) reasons.push(`deadline of ${humanDuration(timeoutMs)} passed`)
      return { converged: settled && errors.length === 0 && final.length === 0, elapsedMs: Date.now() - started, volumes, reasons }
    }
    await new Promise((r) => setTimeout(r, 20))
  }
}

/** The widest cause a reason quotes: the reason already names the pod and volume; `-o wide` and JSON give the error whole. */
const REASON_WIDTH = 160

/**
 * The report on stdout, the reasons once, in the error: a table (its summary line left out with
 * `--no-headers`), or the report as JSON or YAML, which holds the reasons itself.
 */
function writeOnceReport(io: Io, format: OutputFormat, report: OnceReport, table: TableOptions): void {
  if (format === 'json' || format === 'yaml') {
    io.stdout.write(renderData(format, report))
    return
  }
  const wide = format === 'wide'
  const head = wide ? ['pod', 'volume', 'type', 'phase', 'attempts', 'error'] : ['pod', 'volume', 'type', 'phase']
  const rows = report.volumes.map((v) => (wide ? [v.pod, v.volume, v.type, v.phase, v.attempts, v.error ?? ''] : [v.pod, v.volume, v.type, v.phase]))
  if (rows.length > 0) io.stdout.write(renderTable(head, rows, table))
  if (table.noHeaders) return
  const pods = new Set(report.volumes.map((v) => v.pod)).size
  const mounted = report.volumes.filter((v) => v.phase === 'mounted').length
  const summary = `${pods} ${pods === 1 ? 'pod' : 'pods'}, ${mounted} ${mounted === 1 ? 'volume' : 'volumes'} mounted`
  io.stdout.write(`${rows.length > 0 ? '\n' : ''}${report.converged ? `converged: ${summary} in ${elapsed(report.elapsedMs)}` : `not converged after ${elapsed(report.elapsedMs)}: ${summary}`}\n`)
}

/** The error of a run that did not converge: its reasons, or where they are when the report holds them. */
function notConverged(report: OnceReport, format: OutputFormat): string {
  const head = `not converged after ${elapsed(report.elapsedMs)}`
  if (format === 'json' || format === 'yaml') return `${head} (the reasons are in the report)`
  if (report.reasons.length === 1) return `${head}: ${report.reasons[0]}`
  return `${head}:\n${report.reasons.map((r) => `  - ${r}`).join('\n')}`
}
