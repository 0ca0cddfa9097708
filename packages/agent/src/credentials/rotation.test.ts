import { describe, expect, it } from 'vitest'
import { rotationDeadline, rotationRetryMs } from './rotation.js'

describe('rotationDeadline', () => {
  const cert = { notBefore: 1_000_000, notAfter: 1_000_000 + 100_000 }
  it.each([
    ['the earliest draw', 0, 70_000],
    ['the middle', 0.5, 80_000],
    ['the latest draw', 0.999_999, 89_999.98],
  ])('%s renews at 70-90%% of the lifetime', (_name, random, offset) => {
    expect(rotationDeadline(cert, () => random)).toBeCloseTo(cert.notBefore + offset, 1)
  })

  it('is never before 70% nor after 90% of a year-long certificate', () => {
    const year = { notBefore: 0, notAfter: 365 * 86_400_000 }
    for (let i = 0; i < 1000; i++) {
      const at = rotationDeadline(year)
      expect(at).toBeGreaterThanOrEqual(0.7 * year.notAfter)
      expect(at).toBeLessThan(0.9 * year.notAfter)
    }
  })
})

describe('rotationRetryMs', () => {
  it.each([
    [0, 0, 2_000],
    [1, 0, 4_000],
    [2, 0, 8_000],
    [3, 0, 16_000],
    [3, 0.999_999, 17_599.998],
    [4, 0.5, 32_000],
    [40, 0.5, 32_000],
  ])('after failed request %i (random %f) waits %f ms', (attempt, random, ms) => {
    expect(rotationRetryMs(attempt, () => random)).toBeCloseTo(ms, 2)
  })
})
