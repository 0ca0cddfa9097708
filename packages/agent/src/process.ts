/**
 * The agent as a process: configuration from flags, environment and file; start; shut down on
 * SIGTERM or SIGINT leaving mounts in place, and exit 0. A second signal exits at once.
 */
import type { Agent } from './agent.js'
import { startAgent } from './agent.js'
import { AgentConfigError, configHelp, loadAgentConfig } from './config/load-config.js'
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
  readonly signals?: {
    once(signal: 'SIGTERM' | 'SIGINT', listener: () => void): unknown
    off(signal: 'SIGTERM' | 'SIGINT', listener: () => void): unknown
  }
}

const USAGE = `Usage: kubevol-agent [options]

Runs the kubevol volume manager on this node. Exit codes: 0 after SIGTERM/SIGINT, 1 when start-up
fails, 2 for an invalid configuration.
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
    stdout.write(`${USAGE}\n${configHelp()}\n`)
    exit(0)
    return undefined
  }
  if (options.argv.includes('--version')) {
    stdout.write(`${AGENT_VERSION}\n`)
    exit(0)
    return undefined
  }
  let agent: Agent
  try {
    const config = await loadAgentConfig({ argv: options.argv, env: options.env })
    agent = await startAgent(config, { env: options.env })
  } catch (err) {
    stderr.write(`kubevol-agent: ${err instanceof Error ? err.message : String(err)}\n`)
    exit(err instanceof AgentConfigError ? 2 : 1)
    return undefined
  }
  let signalled = false
  const onSignal = (): void => {
    if (signalled) {
      exit(0)
      return
    }
    signalled = true
    // A second signal while shutting down exits at once (mounts stay either way).
    signals.once('SIGTERM', onSignal)
    signals.once('SIGINT', onSignal)
    void agent.stop().then(
      () => exit(0),
      (err: unknown) => {
        stderr.write(`kubevol-agent: shutdown failed: ${err instanceof Error ? err.message : String(err)}\n`)
        exit(0)
      },
    )
  }
  signals.once('SIGTERM', onSignal)
  signals.once('SIGINT', onSignal)
  void agent.stopped.then(() => {
    signals.off('SIGTERM', onSignal)
    signals.off('SIGINT', onSignal)
  })
  return agent
}
