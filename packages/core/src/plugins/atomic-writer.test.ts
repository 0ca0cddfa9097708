import { describe, expect, it } from 'vitest'
import { createFakeClock } from '../testing/fake-clock.js'
import { unreachableHost } from '../testing/plugin-context.js'
import { isTimestampDirName, timestampDirName, writeAtomically } from './atomic-writer.js'

// The writer itself runs on the in-memory host in test/scenarios/atomic-writer.test.ts.
describe('version directory names', () => {
  it.each([
    { ms: Date.UTC(2026, 10, 29, 10, 0, 0, 123), sequence: 0, name: '..2026_11_29_10_00_00.123000000' },
    { ms: Date.UTC(2026, 0, 2, 3, 4, 5, 6), sequence: 42, name: '..2026_01_02_03_04_05.006000042' },
  ])('$name', ({ ms, sequence, name }) => {
    expect(timestampDirName(ms, sequence)).toBe(name)
    expect(isTimestampDirName(name)).toBe(true)
  })

  it.each(['..data', '..data_tmp', 'data', '..2026_11_29_10_00_00', '..2026_11_29_10_00_00.', '..2016_02_01_15_04_05.12345678'])(
    'recognises the kubelet form only: %s',
    (name) => {
      expect(isTimestampDirName(name)).toBe(name === '..2016_02_01_15_04_05.12345678')
    },
  )
})

describe('writeAtomically', () => {
  it('rejects an invalid payload before touching the host', async () => {
    const payload = new Map([['../escape', { data: 'x', mode: 0o644 }]])
    await expect(writeAtomically(unreachableHost, '/v', payload, { clock: createFakeClock() })).rejects.toThrow(
      "invalid path: must not contain '..': ../escape",
    )
  })
})
