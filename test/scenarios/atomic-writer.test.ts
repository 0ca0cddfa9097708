/** The AtomicWriter (SPEC §7.6) on the in-memory host: layout, no-op writes, crash leftovers, injected faults. */
import { createMemoryHost } from '@kubevol/adapter-mock'
import { createFakeClock } from '@kubevol/core/testing'
import { afterEach, describe, expect, it } from 'vitest'
import { type FileProjection, type Payload, writeAtomically } from '@kubevol/core/plugins'

const DIR = '/vol'
const START = Date.UTC(2026, 10, 29, 10, 0, 0, 123)
const decoder = new TextDecoder()

let host: ReturnType<typeof createMemoryHost>
let clock: ReturnType<typeof createFakeClock>
async function setUp() {
  clock = createFakeClock(START)
  host = createMemoryHost({ clock })
  await host.mkdir(DIR)
}
afterEach(() => host.assertNoViolations())

type Files = Record<string, string | FileProjection>
const payload = (files: Files): Payload =>
  new Map(Object.entries(files).map(([path, f]) => [path, typeof f === 'string' ? { data: f, mode: 0o644 } : f]))
const write = (files: Files, options: { fsGroup?: number } = {}) =>
  writeAtomically(host, DIR, payload(files), { clock, ...options })
const read = async (path: string) => decoder.decode(await host.readFile(`${DIR}/${path}`))
const dataDir = () => host.readlink(`${DIR}/..data`)
const listing = () => host.readdir(DIR)
/** What a container sees: every file reached through the user-visible paths, with its content. */
async function visible(dir = DIR, prefix = ''): Promise<Record<string, string>> {
  const seen: Record<string, string> = {}
  for (const name of await host.readdir(dir)) {
    if (prefix === '' && name.startsWith('..')) continue
    const info = await host.stat(`${dir}/${name}`)
    if (info?.type === 'directory') Object.assign(seen, await visible(`${dir}/${name}`, `${prefix}${name}/`))
    else seen[`${prefix}${name}`] = decoder.decode(await host.readFile(`${dir}/${name}`))
  }
  return seen
}

