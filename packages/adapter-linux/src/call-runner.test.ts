import { HostError } from '@kubevol/core'
import { createFakeClock } from '@kubevol/core/testing'
import { describe, expect, it } from 'vitest'
import { CallRunner } from './call-runner.js'

function deferred<T>() {
  let resolve!: (value: T) => void
  const promise = new Promise<T>((r) => {
    resolve = r
  })
  return { promise, resolve }
}

function harness(maxStalledCalls = 3) {
  const clock = createFakeClock()
  const runner = new CallRunner({ clock, timeoutMs: 1000, maxStalledCalls })
  return { clock, runner }
}

const outcome = (promise: Promise<unknown>) =>
  promise.then(
    (value) => ({ value }),
    (error: HostError) => ({ code: error.code, message: error.message }),
  )

describe('CallRunner (fake clock)', () => {
  it('passes a result through before the deadline and leaves nothing stalled', async () => {
    const { runner } = harness()
    expect(await runner.run('stat', '/a', '/', async () => 42)).toBe(42)
    expect(runner.stalled()).toEqual([])
  })

  it('rejects with ETIMEDOUT at the deadline, keeps the call as stalled until it returns', async () => {
    const { clock, runner } = harness()
    const hung = deferred<string>()
    const result = outcome(runner.run('read', '/nfs/f', '/nfs', () => hung.promise))
    await clock.advance(999)
    expect(runner.stalled()).toEqual([])
    await clock.advance(1)
    expect(await result).toEqual({ code: 'ETIMEDOUT', message: 'ETIMEDOUT: read /nfs/f: no answer within 1000 ms; the call is left to finish in the background' })
    expect(runner.stalled()).toEqual([{ syscall: 'read', path: '/nfs/f', key: '/nfs', since: clock.now() - 1000 }])
    hung.resolve('late')
    await clock.flush()
    expect(runner.stalled()).toEqual([])
  })

  it('each call keeps its own deadline: calls started together time out together, one started later later', async () => {
    const { clock, runner } = harness(10)
    const hung = deferred<void>()
    const settled: string[] = []
    const track = (name: string, promise: Promise<unknown>) => promise.then(() => settled.push(`${name} ok`), () => settled.push(`${name} timed out`))
    const done = deferred<number>()
    track('a', runner.run('stat', '/x/a', '/x', () => hung.promise))
    track('b', runner.run('stat', '/x/b', '/x', () => hung.promise))
    track('answered', runner.run('stat', '/x/c', '/x', () => done.promise))
    await clock.advance(400)
    track('later', runner.run('stat', '/y/d', '/y', () => hung.promise))
    done.resolve(1)
    await clock.advance(599)
    expect(settled).toEqual(['answered ok'])
    await clock.advance(1)
    expect(settled).toEqual(['answered ok', 'a timed out', 'b timed out'])
    await clock.advance(399)
    expect(settled).toHaveLength(3)
    await clock.advance(1)
    expect(settled.at(-1)).toBe('later timed out')
    expect(runner.stalled().map((c) => c.path)).toEqual(['/x/a', '/x/b', '/y/d'])
  })

  it('times every call in flight with one timer, set for the oldest unanswered call, and leaves none when nothing is in flight', async () => {
    const { clock, runner } = harness(10)
    const hung = deferred<void>()
    const answers = Array.from({ length: 500 }, () => deferred<number>())
    const slow = outcome(runner.run('stat', '/x/slow', '/x', () => hung.promise))
    const quick = answers.map((answer, i) => runner.run('stat', `/x/${i}`, '/x', () => answer.promise))
    expect(clock.pendingTimers()).toEqual([clock.now() + 1000])
    await clock.advance(300)
    const late = outcome(runner.run('stat', '/x/late', '/x', () => hung.promise))
    for (const [i, answer] of answers.entries()) answer.resolve(i)
    expect(await Promise.all(quick)).toEqual(answers.map((_, i) => i))
    // The slow call's deadline is still the one the timer is set for; the late call's comes 300 ms after.
    expect(clock.pendingTimers()).toHaveLength(1)
    await clock.advance(700)
    expect(await slow).toMatchObject({ code: 'ETIMEDOUT' })
    expect(clock.pendingTimers()).toEqual([clock.now() + 300])
    hung.resolve()
    await clock.flush()
    // The late call was answered (the hung work returned) before its deadline: no timer is left.
    expect(await late).toEqual({ value: undefined })
    expect(clock.pendingTimers()).toEqual([])
    expect(runner.inFlight).toBe(0)
    expect(runner.stalled()).toEqual([])
  })

  it('a call whose start throws fails with the mapped error and leaves no timer', async () => {
    const { clock, runner } = harness()
    const mapped = await outcome(
      runner.run(
        'lstat',
        '/a',
        '/',
        () => {
          throw new Error('boom')
        },
        undefined,
        (err, syscall, path) => new HostError('EIO', syscall, path, (err as Error).message),
      ),
    )
    expect(mapped).toEqual({ code: 'EIO', message: 'EIO: lstat /a: boom' })
    const failed = await outcome(runner.run('lstat', '/b', '/', () => Promise.reject(new Error('late boom')), undefined, (err, syscall, path) => new HostError('EIO', syscall, path, (err as Error).message)))
    expect(failed).toEqual({ code: 'EIO', message: 'EIO: lstat /b: late boom' })
    expect(clock.pendingTimers()).toEqual([])
    expect(runner.inFlight).toBe(0)
  })

  it('quarantines the stalled filesystem only: calls there fail fast, calls elsewhere run', async () => {
    const { clock, runner } = harness()
    const hung = deferred<void>()
    const first = outcome(runner.run('stat', '/nfs/a', '/nfs', () => hung.promise))
    await clock.advance(1000)
    await first
    let started = false
    const again = await outcome(
      runner.run('stat', '/nfs/b', '/nfs', async () => {
        started = true
      }),
    )
    expect(started).toBe(false)
    expect(again).toMatchObject({ code: 'ETIMEDOUT' })
    expect((again as { message: string }).message).toContain('the filesystem at /nfs is not answering: stat /nfs/a has been blocked for')
    expect(await runner.run('stat', '/var/lib/x', '/', async () => 'ok')).toBe('ok')
    hung.resolve()
    await clock.flush()
    expect(await runner.run('stat', '/nfs/b', '/nfs', async () => 'back')).toBe('back')
  })

  it('refuses every call once maxStalledCalls threads are stalled, so the pool keeps free threads', async () => {
    const { clock, runner } = harness(2)
    const a = deferred<void>()
    const b = deferred<void>()
    const results = [outcome(runner.run('stat', '/a/x', '/a', () => a.promise)), outcome(runner.run('stat', '/b/x', '/b', () => b.promise))]
    await clock.advance(1000)
    await Promise.all(results)
    expect(await outcome(runner.run('stat', '/c/x', '/c', async () => 'never'))).toMatchObject({ code: 'ETIMEDOUT', message: expect.stringContaining('2 calls are blocked in the kernel') })
    a.resolve()
    await clock.flush()
    expect(await runner.run('stat', '/c/x', '/c', async () => 'ok')).toBe('ok')
  })

  it('uses the refined key once the call stalls', async () => {
    const { clock, runner } = harness()
    const hung = deferred<void>()
    const first = outcome(runner.run('read', '/m/fifo', '/', () => hung.promise, async () => '/m'))
    await clock.advance(1000)
    await first
    expect(runner.stalled()[0]?.key).toBe('/m')
    expect(await runner.run('stat', '/other', '/', async () => 'root still usable')).toBe('root still usable')
    hung.resolve()
    await clock.flush()
  })

  it('a call still queued at its deadline is taken back: "not made", not stalled, and counted in flight only until then', async () => {
    const { clock, runner } = harness()
    const hung = deferred<string>()
    const first = outcome(runner.run('lstat', '/fuse/a', '/fuse', () => hung.promise))
    await clock.advance(10)
    let reject: (err: unknown) => void = () => {}
    const queued = outcome(
      runner.run('lstat', '/fuse/b', '/fuse', (call) => {
        call.cancel = () => {
          reject(new Error('taken back'))
          return true
        }
        return new Promise((_, r) => (reject = r))
      }),
    )
    expect(runner.inFlight).toBe(2)
    await clock.advance(990)
    expect((await first).code).toBe('ETIMEDOUT')
    await clock.advance(10)
    expect(await queued).toEqual({ code: 'ETIMEDOUT', message: 'ETIMEDOUT: lstat /fuse/b: not made: it waited 1000 ms behind lstat /fuse/a, blocked for 1010 ms on the filesystem at /fuse' })
    await clock.flush()
    expect(runner.stalled().map((c) => c.path)).toEqual(['/fuse/a'])
    expect(runner.inFlight).toBe(1)
    hung.resolve('late')
    await clock.flush()
    expect(runner.inFlight).toBe(0)
  })

  it('passes a failure through unchanged', async () => {
    const { runner } = harness()
    const error = new HostError('ENOENT', 'stat', '/x')
    await expect(runner.run('stat', '/x', '/', () => Promise.reject(error))).rejects.toBe(error)
  })
})
