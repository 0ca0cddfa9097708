/**
 * The built programs the suite drives as real processes: the agent through each of its documented
 * entry points (the agent's main `packages/agent/dist/main.js`, `kubevol run` through the CLI's bin
 * `packages/cli/bin/kubevol.js`, and the image's entry, the bundle `packages/agent/dist/bundle/main.js`
 * with the image's node flags), and the CLI (`kubevol gc`, ...). Real processes, because the attacks
 * stop, restart, SIGTERM and SIGKILL the agent and run `kubevol gc` beside it, as an operator would.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

/**
 * The checkout whose built programs run: this one, or `KUBEVOL_HOSTILE_BUILD` (another checkout, built,
 * e.g. an older commit, to see which attacks its code fails).
 */
const CHECKOUT = process.env.KUBEVOL_HOSTILE_BUILD || fileURLToPath(new URL('../../..', import.meta.url))
const AGENT_MAIN = join(CHECKOUT, 'packages/agent/dist/main.js')
const CLI_MAIN = join(CHECKOUT, 'packages/cli/dist/main.js')
const CLI_BIN = join(CHECKOUT, 'packages/cli/bin/kubevol.js')
const IMAGE_MAIN = join(CHECKOUT, 'packages/agent/dist/bundle/main.js')
const LINUX_DIST = join(CHECKOUT, 'packages/adapter-linux/dist/index.js')

/** Why the built programs cannot run, or undefined when they can. */
export function notBuilt(): string | undefined {
  const missing = [AGENT_MAIN, CLI_MAIN, CLI_BIN, IMAGE_MAIN, LINUX_DIST].filter((f) => !existsSync(f))
  return missing.length === 0 ? undefined : `not built (run npm run build): ${missing.join(', ')}`
}

/** Polls `check` every 25 ms until it holds, failing after `timeoutMs` with `what`. */
export async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await check()) return
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

/** A running agent process. */
export interface AgentProcess {
  readonly pid: number
  /** The status endpoints' base URL. */
  readonly url: string
  /** Everything it printed so far (JSON log lines). */
  output(): string
  /** Resolves with the exit code (or the signal's name) when the process ends. */
  readonly exited: Promise<number | string>
  alive(): boolean
  /** SIGTERM, then waits up to `timeoutMs`; SIGKILLs if it did not exit. Resolves with how long it took. */
  stop(timeoutMs?: number): Promise<{ ms: number; killed: boolean; code: number | string }>
  signal(sig: NodeJS.Signals): void
  /** GET `path` (JSON), or undefined for a 404. */
  get<T = unknown>(path: string): Promise<T | undefined>
}

/**
 * How the agent is started, each as its documentation says: `agent`, the agent's main
 * (`node packages/agent/dist/main.js --mode=static --host=linux ...`); `cli`, `kubevol run` as the
 * README documents it (`node packages/cli/bin/kubevol.js run --host linux --pod-manifest-path DIR
 * --root-dir R ...`); `image`, the container image's ENTRYPOINT (deploy/Dockerfile: the bundle, with
 * `--optimize-for-size --max-opt=0`).
 */
export type AgentEntry = 'agent' | 'cli' | 'image'

export interface AgentFlags {
  readonly rootDir: string
  readonly manifestDir: string
  readonly shutdownGraceMs?: number
  /** @default 'agent' */
  readonly entry?: AgentEntry
  readonly extra?: readonly string[]
}

/** The command line of `entry` (after `node`): the same options, each spelt as that entry documents them. */
function entryArgv(flags: AgentFlags): string[] {
  const common = [
    '--file-check-frequency=200ms',
    '--volume-stats-agg-period=0',
    '--pod-sync-retry=200ms',
    '--stuck-operation-threshold=2s',
    `--shutdown-grace-period=${flags.shutdownGraceMs ?? 3_000}ms`,
  ]
  const plugins = flags.extra?.some((a) => a.startsWith('--plugin-registration=')) ? [] : ['--plugin-registration=false']
  if (flags.entry === 'cli') {
    return [
      CLI_BIN,
      'run',
      '--host',
      'linux',
      '--pod-manifest-path',
      flags.manifestDir,
      '--root-dir',
      flags.rootDir,
      '--node-name',
      'hostile-node',
      '--port',
      '0',
      '--logging-format',
      'json',
      '-v',
      '4',
      ...common,
      ...plugins,
      ...(flags.extra ?? []),
    ]
  }
  const agentFlags = [
    '--node-name=hostile-node',
    '--mode=static',
    '--host=linux',
    `--root-dir=${flags.rootDir}`,
    `--pod-manifest-path=${flags.manifestDir}`,
    '--port=0',
    '--logging-format=json',
    '--v=4',
    ...common,
    ...plugins,
    ...(flags.extra ?? []),
  ]
  return flags.entry === 'image' ? ['--optimize-for-size', '--max-opt=0', IMAGE_MAIN, ...agentFlags] : [AGENT_MAIN, ...agentFlags]
}

/** Starts the agent in static mode on the Linux host through `flags.entry` and resolves once it serves its endpoints. */
export async function startAgentProcess(flags: AgentFlags): Promise<AgentProcess> {
  const argv = entryArgv(flags)
  const child: ChildProcess = spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  child.stdout?.on('data', (chunk: Buffer) => (out += chunk.toString()))
  child.stderr?.on('data', (chunk: Buffer) => (out += chunk.toString()))
  if (process.env.KUBEVOL_HOSTILE_LOG_DIR) {
    const { createWriteStream } = await import('node:fs')
    const log = createWriteStream(`${process.env.KUBEVOL_HOSTILE_LOG_DIR}/agent-${Date.now()}-${child.pid}.log`)
    child.stdout?.pipe(log)
    child.stderr?.pipe(log)
  }
  let done = false
  const exited = new Promise<number | string>((resolve) =>
    child.on('exit', (code, signal) => {
      done = true
      resolve(code ?? signal ?? 'unknown')
    }),
  )
  let url = ''
  await until(
    'the agent to start',
    () => {
      if (done) throw new Error(`the agent (${flags.entry ?? 'agent'}) exited at start-up:\n${out.slice(-4000)}`)
      const line = out.split('\n').find((l) => l.includes('"kubevol agent started"'))
      if (line) url = (JSON.parse(line) as { url: string }).url
      return url !== ''
    },
    30_000,
  )
  const get = async <T>(path: string): Promise<T | undefined> => {
    const res = await fetch(`${url}${path}`)
    if (res.status === 404) return undefined
    if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${await res.text()}`)
    return (await res.json()) as T
  }
  return {
    pid: child.pid as number,
    url,
    output: () => out,
    exited,
    alive: () => !done,
    signal: (sig) => {
      if (!done) child.kill(sig)
    },
    async stop(timeoutMs = 20_000) {
      const started = Date.now()
      if (done) return { ms: 0, killed: false, code: await exited }
      child.kill('SIGTERM')
      const timer = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), timeoutMs))
      const first = await Promise.race([exited, timer])
      if (first !== 'timeout') return { ms: Date.now() - started, killed: false, code: first }
      child.kill('SIGKILL')
      return { ms: Date.now() - started, killed: true, code: await exited }
    },
    get,
  }
}

/** Runs the `kubevol` CLI to completion. */
export function runCli(args: readonly string[], timeoutMs = 60_000): Promise<{ code: number | string; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI_MAIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()))
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()))
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      resolve({ code: code ?? signal ?? 'unknown', stdout, stderr })
    })
  })
}
