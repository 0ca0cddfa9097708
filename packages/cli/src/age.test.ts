import { describe, expect, it } from 'vitest'
import { ageOf, eventAge, humanDuration, untilOf } from './age.js'

const S = 1_000
const M = 60 * S
const H = 60 * M
const D = 24 * H

describe('humanDuration, as kubectl shows ages', () => {
  it.each([
    [-500, '0s'],
    [-5 * S, '<invalid>'],
    [0, '0s'],
    [12 * S, '12s'],
    [119 * S, '119s'],
    [2 * M, '2m'],
    [5 * M + 30 * S, '5m30s'],
    [45 * M, '45m'],
    [3 * H + 20 * M, '3h20m'],
    [30 * H, '30h'],
    [3 * D + 4 * H, '3d4h'],
    [100 * D, '100d'],
    [3 * 365 * D + 10 * D, '3y10d'],
    [10 * 365 * D, '10y'],
  ])('%d ms is %s', (ms, text) => {
    expect(humanDuration(ms)).toBe(text)
  })
})

describe('ages of times', () => {
  const now = Date.parse('2026-01-01T00:01:00Z')
  it('reads ms and ISO times, and says nothing for none', () => {
    expect(ageOf(now - 12 * S, now)).toBe('12s')
    expect(ageOf('2026-01-01T00:00:00Z', now)).toBe('60s')
    expect(ageOf(undefined, now)).toBe('')
  })

  it('says when a retry comes', () => {
    expect(untilOf(now + 8 * S, now)).toBe('in 8s')
    expect(untilOf(now + 200, now)).toBe('in 1s')
    expect(untilOf(now - 1, now)).toBe('now')
  })

  it('shows a repeated event as kubectl describe does', () => {
    expect(eventAge({ count: 4, firstTimestamp: now - 30 * S, lastTimestamp: now - 12 * S }, now)).toBe('12s (x4 over 30s)')
    expect(eventAge({ count: 1, firstTimestamp: now - 5 * M, lastTimestamp: now - 5 * M }, now)).toBe('5m')
  })
})
