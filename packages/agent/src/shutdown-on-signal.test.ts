import { EventEmitter } from 'node:events'
import { afterEach, describe, expect, it, vi } from 'vitest'
import type { Agent } from './agent.js'
import { SHUTDOWN_MARGIN_MS, shutdownOnSignal } from './shutdown-on-signal.js'

const GRACE_MS = 1_000

/** An agent as shutdownOnSignal sees it: a host with `inFlight` stuck calls, a stop that ends or hangs. */
function harness(options: { inFlight: number; stopHangs?: boolean }) {
  const ended: { how: 'exit' | 'exitNow'; code: number }[] = []
  const warnings: unknown[][] = []
  let stopped!: () => void
  const agentStopped = new Promise<void>((resolve) => (stopped = resolve))
  const agent = {
    config: { shutdownGraceMs: GRACE_MS },
    host: { callsInFlight: () => options.inFlight },
    logger: { warn: (...args: unknown[]) => warnings.push(args) },
    stopped: agentStopped,
    stop: () => {
      if (options.stopHangs) return new Promise<void>(() => {})
      stopped()
      return agentStopped
    },
  } as unknown as Agent
  const signals = new EventEmitter()
  shutdownOnSignal(agent, {
    signals: signals as never,
    exit: (code) => ended.push({ how: 'exit', code }),
    exitNow: (code) => ended.push({ how: 'exitNow', code }),
    stderr: { write: () => true },
    program: 'test',
  })
  return { ended, warnings, signals }
}

afterEach(() => {
  vi.useRealTimers()
})

describe('shutdownOnSignal', () => {
  it.each([
    { name: 'no host call in flight: the normal exit', inFlight: 0, how: 'exit', reason: undefined },
    { name: 'a call stuck in the kernel: _exit, saying why', inFlight: 2, how: 'exitNow', reason: '2 host call(s) have not returned (blocked in the kernel), and a normal exit would wait for them forever' },
  ])('$name', async ({ inFlight, how, reason }) => {
    const h = harness({ inFlight })
    h.signals.emit('SIGTERM')
    await vi.waitFor(() => expect(h.ended).toEqual([{ how, code: 0 }]))
    expect(h.warnings).toEqual(reason ? [['Exiting without waiting; mounts stay in place', { reason }]] : [])
  })

  it('a stop that hangs: _exit at the grace period plus the margin', async () => {
    vi.useFakeTimers()
    const h = harness({ inFlight: 0, stopHangs: true })
    h.signals.emit('SIGTERM')
    await vi.advanceTimersByTimeAsync(GRACE_MS + SHUTDOWN_MARGIN_MS - 1)
    expect(h.ended).toEqual([])
    await vi.advanceTimersByTimeAsync(1)
    expect(h.ended).toEqual([{ how: 'exitNow', code: 0 }])
    expect(h.warnings).toEqual([['Exiting without waiting; mounts stay in place', { reason: `the shutdown did not finish within ${GRACE_MS + SHUTDOWN_MARGIN_MS} ms` }]])
  })

  it('a second signal: _exit at once, once only', () => {
    const h = harness({ inFlight: 0, stopHangs: true })
    h.signals.emit('SIGTERM')
    h.signals.emit('SIGINT')
    h.signals.emit('SIGTERM')
    expect(h.ended).toEqual([{ how: 'exitNow', code: 0 }])
    expect(h.warnings).toEqual([['Exiting without waiting; mounts stay in place', { reason: 'a second signal' }]])
  })
})
