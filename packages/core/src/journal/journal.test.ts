import { describe, expect, it } from 'vitest'
import type { VolumeSpec } from '../api/volume-spec.js'
import { SmallMap } from '../cache/small-map.js'
import { crc32 } from './crc32.js'
import { crc32Utf8 } from './crc32-utf8.js'
import { HostError } from '../errors.js'
import type { Host } from '../host/host.js'
import { silentLogger } from '../observability.js'
import { type JournalRecord, type JournalVolume, VolumeJournal, parseJournal, replay } from './journal.js'
import { JournalState } from './journal-state.js'
import { decodeUtf8 } from '../text.js'
import { createFakeClock } from '../testing/fake-clock.js'

const spec: VolumeSpec = { name: 'v', readOnly: false }
const line = (record: JournalRecord): string => {
  const json = JSON.stringify(record)
  return `${crc32(new TextEncoder().encode(json)).toString(16).padStart(8, '0')} ${json}\n`
}
const attached: JournalRecord = { kind: 'attached', volume: 'p/v', spec, devicePath: '/dev/loop0' }
const device: JournalRecord = { kind: 'device', volume: 'p/v', spec, devicePath: '/dev/loop0', path: '/g/v' }
type Setup = Extract<JournalRecord, { kind: 'setup' }>
const setup: Setup = { kind: 'setup', volume: 'p/v', pod: 'a', podUID: 'a', outerName: 'v', spec, gid: '' }

describe('crc32', () => {
  it('matches the IEEE check value', () => {
    expect(crc32(new TextEncoder().encode('123456789'))).toBe(0xcbf43926)
  })

  it.each([
    { name: 'empty', text: '' },
    { name: 'ASCII', text: '{"kind":"setup","volume":"kubernetes.io/empty-dir/uid-v"}' },
    { name: 'two-byte characters', text: 'größe ñ ©' },
    { name: 'three-byte characters', text: 'ボリューム €' },
    { name: 'a surrogate pair', text: 'disk 💾 ok' },
    { name: 'a lone high surrogate', text: 'a\ud800b' },
    { name: 'a lone low surrogate', text: 'a\udc00b' },
    { name: 'a high surrogate at the end', text: 'ab\ud83d' },
    { name: 'the edges of each UTF-8 length', text: '\u007f\u0080\u07ff\u0800\uffff\ud7ff\ue000' },
  ])('of text equals the CRC of its UTF-8 bytes: $name', ({ text }) => {
    expect(crc32Utf8(text)).toBe(crc32(new TextEncoder().encode(text)))
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
    const undone: JournalRecord[] = [attached, device, setup, { kind: 'torn-down', volume: 'p/v', pod: 'a' }]
    const state = replay(undone)
    expect(state.get('p/v')?.pods.size).toBe(0)
    expect(state.get('p/v')?.device?.path).toBe('/g/v')
    expect(replay([...undone, { kind: 'device-unmounted', volume: 'p/v' }, { kind: 'detached', volume: 'p/v' }]).size).toBe(0)
  })
})

/** The live records of a replayed state, volume by volume: attachment, device, then set-ups. */
function liveRecords(state: ReadonlyMap<string, JournalVolume>): JournalRecord[] {
  const records: JournalRecord[] = []
  for (const v of state.values()) {
    if (v.attached) records.push({ kind: 'attached', volume: v.volume, spec: v.spec, devicePath: v.attached.devicePath })
    if (v.device) records.push({ kind: 'device', volume: v.volume, spec: v.spec, ...v.device })
    for (const [pod, p] of v.pods) records.push({ kind: 'setup', volume: v.volume, pod, ...p })
  }
  return records
}

/**
 * The journal's rules written the plain way, one JournalVolume per volume: the model the compact
 * state is checked against.
 */
