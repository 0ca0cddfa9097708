import { createMemoryHost } from '@kubevol/adapter-mock'
import { HostError, silentLogger } from '@kubevol/core'
import { createBuiltinPlugins } from '@kubevol/core/plugins'
import { VolumeJournal } from '@kubevol/core/engine'
import { buildPod, createFakeClock, createHarness } from '@kubevol/core/testing'
import { describe, expect, it } from 'vitest'

describe('the journal on a host', () => {
  it('stays small: compaction keeps only live records', async () => {
    const host = createMemoryHost()
    const path = '/var/lib/kubevol/journal/volumes.log'
    const journal = await VolumeJournal.open({ host, path, logger: silentLogger, compactAfter: 50 })
    for (let i = 0; i < 500; i++) {
      await journal.record({ kind: 'setup', volume: `p/v${i}`, pod: 'a', podUID: 'a', outerName: 'v', spec: { name: 'v', readOnly: false }, gid: '' })
      await journal.record({ kind: 'torn-down', volume: `p/v${i}`, pod: 'a' })
    }
    await journal.record({ kind: 'attached', volume: 'p/kept', spec: { name: 'kept', readOnly: false }, devicePath: '/dev/x' })
    expect(journal.size.records).toBeLessThanOrEqual(100)
    const reopened = await VolumeJournal.open({ host, path, logger: silentLogger })
    expect([...reopened.volumes().keys()]).toEqual(['p/kept'])
    expect(reopened.size.records).toBe(1)
  })

  it('flush waits for records noted without waiting, compaction included', async () => {
    const host = createMemoryHost()
    const path = '/j/volumes.log'
    const journal = await VolumeJournal.open({ host, path, logger: silentLogger, compactAfter: 20 })
    for (let i = 0; i < 100; i++) {
      journal.note({ kind: 'setup', volume: `p/v${i}`, pod: 'a', podUID: 'a', outerName: 'v', spec: { name: 'v', readOnly: false }, gid: '' })
      journal.note({ kind: 'torn-down', volume: `p/v${i}`, pod: 'a' })
    }
    journal.note({ kind: 'attached', volume: 'p/kept', spec: { name: 'kept', readOnly: false }, devicePath: '/dev/x' })
    await journal.flush()
    // Nothing is in flight: the file is final, and a second flush returns at once.
    const text = new TextDecoder().decode(await host.readFile(path))
    await journal.flush()
    expect(new TextDecoder().decode(await host.readFile(path))).toBe(text)
    await expect(host.lstat(`${path}.tmp`)).resolves.toBeNull()
    const reopened = await VolumeJournal.read({ host, path, logger: silentLogger })
    expect([...reopened.volumes().keys()]).toEqual(['p/kept'])
  })

  it('syncs every write that holds an intent, and none that holds only records of things gone', async () => {
    const host = createMemoryHost()
    const path = '/j/volumes.log'
    const journal = await VolumeJournal.open({ host, path, logger: silentLogger })
    const writes: { text: string; sync: boolean }[] = []
    // The memory host writes into the room the journal made in its file.
    const writeAt = host.writeFileAt.bind(host)
    host.writeFileAt = (file, offset, data, options) => {
      writes.push({ text: new TextDecoder().decode(data), sync: options?.sync === true })
      return writeAt(file, offset, data, options)
    }
    const setup = { kind: 'setup', volume: 'p/v', pod: 'a', podUID: 'a', outerName: 'v', spec: { name: 'v', readOnly: false }, gid: '' } as const
    await journal.record(setup)
    journal.note({ kind: 'torn-down', volume: 'p/v', pod: 'a' })
    await journal.flush()
    // Records handed over in one run of code share one write; an intent in it makes it synced.
    journal.note({ kind: 'torn-down', volume: 'p/w', pod: 'a' })
    journal.note({ kind: 'device-unmounted', volume: 'p/w' })
    const intent = journal.record({ ...setup, volume: 'p/x' })
    await intent
    // A note that waits behind a write shares the next one, synced only for an intent in it.
    journal.note({ kind: 'torn-down', volume: 'p/x', pod: 'a' })
    await Promise.resolve()
    journal.note({ kind: 'device-unmounted', volume: 'p/x' })
    const second = journal.record({ ...setup, volume: 'p/y' })
    await second
    await journal.flush()
    expect(writes.map((w) => [w.text.match(/"kind":"([a-z-]+)"/g)?.length, w.sync])).toEqual([
      [1, true],
      [1, false],
      [3, true],
      [1, false],
      [2, true],
    ])
    const reopened = await VolumeJournal.read({ host, path, logger: silentLogger })
    expect([...reopened.volumes().keys()]).toEqual(['p/y'])
  })

  it('a failed write that left part of its record behind: the records written after it are kept (the file is rewritten first)', async () => {
    const host = createMemoryHost()
    const path = '/j/volumes.log'
    const journal = await VolumeJournal.open({ host, path, logger: silentLogger })
    const writeAt = host.writeFileAt.bind(host)
    let tearNext = false
    host.writeFileAt = async (file, offset, data, options) => {
      if (!tearNext) return writeAt(file, offset, data, options)
      tearNext = false
      // What a disk that fails mid-write leaves: the first half of the line, then EIO.
      await writeAt(file, offset, data.slice(0, Math.floor(data.length / 2)), options)
      throw new HostError('EIO', 'write', file, 'input/output error')
    }
    const setup = (volume: string) => ({ kind: 'setup', volume, pod: 'a', podUID: 'a', outerName: 'v', spec: { name: 'v', readOnly: false }, gid: '' }) as const
    await journal.record(setup('p/before'))
    tearNext = true
    await expect(journal.record(setup('p/torn'))).rejects.toThrow(/EIO/)
    await journal.record(setup('p/after'))
    journal.note({ kind: 'torn-down', volume: 'p/before', pod: 'a' })
    await journal.flush()
    const dropped: unknown[] = []
    const reopened = await VolumeJournal.read({ host, path, logger: { ...silentLogger, warn: (...args: unknown[]) => dropped.push(args) } })
    expect([...reopened.volumes().keys()]).toEqual(['p/after'])
    expect(dropped).toEqual([])
  })

  it('drops a torn record written by a crash and keeps the rest', async () => {
    const host = createMemoryHost()
    const path = '/j/volumes.log'
    const journal = await VolumeJournal.open({ host, path, logger: silentLogger })
    await journal.record({ kind: 'attached', volume: 'p/a', spec: { name: 'a', readOnly: false }, devicePath: '/dev/a' })
    await host.appendFile(path, '1234abcd {"kind":"attached","vol')
    const reopened = await VolumeJournal.open({ host, path, logger: silentLogger })
    expect([...reopened.volumes().keys()]).toEqual(['p/a'])
  })
})

