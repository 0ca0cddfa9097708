import { describe, expect, it } from 'vitest'
import { ExponentialBackoff, MAX_DURATION_BEFORE_RETRY_MS } from './backoff.js'

describe('ExponentialBackoff', () => {
  it('waits 0.5 s, doubling per failure, capped at 2 min 2 s', () => {
    const backoff = new ExponentialBackoff()
    const seen: number[] = []
    for (let i = 0; i < 11; i++) {
      backoff.update(new Error('x'), 0)
      seen.push(backoff.durationBeforeRetry)
    }
    expect(seen).toEqual([500, 1000, 2000, 4000, 8000, 16000, 32000, 64000, 122000, 122000, 122000])
    expect(MAX_DURATION_BEFORE_RETRY_MS).toBe(122_000)
  })

  it.each([
    { name: 'fresh record', failures: 0, elapsed: 0, safe: true },
    { name: 'inside the window', failures: 1, elapsed: 499, safe: false },
    { name: 'at the boundary (kubelet compares with <=)', failures: 1, elapsed: 500, safe: false },
    { name: 'after the window', failures: 1, elapsed: 501, safe: true },
    { name: 'second failure still waiting', failures: 2, elapsed: 900, safe: false },
  ])('safeToRetry: $name', ({ failures, elapsed, safe }) => {
    const backoff = new ExponentialBackoff()
    for (let i = 0; i < failures; i++) backoff.update(new Error('x'), 1000)
    expect(backoff.safeToRetry(1000 + elapsed)).toBe(safe)
  })
})