function modelReplay(records: Iterable<JournalRecord>, state = new Map<string, JournalVolume>()): Map<string, JournalVolume> {
  const volume = (name: string, spec?: VolumeSpec): JournalVolume | undefined => {
    let v = state.get(name)
    if (!v && spec) state.set(name, (v = { volume: name, spec, pods: new SmallMap() }))
    if (v && spec) v.spec = spec
    return v
  }
  for (const r of records) {
    switch (r.kind) {
      case 'attached': {
        const v = volume(r.volume, r.spec)
        if (v) v.attached = { devicePath: r.devicePath }
        break
      }
      case 'device': {
        const v = volume(r.volume, r.spec)
        if (v) v.device = { devicePath: r.devicePath, path: r.path }
        break
      }
      case 'setup':
        volume(r.volume, r.spec)?.pods.set(r.pod, { podUID: r.podUID, outerName: r.outerName, spec: r.spec, gid: r.gid })
        break
      case 'torn-down':
        state.get(r.volume)?.pods.delete(r.pod)
        break
      case 'device-unmounted': {
        const v = state.get(r.volume)
        if (v) v.device = undefined
        break
      }
      case 'detached':
        state.delete(r.volume)
        break
    }
    const v = state.get(r.volume)
    if (v && !v.attached && !v.device && v.pods.size === 0) state.delete(r.volume)
  }
  return state
}

describe('JournalState', () => {
  const spec2: VolumeSpec = { name: 'v2', readOnly: true }
  const setupB: JournalRecord = { kind: 'setup', volume: 'p/v', pod: 'b', podUID: 'b', outerName: 'w', spec: spec2, gid: '7' }
  const other: JournalRecord = { kind: 'setup', volume: 'p/w', pod: 'a', podUID: 'a', outerName: 'w', spec, gid: '' }
  const tornA: JournalRecord = { kind: 'torn-down', volume: 'p/v', pod: 'a' }
  const tornB: JournalRecord = { kind: 'torn-down', volume: 'p/v', pod: 'b' }
  // A pod UID that is not the pod's name, an outer name that is not the spec's, a gid: what the
  // packed entry keeps apart.
  const own: Setup = { kind: 'setup', volume: 'p/v', pod: 'a', podUID: 'uid-a', outerName: 'claim', spec, gid: '9' }

  // The state keeps a volume with one set-up and nothing else as that record; whatever the
  // records, it must say what `replay` says and give back the same live records.
  it.each([
    { name: 'one set-up', records: [setup] },
    { name: 'a set-up written again', records: [setup, setup] },
    { name: 'a set-up torn down', records: [setup, tornA] },
    { name: 'another pod torn down', records: [setup, tornB] },
    { name: 'two pods, then one torn down', records: [setup, setupB, tornA] },
    { name: 'two pods, both torn down', records: [setup, setupB, tornA, tornB] },
    { name: 'a set-up, then the device', records: [other, setup, device] },
    { name: 'a device, then a set-up', records: [device, setup] },
    { name: 'attached, device and set-up', records: [attached, device, setup, setupB] },
    { name: 'a device unmounted under a set-up', records: [setup, { kind: 'device-unmounted', volume: 'p/v' }] },
    { name: 'a device unmounted and torn down', records: [device, setup, { kind: 'device-unmounted', volume: 'p/v' }, tornA] },
    { name: 'detached', records: [attached, setup, other, { kind: 'detached', volume: 'p/v' }] },
    { name: 'set up again after being forgotten', records: [setup, tornA, other, setupB] },
    { name: 'a set-up with its own UID, outer name and gid', records: [own] },
    { name: 'a set-up with its own UID, then another pod', records: [own, setupB] },
  ] satisfies { name: string; records: JournalRecord[] }[])('agrees with replay: $name', ({ records }) => {
    const state = new JournalState()
    for (const record of records) state.apply(record)
    const expected = modelReplay(records)
    expect(replay(records)).toEqual(expected)
    expect(replay(state.records())).toEqual(expected)
    // Compaction writes these records: byte for byte what the per-volume form gives.
    expect(JSON.stringify(state.records())).toBe(JSON.stringify(liveRecords(expected)))
    expect(state.recordCount).toBe(state.records().length)
    for (const volume of ['p/v', 'p/w']) {
      for (const pod of ['a', 'b']) expect(state.hasSetup(volume, pod)).toBe(expected.get(volume)?.pods.has(pod) ?? false)
    }
  })

  it.each([
    { name: 'the usual', record: setup },
    { name: 'its own UID, outer name and gid', record: own },
    { name: 'only a gid', record: { ...setup, gid: '7' } },
    { name: 'only another outer name', record: { ...setup, outerName: 'w' } },
  ] satisfies { name: string; record: Setup }[])('writes a lone set-up back as the record it was given: $name', ({ record }) => {
    const state = new JournalState()
    state.apply(record)
    expect(JSON.stringify(state.records())).toBe(JSON.stringify([record]))
    expect(state.volumes().get('p/v')?.pods.get('a')).toEqual({ podUID: record.podUID, outerName: record.outerName, spec, gid: record.gid })
  })
})

