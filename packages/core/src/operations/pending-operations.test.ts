import { describe, expect, it } from 'vitest'
import { createFakeClock } from '../testing/fake-clock.js'
import { type OperationKey, PendingOperations } from './pending-operations.js'

const key = (volumeName: string, podName = '', nodeName = ''): OperationKey => ({ volumeName, podName, nodeName })

function never(): Promise<void> {
  return new Promise(() => {})
}

describe('PendingOperations', () => {
  // SPEC §6.2, Test_NestedPendingOperations_SecondOpBeforeFirstCompletes.
  it.each([
    { first: key(''), second: key(''), starts: true },
    { first: key(''), second: key('vol'), starts: true },
    { first: key('vol'), second: key(''), starts: true },
    { first: key('vol'), second: key('vol'), starts: false },
    { first: key('vol'), second: key('vol', 'pod'), starts: false },
    { first: key('vol'), second: key('vol', '', 'node'), starts: false },
    { first: key('vol', 'pod'), second: key('vol'), starts: false },
    { first: key('vol', 'pod'), second: key('vol', 'pod'), starts: false },
    { first: key('vol', 'pod1'), second: key('vol', 'pod2'), starts: true },
    { first: key('vol', '', 'node'), second: key('vol', '', 'node'), starts: false },
    { first: key('vol', '', 'node1'), second: key('vol', '', 'node2'), starts: true },
    { first: key('vol1'), second: key('vol2'), starts: true },
  ])('first $first.volumeName/$first.podName/$first.nodeName, second $second.volumeName/$second.podName/$second.nodeName → starts=$starts', ({ first, second, starts }) => {
    const ops = new PendingOperations({ clock: createFakeClock() })
    expect(ops.run(first, 'op', never).status).toBe('started')
    expect(ops.run(second, 'op', never).status).toBe(starts ? 'started' : 'already-pending')
  })

  it('backs off the same operation after a failure and lets another one start at once', async () => {
    const clock = createFakeClock()
    const ops = new PendingOperations({ clock })
    const result = ops.run(key('vol'), 'volume_mount', async () => {
      throw new Error('boom')
    })
    expect(result.status).toBe('started')
    if (result.status === 'started') await result.done
    const again = ops.run(key('vol'), 'volume_mount', never)
    expect(again.status).toBe('backing-off')
    if (again.status === 'backing-off') {
      expect(again.retryAt).toBe(clock.now() + 500)
      expect(again.message).toContain('No retries permitted until')
      expect(again.message).toContain('Last error: "boom"')
    }
    expect(ops.isOperationSafeToRetry(key('vol'), 'volume_mount')).toBe(false)
    expect(ops.isOperationSafeToRetry(key('vol'), 'volume_unmount')).toBe(true)
    expect(ops.run(key('vol'), 'volume_unmount', never).status).toBe('started')
  })

  it('doubles the wait on each consecutive failure and forgets it on success', async () => {
    const clock = createFakeClock()
    const ops = new PendingOperations({ clock })
    const waits: number[] = []
    for (let i = 0; i < 3; i++) {
      await clock.advance(10_000)
      const r = ops.run(key('vol'), 'op', async () => {
        throw new Error('x')
      })
      if (r.status === 'started') await r.done
      waits.push((ops.retryAt(key('vol')) ?? 0) - clock.now())
    }
    expect(waits).toEqual([500, 1000, 2000])
    expect(ops.lastFailure(key('vol'))).toMatchObject({ name: 'op', attempts: 3, durationMs: 2000 })
    await clock.advance(10_000)
    const ok = ops.run(key('vol'), 'op', async () => {})
    if (ok.status === 'started') await ok.done
    expect(ops.retryAt(key('vol'))).toBeUndefined()
    const r = ops.run(key('vol'), 'op', async () => {
      throw new Error('x')
    })
    if (r.status === 'started') await r.done
    expect((ops.retryAt(key('vol')) ?? 0) - clock.now()).toBe(500)
  })

  it.each([
    {
      name: 'rejects',
      operation: async (): Promise<void> => {
        throw new Error('boom')
      },
    },
    {
      name: 'throws before returning a promise',
      operation: (): Promise<void> => {
        throw new Error('boom')
      },
    },
  ])('an operation that $name ends, fails and backs off', async ({ operation }) => {
    const clock = createFakeClock()
    const ops = new PendingOperations({ clock })
    const result = ops.run(key('vol'), 'op', operation)
    expect(result.status).toBe('started')
    if (result.status === 'started') await result.done
    expect(ops.runningCount).toBe(0)
    expect(ops.isOperationPending(key('vol'))).toBe(false)
    expect(ops.lastFailure(key('vol'))).toMatchObject({ name: 'op', attempts: 1, durationMs: 500 })
  })

  it('records the operation as pending before the first await', () => {
    const ops = new PendingOperations({ clock: createFakeClock() })
    ops.run(key('vol'), 'op', async () => {})
    expect(ops.isOperationPending(key('vol'))).toBe(true)
  })

  it('wait() resolves when every operation has ended', async () => {
    const ops = new PendingOperations({ clock: createFakeClock() })
    let release!: () => void
    ops.run(key('a'), 'op', () => new Promise<void>((r) => (release = r)))
    let idle = false
    const waiting = ops.wait().then(() => (idle = true))
    await Promise.resolve()
    expect(idle).toBe(false)
    release()
    await waiting
    expect(idle).toBe(true)
    expect(ops.runningCount).toBe(0)
  })
})
