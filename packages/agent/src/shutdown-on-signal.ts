/**
 * A running agent's end as a process, shared by every entry point (the agent's main, which the image
 * runs bundled, and `kubevol run`): on SIGTERM or SIGINT stop the agent, leaving mounts in place, and
 * end the process with 0, within `shutdownGraceMs` plus {@link SHUTDOWN_MARGIN_MS} whatever hangs.
 *
 * A host call blocked in the kernel (a stopped FUSE daemon, a dead NFS server) holds a thread that
 * node's own exit would join forever. So while the host reports calls in flight, or when the stop
 * runs past its time, or at a second signal, the process ends through `exitNow` (the Linux host's
 * _exit(2)), with the reason logged.
 */
import type { Agent } from './agent.js'

/** How long past `shutdownGraceMs` the shutdown may take (closing the endpoints, the journal) before the process ends anyway. */
export const SHUTDOWN_MARGIN_MS = 5_000

/** Where SIGTERM and SIGINT arrive (`process`, or an emitter in tests). */
export interface SignalSource {
  /** Calls `listener` at the next `signal` only. */
  once(signal: 'SIGTERM' | 'SIGINT', listener: () => void): unknown
  /** Removes a listener `once` added. */
  off(signal: 'SIGTERM' | 'SIGINT', listener: () => void): unknown
}

/** What a host may offer so that the process can end while a call is blocked in the kernel (the Linux host does). */
interface ExitingHost {
  callsInFlight?(): number
  exitNow?(code: number): never
}

/** How {@link shutdownOnSignal} ends the process. */
export interface ShutdownOnSignalOptions {
  /** Where the signals arrive: `process`. */
  readonly signals: SignalSource
  /** Ends the process the normal way (node's exit, which joins every thread). */
  readonly exit: (code: number) => void
  /** Ends the process without joining its threads. @default none: `exit` is used even when a call is stuck */
  readonly exitNow?: (code: number) => void
  /** Where a failed stop is reported, after `program: `. */
  readonly stderr: { write(text: string): unknown }
  /** The program's name for that line: `kubevol-agent`, `kubevol`. */
  readonly program: string
}

/** The host's own way out without joining threads (`LinuxHost.exitNow`), or undefined when it has none. */
export function hostExitNow(agent: Agent): ((code: number) => void) | undefined {
  const host = agent.host as ExitingHost
  return host.exitNow ? (code) => host.exitNow?.(code) : undefined
}

/**
 * Stops `agent` at the first SIGTERM or SIGINT and then ends the process with 0 through `exit`, or
 * through `exitNow` (logging "Exiting without waiting; mounts stay in place" with the reason) when
 * host calls are still in flight, when the stop has not finished within `shutdownGraceMs` plus
 * {@link SHUTDOWN_MARGIN_MS}, or at a second signal. Ends the process once only. The listeners are
 * removed once the agent has stopped. Returns the handler, to call for a signal that arrived before.
 */
export function shutdownOnSignal(agent: Agent, options: ShutdownOnSignalOptions): () => void {
  const { signals, exit, exitNow } = options
  const host = agent.host as ExitingHost
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
        options.stderr.write(`${options.program}: shutdown failed: ${err instanceof Error ? err.message : String(err)}\n`)
        leave()
      },
    )
  }
  signals.once('SIGTERM', onSignal)
  signals.once('SIGINT', onSignal)
  void agent.stopped.then(() => {
    signals.off('SIGTERM', onSignal)
    signals.off('SIGINT', onSignal)
  })
  return onSignal
}
