/**
 * The agent as a process: configuration from flags, environment and file; start; shut down on
 * SIGTERM or SIGINT leaving mounts in place, and exit 0. A second signal exits at once.
 *
 * The exit is bounded: within `shutdownGraceMs` plus {@link SHUTDOWN_MARGIN_MS}, whatever hangs. A
 * host call blocked in the kernel (a stopped FUSE daemon, a dead NFS server) holds a thread that
 * node's own exit would join forever, so while the host reports calls in flight, or when the
 * shutdown runs past its time, the process ends through the host's `exitNow` (_exit(2) on Linux)
 * with the reason logged.
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
  /**
   * Ends the process without joining its threads. @default the host's `exitNow` (the Linux host's
   * _exit(2)) when `exit` is not given; none otherwise, and then `exit` is used.
   */
  readonly exitNow?: (code: number) => void
}

/** How long past `shutdownGraceMs` the shutdown may take (closing the endpoints, the journal) before the process ends anyway. */
export const SHUTDOWN_MARGIN_MS = 5_000

/** What a host may offer so that the process can end while a call is blocked in the kernel (the Linux host does). */
interface ExitingHost {
  callsInFlight?(): number
  exitNow?(code: number): never
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
  // A signal while the agent starts (it logs "started" before startAgent returns) is kept and acted on
  // once it has started; without a listener, node's default would end the process at once.
  let early = false
  const onEarlySignal = (): void => {
    early = true
  }
  signals.once('SIGTERM', onEarlySignal)
  signals.once('SIGINT', onEarlySignal)
  let agent: Agent
  try {
    const config = await loadAgentConfig({ argv: options.argv, env: options.env, warn: (message) => stderr.write(`${message}\n`) })
    agent = await startAgent(config, { env: options.env })
  } catch (err) {
    stderr.write(`kubevol-agent: ${err instanceof Error ? err.message : String(err)}\n`)
    exit(err instanceof AgentConfigError ? 2 : 1)
    return undefined
  } finally {
    signals.off('SIGTERM', onEarlySignal)
    signals.off('SIGINT', onEarlySignal)
  }
  const host = agent.host as ExitingHost
  const exitNow = options.exitNow ?? (options.exit === undefined && host.exitNow ? (code: number) => host.exitNow?.(code) : undefined)
  let left = false
  // Ends the process, at once when a normal exit could wait forever for a blocked thread.
  const leave = (late?: string): void => {
    if (left) return
    left = true
    const inFlight = host.callsInFlight?.() ?? 0
    if (exitNow && (late !== undefined || inFlight > 0)) {
      const reason = late ?? `${inFlight} host call(s) have not returned (blocked in the kernel), and a normal exit would wait for them forever`
      agent.logger.warn('Exiting without waiting; mounts stay in place', { reason })
      exitNow(0)
      return
    }
    exit(0)
  }
  let signalled = false
  const onSignal = (): void => {
    if (signalled) {
      leave('a second signal')
      return
    }
    signalled = true
    // A second signal while shutting down exits at once (mounts stay either way).
    signals.once('SIGTERM', onSignal)
    signals.once('SIGINT', onSignal)
    const limitMs = agent.config.shutdownGraceMs + SHUTDOWN_MARGIN_MS
    const deadline = setTimeout(() => leave(`the shutdown did not finish within ${limitMs} ms`), limitMs)
    void agent.stop().then(
      () => {
        clearTimeout(deadline)
        leave()
      },
      (err: unknown) => {
        clearTimeout(deadline)
        stderr.write(`kubevol-agent: shutdown failed: ${err instanceof Error ? err.message : String(err)}\n`)
        leave()
      },
    )
  }
  signals.once('SIGTERM', onSignal)
  signals.once('SIGINT', onSignal)
  if (early) onSignal()
  void agent.stopped.then(() => {
    signals.off('SIGTERM', onSignal)
    signals.off('SIGINT', onSignal)
  })
  return agent
}