/**
 * A host that keeps the journal's appends, each with whether it was synced; every append waits for
 * `release` (with `held: false`, none waits).
 */
function appendingHost({ held = true } = {}) {
  const appends: { text: string; sync: boolean }[] = []
  let release: () => void = () => undefined
  const host = {
    readFile: async (path: string) => {
      throw new HostError('ENOENT', 'open', path, 'no such file or directory')
    },
    mkdir: async () => undefined,
    writeFile: async () => undefined,
    rename: async () => undefined,
    appendFile: (_: string, data: string | Uint8Array, options?: { readonly sync?: boolean }) => {
      appends.push({ text: typeof data === 'string' ? data : decodeUtf8(data), sync: options?.sync === true })
      if (!held) return Promise.resolve()
      return new Promise<void>((resolve) => {
        release = resolve
      })
    },
  } as unknown as Host
  return { host, appends, release: () => release() }
}

describe('VolumeJournal.record', () => {

  it('with sync: false, writes the record without a sync and resolves once it is written', async () => {
    const { host, appends, release } = appendingHost()
    const journal = await VolumeJournal.open({ host, path: '/j/volumes.log', logger: silentLogger })
    const written = journal.record(setup, { sync: false })
    await Promise.resolve()
    expect(appends).toEqual([{ text: line(setup), sync: false }])
    release()
    await written
    expect(journal.hasSetup('p/v', 'a')).toBe(true)
  })

  it('an unsynced record that shares a write with a synced one is synced with it', async () => {
    const { host, appends, release } = appendingHost()
    const journal = await VolumeJournal.open({ host, path: '/j/volumes.log', logger: silentLogger })
    // The first write is under way; the next two wait for it and go out together.
    const first = journal.record(attached)
    await Promise.resolve()
    expect(appends).toHaveLength(1)
    const lazy = journal.record(setup, { sync: false })
    const durable = journal.record(device)
    release()
    await first
    await Promise.resolve()
    expect(appends).toEqual([
      { text: line(attached), sync: true },
      { text: line(setup) + line(device), sync: true },
    ])
    release()
    await Promise.all([lazy, durable])
  })

  it('records handed over in one run of code share one write and one sync, even with the journal idle', async () => {
    const { host, appends, release } = appendingHost()
    const journal = await VolumeJournal.open({ host, path: '/j/volumes.log', logger: silentLogger })
    // A device's intent and its set-up's, as mount_device records them: one after the other.
    const both = [journal.record(device), journal.record(setup)]
    expect(appends).toEqual([])
    await Promise.resolve()
    expect(appends).toEqual([{ text: line(device) + line(setup), sync: true }])
    release()
    await Promise.all(both)
    expect(journal.hasSetup('p/v', 'a')).toBe(true)
    // flush waits for a write that has not started yet too.
    const later = journal.record(attached)
    let flushed = false
    const flushing = journal.flush().then(() => {
      flushed = true
    })
    await Promise.resolve()
    await Promise.resolve()
    expect(flushed).toBe(false)
    release()
    await Promise.all([later, flushing])
    expect(appends).toHaveLength(2)
  })
})

describe('VolumeJournal with a clock: records that need not be durable wait for an intent', () => {
  const tornDown: JournalRecord = { kind: 'torn-down', volume: 'p/v', pod: 'a' }
  async function open() {
    const { host, appends } = appendingHost({ held: false })
    const clock = createFakeClock(0)
    const journal = await VolumeJournal.open({ host, path: '/j/volumes.log', logger: silentLogger, clock, noteDelayMs: 5 })
    return { journal, clock, appends }
  }

  it('a note alone is written once the delay has passed, unsynced', async () => {
    const { journal, clock, appends } = await open()
    journal.note(device)
    await clock.advance(4)
    expect(appends).toEqual([])
    await clock.advance(1)
    await journal.flush()
    expect(appends).toEqual([{ text: line(device), sync: false }])
  })

  it('an intent within the delay takes the notes into its write, synced, at once', async () => {
    const { journal, clock, appends } = await open()
    journal.note(tornDown)
    const lazy = journal.record(setup, { sync: false })
    await clock.advance(2)
    expect(appends).toEqual([])
    const durable = journal.record(device)
    await Promise.resolve()
    expect(appends).toEqual([{ text: line(tornDown) + line(setup) + line(device), sync: true }])
    await Promise.all([lazy, durable])
    // The delay's timer went with it: nothing is written again when it would have run out.
    await clock.advance(10)
    expect(appends).toHaveLength(1)
  })

  it('flush writes a waiting note at once', async () => {
    const { journal, appends } = await open()
    journal.note(tornDown)
    await journal.flush()
    expect(appends).toEqual([{ text: line(tornDown), sync: false }])
  })
})

