import { describe, expect, it } from 'vitest'
import type { VolumeSpec } from '../api/volume-spec.js'
import { crc32 } from './crc32.js'
import { type JournalRecord, parseJournal, replay } from './journal.js'

const spec: VolumeSpec = { name: 'v', readOnly: false }
const line = (record: JournalRecord): string => {
  const json = JSON.stringify(record)
  return `${crc32(new TextEncoder().encode(json)).toString(16).padStart(8, '0')} ${json}\n`
}
const attached: JournalRecord = { kind: 'attached', volume: 'p/v', spec, devicePath: '/dev/loop0' }
const device: JournalRecord = { kind: 'device', volume: 'p/v', spec, devicePath: '/dev/loop0', path: '/g/v' }
const setup: JournalRecord = { kind: 'setup', volume: 'p/v', pod: 'a', podUID: 'a', outerName: 'v', spec, gid: '' }

describe('crc32', () => {
  it('matches the IEEE check value', () => {
    expect(crc32(new TextEncoder().encode('123456789'))).toBe(0xcbf43926)
  })
})

describe('parseJournal', () => {
  it('reads every whole record', () => {
    expect(parseJournal(line(attached) + line(device)).records).toEqual([attached, device])
  })

  it.each([
    { name: 'a torn last record (no newline)', text: line(attached) + line(device).slice(0, 20), records: 1, dropped: 1 },
    { name: 'a corrupt record and what follows it', text: line(attached) + line(device).replace('loop0', 'loop9') + line(setup), records: 1, dropped: 2 },
    { name: 'garbage', text: 'not a journal\n', records: 0, dropped: 1 },
    { name: 'nothing', text: '', records: 0, dropped: 0 },
  ])('drops $name', ({ text, records, dropped }) => {
    const result = parseJournal(text)
    expect(result.records).toHaveLength(records)
    expect(result.dropped).toBe(dropped)
  })

  it('survives a crash at any byte of the last record', () => {
    const whole = line(attached) + line(device)
    for (let cut = line(attached).length; cut < whole.length; cut++) {
      expect(parseJournal(whole.slice(0, cut)).records).toEqual([attached])
    }
    expect(parseJournal(whole).records).toEqual([attached, device])
  })
})

describe('replay', () => {
  it('keeps what may still exist and forgets what was undone', () => {
    const state = replay([attached, device, setup, { kind: 'torn-down', volume: 'p/v', pod: 'a' }])
    expect(state.get('p/v')?.pods.size).toBe(0)
    expect(state.get('p/v')?.device?.path).toBe('/g/v')
    replay([{ kind: 'device-unmounted', volume: 'p/v' }, { kind: 'detached', volume: 'p/v' }], state)
    expect(state.size).toBe(0)
  })
})