describe('reading the journal for a dry run', () => {
  it('changes nothing: the torn tail stays on disk, and recording is refused', async () => {
    const host = createMemoryHost()
    const path = '/j/volumes.log'
    const journal = await VolumeJournal.open({ host, path, logger: silentLogger })
    await journal.record({ kind: 'attached', volume: 'p/a', spec: { name: 'a', readOnly: false }, devicePath: '/dev/a' })
    await host.appendFile(path, 'torn')
    const before = new TextDecoder().decode(await host.readFile(path))
    const reader = await VolumeJournal.read({ host, path, logger: silentLogger })
    expect([...reader.volumes().keys()]).toEqual(['p/a'])
    await expect(reader.record({ kind: 'detached', volume: 'p/a' })).rejects.toThrow('read-only')
    expect(new TextDecoder().decode(await host.readFile(path))).toBe(before)
  })
})

describe('orphaned pod directories', () => {
  it('removes what is safe, refuses what is mounted or holds data, and reports each refusal once', async () => {
    const clock = createFakeClock()
    const host = createMemoryHost({ clock })
    const h = createHarness({ host, clock, plugins: createBuiltinPlugins() })
    const root = '/var/lib/kubevol/pods'
    // Volumes of a plugin this node no longer has: reconstruction cannot tear them down, so only the
    // orphan cleanup decides about them.
    // An orphan whose volume is still mounted: kept whole.
    await host.mkdir(`${root}/mounted/volumes/example.com~retired/shm`, { recursive: true })
    await host.mount({ source: 'tmpfs', target: `${root}/mounted/volumes/example.com~retired/shm`, fstype: 'tmpfs' })
    await host.writeFile(`${root}/mounted/volumes/example.com~retired/shm/data`, 'x')
    // An orphan whose volume directory still holds data: kept (content is never deleted here).
    await host.mkdir(`${root}/full/volumes/example.com~retired/cache`, { recursive: true })
    await host.writeFile(`${root}/full/volumes/example.com~retired/cache/file`, 'x')
    // An orphan with empty volume directories and other data: removed.
    await host.mkdir(`${root}/empty/volumes/example.com~retired/gone`, { recursive: true })
    await host.mkdir(`${root}/empty/plugins/kubernetes.io~empty-dir/gone`, { recursive: true })
    await host.writeFile(`${root}/empty/plugins/kubernetes.io~empty-dir/gone/ready`, '')
    h.start()
    // A running pod's directory is never touched.
    await h.addPodAndWait(buildPod({ uid: 'live', volumes: [{ name: 'scratch', emptyDir: {} }] }))
    h.pods.deletePod('mounted')

    const first = await h.manager.cleanupOrphanedPods()
    expect(first.removed).toEqual(['empty'])
    expect(first.refused.map((r) => r.pod).sort()).toEqual(['full', 'mounted'])
    expect(host.exists(`${root}/empty`)).toBe(false)
    expect(host.exists(`${root}/mounted/volumes/example.com~retired/shm/data`)).toBe(true)
    expect(host.exists(`${root}/full/volumes/example.com~retired/cache/file`)).toBe(true)
    expect(host.exists(`${root}/live/volumes/kubernetes.io~empty-dir/scratch`)).toBe(true)
    await h.manager.cleanupOrphanedPods()
    await h.manager.cleanupOrphanedPods()
    const warnings = h.events.filter((e) => e.reason === 'OrphanedPodCleanupFailed')
    expect(warnings).toHaveLength(2)
    await h.stop()
    host.assertNoViolations()
  })
})