/** A host of files in memory that writes at offsets, counting its calls. */
function roomHost(limit = { bytes: Number.POSITIVE_INFINITY }) {
  const files = new Map<string, Uint8Array>()
  const calls: { method: string; offset?: number; length: number; sync?: boolean }[] = []
  const host = {
    readFile: async (path: string) => {
      const data = files.get(path)
      if (!data) throw new HostError('ENOENT', 'open', path, 'no such file or directory')
      return data.slice()
    },
    mkdir: async () => undefined,
    writeFile: async (path: string, data: Uint8Array) => {
      calls.push({ method: 'writeFile', length: data.length })
      if (data.length > limit.bytes) throw new HostError('ENOSPC', 'write', path, 'no space left on device')
      files.set(path, data.slice())
    },
    syncFile: async () => undefined,
    rename: async (from: string, to: string) => {
      files.set(to, files.get(from) as Uint8Array)
      files.delete(from)
    },
    appendFile: async () => {
      calls.push({ method: 'appendFile', length: 0 })
      throw new Error('appended')
    },
    writeFileAt: async (path: string, offset: number, data: Uint8Array, options?: { readonly sync?: boolean }) => {
      calls.push({ method: 'writeFileAt', offset, length: data.length, sync: options?.sync === true })
      const old = files.get(path)
      if (!old) throw new HostError('ENOENT', 'open', path, 'no such file or directory')
      const next = new Uint8Array(Math.max(old.length, offset + data.length))
      next.set(old)
      next.set(data, offset)
      files.set(path, next)
    },
  } as unknown as Host
  return { host, files, calls, limit }
}

describe('VolumeJournal with room made in its file (writeFileAt)', () => {
  const path = '/j/volumes.log'
  const setupOf = (volume: string): JournalRecord => ({ ...setup, volume: volume as JournalRecord['volume'] }) as JournalRecord

  it('writes each record where the last one ended, inside the file, and never appends', async () => {
    const { host, files, calls } = roomHost()
    const journal = await VolumeJournal.open({ host, path, logger: silentLogger, minRoomBytes: 4096 })
    expect(files.get(path)?.length).toBe(4096)
    expect(files.get(path)?.every((b) => b === 0)).toBe(true)
    await journal.record(setupOf('p/a'))
    journal.note({ kind: 'torn-down', volume: 'p/a' as JournalRecord['volume'], pod: 'a' as never })
    await journal.flush()
    await journal.record(setupOf('p/b'))
    const a = line(setupOf('p/a')).length
    const torn = line({ kind: 'torn-down', volume: 'p/a', pod: 'a' } as JournalRecord).length
    expect(calls.filter((c) => c.method !== 'writeFile')).toEqual([
      { method: 'writeFileAt', offset: 0, length: a, sync: true },
      { method: 'writeFileAt', offset: a, length: torn, sync: false },
      { method: 'writeFileAt', offset: a + torn, length: line(setupOf('p/b')).length, sync: true },
    ])
    // The file keeps its size: the records, then zeros.
    const text = decodeUtf8(files.get(path) as Uint8Array)
    expect(text.length).toBe(4096)
    expect(text.slice(0, a + torn + line(setupOf('p/b')).length)).toBe(line(setupOf('p/a')) + line({ kind: 'torn-down', volume: 'p/a', pod: 'a' } as JournalRecord) + line(setupOf('p/b')))
    expect(parseJournal(text)).toEqual({ records: [setupOf('p/a'), { kind: 'torn-down', volume: 'p/a', pod: 'a' }, setupOf('p/b')], dropped: 0 })
    const warnings: unknown[] = []
    const reopened = await VolumeJournal.open({ host, path, logger: { ...silentLogger, warn: (...args: unknown[]) => warnings.push(args) } })
    expect([...reopened.volumes().keys()]).toEqual(['p/b'])
    expect(warnings).toEqual([])
  })

  it('grows the room when it runs out (zeros past the end, no record written again), enough for a write larger than the minimum', async () => {
    const { host, files, calls } = roomHost()
    const journal = await VolumeJournal.open({ host, path, logger: silentLogger, minRoomBytes: 1024 })
    const volumes = Array.from({ length: 40 }, (_, i) => `p/v${i}`)
    for (const volume of volumes) await journal.record(setupOf(volume))
    // One write of 60 records, far more than the minimum room.
    const big = Array.from({ length: 60 }, (_, i) => journal.record(setupOf(`p/big${i}`)))
    await Promise.all(big)
    expect(calls.some((c) => c.method === 'appendFile')).toBe(false)
    // The file made at open, no other: each time the room ran out it grew by as much as the file held.
    expect(calls.filter((c) => c.method === 'writeFile')).toHaveLength(1)
    const growths = calls.filter((c) => c.method === 'writeFileAt' && c.sync === false && c.offset !== undefined && c.length >= 1024)
    expect(growths.length).toBeGreaterThan(1)
    const file = files.get(path) as Uint8Array
    expect(file.length).toBe(1024 + growths.reduce((sum, g) => sum + g.length, 0))
    const { records, dropped } = parseJournal(decodeUtf8(file))
    expect(dropped).toBe(0)
    expect(records.map((r) => r.volume)).toEqual([...volumes, ...Array.from({ length: 60 }, (_, i) => `p/big${i}`)])
    // Every write went where the records ended, inside the file as it was then.
    const reopened = await VolumeJournal.read({ host, path, logger: silentLogger })
    expect(reopened.volumes().size).toBe(100)
  })
})

