/**
 * The agent as a process: configuration from flags, environment and file; start; shut down on
 * SIGTERM or SIGINT leaving mounts in place, and exit 0. A second signal exits at once.
 *
 * The exit is bounded: within `shutdownGraceMs` plus a margin, whatever hangs
 * ({@link shutdownOnSignal}, which `kubevol run` shares).
 */
import type { Agent } from './agent.js'
import { startAgent } from './agent.js'
import { AgentConfigError, configHelp, loadAgentConfig } from './config/load-config.js'
import { type SignalSource, hostExitNow, shutdownOnSignal } from './shutdown-on-signal.js'
import { AGENT_VERSION } from './version.js'

/** The parts of `process` the agent process uses, so tests can run it in-process. */
export interface ProcessOptions {
  readonly argv: readonly string[]
  readonly env: Readonly<Record<string, string | undefined>>
  /** @default process.exit */
  readonly exit?: (code: number) => void
  /** @default process.stdout */
  readonly stdout?: { write(text: string): unknown }
  /** @default process.stderr */
  readonly stderr?: { write(text: string): unknown }
  /** Where SIGTERM and SIGINT arrive. @default process */
  readonly signals?: SignalSource
  /**
   * Ends the process without joining its threads. @default the host's `exitNow` (the Linux host's
   * _exit(2)) when `exit` is not given; none otherwise, and then `exit` is used.
   */
  readonly exitNow?: (code: number) => void
}

const USAGE = `Usage: kubevol-agent [flags]

Run the volume manager on this node: the kubevol agent, as the image and the DaemonSet start it.

Each flag is also read from its environment variable and from the --config file: a flag wins over
the variable, which wins over the file. Durations are written 10s, 500ms, 2m.
`
/** The end of help, as `kubevol CMD --help` ends. */
const HELP_END = `  -h, --help
      Show this help.
  --version
      Print the version.

Exit codes:
  0  stopped by SIGTERM or SIGINT (mounts stay in place)
  1  start-up failed
  2  an invalid configuration
`

/**
 * Runs the agent until a signal. Resolves with the running agent (undefined when it did not start);
 * exit codes: 0 after a signal or for --help/--version, 1 when start-up fails, 2 for a bad configuration.
 */
export async function runAgentProcess(options: ProcessOptions): Promise<Agent | undefined> {
  const exit = options.exit ?? ((code: number) => process.exit(code))
  const stdout = options.stdout ?? process.stdout
  const stderr = options.stderr ?? process.stderr
  const signals = options.signals ?? process
  if (options.argv.includes('--help') || options.argv.includes('-h')) {
    stdout.write(`${USAGE}\n${configHelp()}\n${HELP_END}`)
    exit(0)
    return undefined
  }
  if (options.argv.includes('--version')) {
    stdout.write(`${AGENT_VERSION}\n`)
    exit(0)
    return undefined
  }
  // A signal while the agent starts (it logs "started" before startAgent returns) is kept and acted on
  // once it has started; without a listener, node's default would end the process at once.
  let early = false
  const onEarlySignal = (): void => {
    early = true
  }
  signals.once('SIGTERM', onEarlySignal)
  signals.once('SIGINT', onEarlySignal)
  const offEarly = (): void => {
    signals.off('SIGTERM', onEarlySignal)
    signals.off('SIGINT', onEarlySignal)
  }
  let agent: Agent
  try {
    const config = await loadAgentConfig({ argv: options.argv, env: options.env, warn: (message) => stderr.write(`${message}\n`) })
    agent = await startAgent(config, { env: options.env })
  } catch (err) {
    offEarly()
    stderr.write(`kubevol-agent: ${err instanceof Error ? err.message : String(err)}\n`)
    exit(err instanceof AgentConfigError ? 2 : 1)
    return undefined
  }
  // The shutdown's listeners go on before the early ones come off: node stops watching a signal when
  // its last listener goes, and a signal that had arrived but not yet reached a listener is lost with
  // that watch (the process then ran on after its SIGTERM).
  const onSignal = shutdownOnSignal(agent, {
    signals,
    exit,
    // _exit(2) only for the real process: a test that gives `exit` keeps its own process.
    exitNow: options.exitNow ?? (options.exit === undefined ? hostExitNow(agent) : undefined),
    stderr,
    program: 'kubevol-agent',
  })
  offEarly()
  if (early) onSignal()
  return agent
}
