import { describe, expect, it } from 'vitest'
import { yieldToEventLoop } from '../clock.js'
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

/** Operations a test ends by hand, recording the order they started in. */
function controlled() {
  const started: string[] = []
  const ends = new Map<string, { resolve: () => void; reject: (err: Error) => void }>()
  const op = (name: string) => (): Promise<void> => {
    started.push(name)
    return new Promise<void>((resolve, reject) => ends.set(name, { resolve, reject }))
  }
  const end = async (name: string, err?: Error): Promise<void> => {
    const e = ends.get(name)
    if (!e) throw new Error(`${name} has not started`)
    if (err) e.reject(err)
    else e.resolve()
    await yieldToEventLoop()
  }
  return { started, op, end }
}

describe('PendingOperations with a bound on the operations running', () => {
  it.each([
    { name: 'no bound (default)', maxRunning: undefined, started: 4 },
    { name: '0: no bound', maxRunning: 0, started: 4 },
    { name: 'Infinity: no bound', maxRunning: Number.POSITIVE_INFINITY, started: 4 },
    { name: 'a bound of 2', maxRunning: 2, started: 2 },
  ])('$name: starts $started of 4 at once; every one is pending for its key', ({ maxRunning, started }) => {
    const ops = new PendingOperations({ clock: createFakeClock(), maxRunning })
    const c = controlled()
    for (const v of ['a', 'b', 'c', 'd']) expect(ops.run(key(v), 'op', c.op(v)).status).toBe('started')
    expect(c.started).toHaveLength(started)
    expect(ops.runningCount).toBe(started)
    expect(ops.queuedCount).toBe(4 - started)
    for (const v of ['a', 'b', 'c', 'd']) expect(ops.isOperationPending(key(v))).toBe(true)
  })

  it('a queued operation refuses a second start of its key with the kubelet message, and starts in admission order', async () => {
    const ops = new PendingOperations({ clock: createFakeClock(), maxRunning: 1 })
    const c = controlled()
    ops.run(key('a'), 'op', c.op('a'))
    ops.run(key('b', 'pod1'), 'op', c.op('b'))
    ops.run(key('c'), 'op', c.op('c'))
    expect(ops.run(key('b'), 'op', c.op('b again'))).toEqual({
      status: 'already-pending',
      message: 'Failed to create operation with name {volumeName:b podName: nodeName:}. An operation with that name is already executing.',
    })
    expect(ops.isOperationSafeToRetry(key('b', 'pod1'), 'op')).toBe(false)
    await c.end('a')
    expect(c.started).toEqual(['a', 'b'])
    // A slot freed while others wait goes to the oldest of them, not to one admitted after it.
    ops.run(key('d'), 'op', c.op('d'))
    await c.end('b')
    expect(c.started).toEqual(['a', 'b', 'c'])
    await c.end('c')
    await c.end('d')
    expect(c.started).toEqual(['a', 'b', 'c', 'd'])
    expect(ops.runningCount + ops.queuedCount).toBe(0)
  })

  it('an operation running past slowAfterMs frees its slot, so one that never ends holds nothing back', async () => {
    const clock = createFakeClock()
    const ops = new PendingOperations({ clock, maxRunning: 2, slowAfterMs: 100 })
    const c = controlled()
    ops.run(key('hung'), 'op', never)
    await clock.advance(50)
    for (const v of ['a', 'b', 'c']) ops.run(key(v), 'op', c.op(v))
    expect(c.started).toEqual(['a'])
    await clock.advance(49)
    expect(c.started).toEqual(['a'])
    await clock.advance(1)
    expect(c.started).toEqual(['a', 'b'])
    expect(ops.runningCount).toBe(3)
    // 'a' started at 50 ms and turns slow at 150: the one timer is set again for it.
    await clock.advance(50)
    expect(c.started).toEqual(['a', 'b', 'c'])
    await c.end('a')
    await c.end('b')
    await c.end('c')
    expect(ops.queuedCount).toBe(0)
    expect(ops.runningCount).toBe(1)
    expect(ops.isOperationPending(key('hung'))).toBe(true)
  })

  it('sets one timer while operations wait, and none once the queue is empty', async () => {
    const clock = createFakeClock()
    const ops = new PendingOperations({ clock, maxRunning: 1, slowAfterMs: 1000 })
    const c = controlled()
    ops.run(key('a'), 'op', c.op('a'))
    expect(clock.pendingTimers()).toEqual([])
    for (const v of ['b', 'c', 'd']) ops.run(key(v), 'op', c.op(v))
    expect(clock.pendingTimers()).toEqual([clock.now() + 1000])
    for (const v of ['a', 'b', 'c']) await c.end(v)
    expect(c.started).toEqual(['a', 'b', 'c', 'd'])
    // Nothing waits: no timer is left to keep a process alive.
    expect(clock.pendingTimers()).toEqual([])
  })

  it('done and wait() settle when a queued operation has run and ended', async () => {
    const ops = new PendingOperations({ clock: createFakeClock(), maxRunning: 1 })
    const c = controlled()
    ops.run(key('a'), 'op', c.op('a'))
    const queued = ops.run(key('b'), 'op', c.op('b'))
    const order: string[] = []
    if (queued.status === 'started') void queued.done.then(() => order.push('done'))
    void ops.wait().then(() => order.push('idle'))
    await c.end('a')
    expect(order).toEqual([])
    expect(ops.runningCount).toBe(1)
    await c.end('b')
    expect(order).toEqual(['done', 'idle'])
  })

  it('a queued operation that fails backs off as any other', async () => {
    const clock = createFakeClock()
    const ops = new PendingOperations({ clock, maxRunning: 1 })
    const c = controlled()
    ops.run(key('a'), 'op', c.op('a'))
    ops.run(key('b'), 'volume_mount', c.op('b'))
    await c.end('a')
    await c.end('b', new Error('boom'))
    expect(ops.isOperationPending(key('b'))).toBe(false)
    expect(ops.lastFailure(key('b'))).toMatchObject({ name: 'volume_mount', attempts: 1, durationMs: 500 })
    expect(ops.run(key('b'), 'volume_mount', never).status).toBe('backing-off')
  })

  it('an operation that throws when its turn comes ends, and the next starts', async () => {
    const ops = new PendingOperations({ clock: createFakeClock(), maxRunning: 1 })
    const c = controlled()
    ops.run(key('a'), 'op', c.op('a'))
    ops.run(key('b'), 'op', () => {
      throw new Error('at once')
    })
    ops.run(key('c'), 'op', c.op('c'))
    await c.end('a')
    expect(c.started).toEqual(['a', 'c'])
    expect(ops.lastFailure(key('b'))).toMatchObject({ attempts: 1 })
    expect(ops.runningCount).toBe(1)
  })
})
