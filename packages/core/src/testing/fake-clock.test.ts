import { describe, expect, it } from 'vitest'
import { createFakeClock } from './fake-clock.js'

describe('createFakeClock', () => {
  it('fires timers in due order and settles promise chains in between', async () => {
    const clock = createFakeClock(0)
    const seen: string[] = []
    clock.setTimer(300, () => seen.push('b'))
    clock.setTimer(100, () => {
      seen.push('a')
      void Promise.resolve().then(() => clock.setTimer(100, () => seen.push('a2')))
    })
    const cancelled = clock.setTimer(150, () => seen.push('never'))
    cancelled.cancel()
    await clock.advance(250)
    expect(seen).toEqual(['a', 'a2'])
    expect(clock.now()).toBe(250)
    await clock.advance(50)
    expect(seen).toEqual(['a', 'a2', 'b'])
  })

  it('sleep resolves after the time and rejects on abort', async () => {
    const clock = createFakeClock(0)
    let slept = false
    void clock.sleep(1000).then(() => (slept = true))
    await clock.advance(999)
    expect(slept).toBe(false)
    await clock.advance(1)
    expect(slept).toBe(true)
    const controller = new AbortController()
    const aborted = clock.sleep(1000, controller.signal).catch((e: unknown) => `aborted: ${String(e)}`)
    controller.abort('stop')
    expect(await aborted).toBe('aborted: stop')
    expect(clock.pendingTimers()).toEqual([])
  })
})