describe('VolumeJournal on a filesystem too full for the room', () => {
  it('opens without room, writes each record past the end, and makes the room at a later compaction', async () => {
    const { host, files, calls, limit } = roomHost({ bytes: 1000 })
    const path = '/j/volumes.log'
    const journal = await VolumeJournal.open({ host, path, logger: silentLogger, minRoomBytes: 4096, compactAfter: 2 })
    expect(files.get(path)?.length).toBe(0)
    await journal.record(setup)
    await journal.record({ ...setup, volume: 'p/w' } as JournalRecord)
    expect(calls.filter((c) => c.method === 'writeFileAt')).toEqual([
      { method: 'writeFileAt', offset: 0, length: line(setup).length, sync: true },
      { method: 'writeFileAt', offset: line(setup).length, length: line({ ...setup, volume: 'p/w' } as JournalRecord).length, sync: true },
    ])
    expect(decodeUtf8(files.get(path) as Uint8Array)).toBe(line(setup) + line({ ...setup, volume: 'p/w' } as JournalRecord))
    // Room again: the compaction that the torn-down records bring makes it.
    limit.bytes = Number.POSITIVE_INFINITY
    journal.note({ kind: 'torn-down', volume: 'p/v', pod: 'a' } as JournalRecord)
    journal.note({ kind: 'torn-down', volume: 'p/w', pod: 'a' } as JournalRecord)
    await journal.flush()
    await journal.record(setup)
    expect(files.get(path)?.length).toBe(4096)
    expect(parseJournal(decodeUtf8(files.get(path) as Uint8Array))).toEqual({ records: [setup], dropped: 0 })
  })
})

describe('parseJournal and the room after the records', () => {
  const a = line(setup)
  const zeros = (n: number) => '\0'.repeat(n)
  it.each([
    { case: 'records, then room', text: a + zeros(100), records: 1, dropped: 0 },
    { case: 'a record torn in the room', text: a + a.slice(0, 20) + zeros(100), records: 1, dropped: 1 },
    { case: 'a record after a hole of zeros (written after one lost in a crash)', text: a + zeros(30) + a + zeros(10), records: 1, dropped: 1 },
    { case: 'nothing but room', text: zeros(100), records: 0, dropped: 0 },
  ])('$case', ({ text, records, dropped }) => {
    const parsed = parseJournal(text)
    expect(parsed.records).toHaveLength(records)
    expect(parsed.dropped).toBe(dropped)
  })
})
