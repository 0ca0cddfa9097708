import { describe, expect, it } from 'vitest'
import { createFakeClock } from '../../testing/fake-clock.js'
import { CSI_DEFAULT_TIMEOUT_MS, withDeadline } from './deadline.js'

describe('withDeadline', () => {
  it('fails with DeadlineExceeded after 2 minutes and tells the transport the deadline', async () => {
    const clock = createFakeClock()
    let told = 0
    const result = withDeadline(clock, CSI_DEFAULT_TIMEOUT_MS, (o) => {
      told = o.timeoutMs
      return new Promise<never>(() => {})
    }).catch((err: unknown) => err)
    await clock.advance(CSI_DEFAULT_TIMEOUT_MS - 1)
    await clock.advance(1)
    expect(String(await result)).toContain('code = DeadlineExceeded')
    expect(told).toBe(120_000)
  })

  it('returns the answer that comes first', async () => {
    const clock = createFakeClock()
    await expect(withDeadline(clock, 10, async () => 'ok')).resolves.toBe('ok')
  })
})