describe('writeAtomically on the in-memory host', () => {
  it('lays out a version directory, ..data and one link per first path element', async () => {
    await setUp()
    const result = await write({ 'app.yaml': 'port: 80', 'conf/a/b.txt': { data: 'deep', mode: 0o777 }, key: { data: 'k', mode: 0o600 } })
    expect(result).toEqual({ written: true, dataDir: '..2026_11_29_10_00_00.123000000' })
    expect(await listing()).toEqual(['..2026_11_29_10_00_00.123000000', '..data', 'app.yaml', 'conf', 'key'])
    expect(await dataDir()).toBe(result.dataDir)
    expect(await host.readlink(`${DIR}/conf`)).toBe('..data/conf')
    expect(await visible()).toEqual({ 'app.yaml': 'port: 80', 'conf/a/b.txt': 'deep', key: 'k' })
    // Modes are exact whatever the umask (0o022 here would have made 0o777 into 0o755).
    const modes = async (path: string) => ((await host.stat(`${DIR}/${path}`))?.mode ?? 0).toString(8)
    expect([await modes('..data'), await modes('conf/a/b.txt'), await modes('key'), await modes('app.yaml')]).toEqual(['755', '777', '600', '644'])
  })

  it.each<{ change: string; next: Files; written: boolean }>([
    { change: 'nothing', next: { a: 'A', 'd/x': 'X', 'd/y': 'Y' }, written: false },
    { change: 'one file content', next: { a: 'A2', 'd/x': 'X', 'd/y': 'Y' }, written: true },
    { change: 'one file mode', next: { a: { data: 'A', mode: 0o400 }, 'd/x': 'X', 'd/y': 'Y' }, written: true },
    { change: 'a file owner', next: { a: { data: 'A', mode: 0o644, fsUser: 1000 }, 'd/x': 'X', 'd/y': 'Y' }, written: true },
    { change: 'a top-level file removed', next: { 'd/x': 'X', 'd/y': 'Y' }, written: true },
    { change: 'a nested file removed', next: { a: 'A', 'd/x': 'X' }, written: true },
    { change: 'a directory removed', next: { a: 'A' }, written: true },
    { change: 'a file added', next: { a: 'A', b: 'B', 'd/x': 'X', 'd/y': 'Y' }, written: true },
  ])('rewrites only when something changed: $change', async ({ next, written }) => {
    await setUp()
    const first = await write({ a: 'A', 'd/x': 'X', 'd/y': 'Y' })
    await clock.advance(1_000)
    const second = await write(next)
    expect(second.written).toBe(written)
    expect(second.dataDir === first.dataDir).toBe(!written)
    expect(await dataDir()).toBe(second.dataDir)
    // One version only, and exactly the new payload is visible: stale links are gone.
    const expectedNames = [...new Set(Object.keys(next).map((p) => p.split('/')[0] as string))].sort()
    expect(await listing()).toEqual([second.dataDir, '..data', ...expectedNames])
    const expectedContent = Object.fromEntries(Object.entries(next).map(([p, f]) => [p, typeof f === 'string' ? f : f.data]))
    expect(await visible()).toEqual(expectedContent)
  })

  it('names two versions of one millisecond apart', async () => {
    await setUp()
    await write({ a: '1' })
    expect((await write({ a: '2' })).dataDir).toBe('..2026_11_29_10_00_00.123000001')
  })

  it('applies fsGroup to the new version and the volume, and sees it as unchanged next time', async () => {
    await setUp()
    await write({ secret: { data: 's', mode: 0o600 }, 'd/f': 'f' }, { fsGroup: 2000 })
    const info = async (path: string) => {
      const i = await host.lstat(`${DIR}/${path}`)
      return `${i?.gid} ${i?.mode.toString(8)}`
    }
    const version = await dataDir()
    expect([await info(`${version}/secret`), await info(`${version}/d/f`), await info(`${version}/d`), await info('')]).toEqual([
      '2000 640',
      '2000 644',
      '2000 2755',
      '2000 2755',
    ])
    expect((await write({ secret: { data: 's', mode: 0o600 }, 'd/f': 'f' }, { fsGroup: 2000 })).written).toBe(false)
    expect((await write({ secret: { data: 's', mode: 0o600 }, 'd/f': 'f' }, { fsGroup: 3000 })).written).toBe(true)
  })

  it('never shows a half-written version: readers see the old one until the swap', async () => {
    await setUp()
    await write({ a: 'old', b: 'old' })
    const hang = host.faults.hangOn({ method: 'rename' })
    const writing = write({ a: 'new', b: 'new' })
    await hang.reached()
    expect(await visible()).toEqual({ a: 'old', b: 'old' })
    hang.release()
    await writing
    expect(await visible()).toEqual({ a: 'new', b: 'new' })
  })

  it.each([
    { step: 'creating the version directory', match: { method: 'mkdir' } },
    { step: 'writing a file', match: { method: 'writeFile', path: /\/b$/ } },
    { step: 'setting a mode', match: { method: 'chmod' } },
    { step: 'setting an owner', match: { method: 'lchown' } },
    { step: 'making ..data_tmp', match: { method: 'symlink', path: `${DIR}/..data_tmp` } },
    { step: 'the swap', match: { method: 'rename' } },
  ])('keeps the old version whole when $step fails', async ({ match }) => {
    await setUp()
    const old = await write({ a: 'old', b: 'old' })
    const next = { a: 'new', b: { data: 'new', mode: 0o644, fsUser: 1000 } }
    const stop = host.faults.failOn(match, 'EIO')
    await expect(write(next)).rejects.toThrow('EIO')
    stop()
    expect(await dataDir()).toBe(old.dataDir)
    expect(await listing()).toEqual([old.dataDir, '..data', 'a', 'b'])
    expect(await visible()).toEqual({ a: 'old', b: 'old' })
    // The next attempt goes through.
    const retry = await write(next)
    expect(await listing()).toEqual([retry.dataDir, '..data', 'a', 'b'])
    expect(await visible()).toEqual({ a: 'new', b: 'new' })
  })

  it('reports a failure after the swap with the new version visible, and finishes on the next write', async () => {
    await setUp()
    const old = await write({ a: 'old' })
    const stop = host.faults.failOn({ method: 'removeAll', path: `${DIR}/${old.dataDir}` }, 'EBUSY')
    await expect(write({ a: 'new' })).rejects.toThrow('EBUSY')
    stop()
    expect(await visible()).toEqual({ a: 'new' })
    const again = await write({ a: 'new' })
    expect(again.written).toBe(false)
    expect(await listing()).toEqual([again.dataDir, '..data', 'a'])
  })

  it.each([
    {
      crash: 'between ..data_tmp and the swap',
      leave: async () => {
        await host.mkdir(`${DIR}/..2026_11_29_09_00_00.000000007`)
        await host.writeFile(`${DIR}/..2026_11_29_09_00_00.000000007/a`, 'half')
        await host.symlink('..2026_11_29_09_00_00.000000007', `${DIR}/..data_tmp`)
      },
    },
    { crash: 'after making the version directory', leave: () => host.mkdir(`${DIR}/..2026_11_29_09_00_00.000000007`) },
    {
      crash: 'after the swap, before removing the old version',
      leave: async () => {
        await host.mkdir(`${DIR}/..2016_02_01_15_04_05.12345678`)
        await host.writeFile(`${DIR}/..2016_02_01_15_04_05.12345678/a`, 'older')
      },
    },
    { crash: 'after the swap, before the links', leave: () => host.remove(`${DIR}/a`) },
    { crash: 'with a link that no path uses any more', leave: () => host.symlink('..data/gone', `${DIR}/gone`) },
  ])('cleans up a write that crashed $crash', async ({ leave }) => {
    await setUp()
    const first = await write({ a: 'A' })
    await leave()
    const result = await write({ a: 'A' })
    expect(result).toEqual({ written: false, dataDir: first.dataDir })
    expect(await listing()).toEqual([first.dataDir, '..data', 'a'])
    expect(await visible()).toEqual({ a: 'A' })
  })

  it('recovers from a first write that crashed before ..data existed', async () => {
    await setUp()
    await host.mkdir(`${DIR}/..2026_11_29_09_00_00.000000007`)
    await host.symlink('..2026_11_29_09_00_00.000000007', `${DIR}/..data_tmp`)
    const result = await write({ a: 'A' })
    expect(result.written).toBe(true)
    expect(await listing()).toEqual([result.dataDir, '..data', 'a'])
  })

  it.each<{ name: string; prepare: () => Promise<unknown>; files: Files; error: string }>([
    {
      name: 'an invalid path, before touching the disk',
      prepare: async () => {},
      files: { ok: 'x', '/abs': 'y' },
      error: 'invalid path: must be relative path: /abs',
    },
    {
      name: '..data that is a directory',
      prepare: () => host.mkdir(`${DIR}/..data`),
      files: { a: 'A' },
      error: '/vol/..data is a directory, not a symbolic link',
    },
    {
      name: 'a file where a user-visible link goes',
      prepare: () => host.writeFile(`${DIR}/a`, 'mine'),
      files: { a: 'A' },
      error: 'cannot make user-visible path /vol/a: a file is in the way',
    },
  ])('fails on $name', async ({ prepare, files, error }) => {
    await setUp()
    await prepare()
    const before = host.tree(DIR)
    await expect(write(files)).rejects.toThrow(error)
    if (!error.includes('user-visible')) expect(host.tree(DIR)).toEqual(before)
  })

  // The links are made from the listing read when the write began; what appears at a link's name
  // while the version is written is looked at as before.
  it.each([
    { appears: 'the link itself', make: () => host.symlink('..data/a', `${DIR}/a`), error: undefined },
    { appears: 'a link elsewhere', make: () => host.symlink('/etc', `${DIR}/a`), error: undefined },
    { appears: 'a file', make: () => host.writeFile(`${DIR}/a`, 'mine'), error: 'cannot make user-visible path /vol/a: a file is in the way' },
  ])('sees $appears appear at a link name during the write', async ({ make, error }) => {
    await setUp()
    const dispose = host.intercept(async (call, next) => {
      if (call.method === 'rename' && call.path === `${DIR}/..data_tmp`) await make()
      return next()
    })
    const written = write({ a: 'A' })
    if (error) {
      await expect(written).rejects.toThrow(error)
    } else {
      await written
      expect(await host.readlink(`${DIR}/a`)).toBe('..data/a')
      expect(await visible()).toEqual({ a: 'A' })
    }
    dispose()
  })

  it('replaces a ..data that points outside the volume without touching what it points at', async () => {
    await setUp()
    await host.mkdir('/etc')
    await host.writeFile('/etc/passwd', 'root')
    await host.symlink('/etc', `${DIR}/..data`)
    await host.writeFile(`${DIR}/keep`, 'not a link')
    const result = await write({ a: 'A' })
    expect(await dataDir()).toBe(result.dataDir)
    expect(host.exists('/etc/passwd')).toBe(true)
    expect(await read('keep')).toBe('not a link')
  })
})
