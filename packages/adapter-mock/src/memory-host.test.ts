import { createFakeClock } from '@kubevol/core/testing'
import { describe, expect, it } from 'vitest'
import * as api from './index.js'
import { createMemoryHost } from './memory-host.js'

describe('createMemoryHost', () => {
  it('the front door exports exactly these names', () => {
    expect(Object.keys(api).sort()).toEqual(['MemoryHost', 'createMemoryHost', 'matchesCall'])
  })

  it('starts with /, /dev and /tmp and nothing mounted', async () => {
    const host = createMemoryHost()
    expect(host.tree('/')).toEqual({
      type: 'directory',
      mode: 0o755,
      children: {
        dev: { type: 'directory', mode: 0o755, children: {} },
        tmp: { type: 'directory', mode: 0o1777, children: {} },
      },
    })
    expect(host.mountTargets()).toEqual([])
    expect(await host.mounts()).toHaveLength(1)
  })

  it('has every capability by default; each can be left out', () => {
    const full = createMemoryHost()
    expect([full.loopDevices, full.blockDevices, full.filesystems, full.statfs].every(Boolean)).toBe(true)
    const bare = createMemoryHost({ capabilities: { loopDevices: false, blockDevices: false, filesystems: false, statfs: false } })
    expect('loopDevices' in bare || 'blockDevices' in bare || 'filesystems' in bare || 'statfs' in bare).toBe(false)
    const some = createMemoryHost({ capabilities: { filesystems: false } })
    expect([some.loopDevices, some.blockDevices, some.statfs].every(Boolean)).toBe(true)
    expect(some.filesystems).toBeUndefined()
  })

  it('stamps mtimes from the clock and masks modes with the umask', async () => {
    const clock = createFakeClock(1_000)
    const host = createMemoryHost({ clock, umask: 0o027 })
    await host.mkdir('/d')
    await clock.advance(500)
    await host.writeFile('/d/f', 'x')
    expect(await host.stat('/d')).toMatchObject({ mode: 0o750, mtimeMs: 1_500 })
    expect(await host.stat('/d/f')).toMatchObject({ mode: 0o640, mtimeMs: 1_500 })
  })

  it('tree crosses mounts and marks them; exists sees dangling links', async () => {
    const host = createMemoryHost()
    await host.mkdir('/v/m', { recursive: true })
    await host.mount({ source: 'tmpfs', target: '/v/m', fstype: 'tmpfs', readOnly: true })
    await host.symlink('/nowhere', '/v/link')
    host.mknod('/v/sock', 'socket')
    expect(host.tree('/v')).toEqual({
      type: 'directory',
      mode: 0o755,
      children: {
        link: { type: 'symlink', target: '/nowhere' },
        m: { type: 'directory', mode: 0o1777, children: {}, mount: { fstype: 'tmpfs', source: 'tmpfs', readOnly: true } },
        sock: { type: 'socket', mode: 0o644 },
      },
    })
    expect(host.exists('/v/link')).toBe(true)
    expect(host.exists('/v/link/x')).toBe(false)
    expect(() => host.tree('/missing')).toThrow('ENOENT')
  })

  it('returns copies: changing what a call returned changes nothing on the host', async () => {
    const host = createMemoryHost()
    const bytes = new Uint8Array([1, 2, 3])
    await host.writeFile('/f', bytes)
    bytes[0] = 9
    const read = await host.readFile('/f')
    read[1] = 9
    expect([...(await host.readFile('/f'))]).toEqual([1, 2, 3])
  })

  it('empty files stay apart: what one is given later is not seen in another', async () => {
    const host = createMemoryHost()
    await host.writeFile('/a', '')
    await host.writeFile('/b', new Uint8Array(0))
    await host.writeFile('/c', 'full')
    await host.writeFile('/c', '')
    await host.appendFile('/a', 'appended')
    await host.writeFile('/b', 'written')
    host.allocateFile('/d', 0)
    await host.appendFile('/d', 'x')
    const text = async (path: string) => new TextDecoder().decode(await host.readFile(path))
    expect([await text('/a'), await text('/b'), await text('/c'), await text('/d')]).toEqual(['appended', 'written', '', 'x'])
  })
})

describe('writeFileAt on the memory host', () => {
  it('writes in place within the file, grows it past the end with zeros in any hole, and leaves what readFile returned earlier as it was', async () => {
    const host = createMemoryHost()
    await host.writeFile('/log', new Uint8Array(8))
    const before = await host.readFile('/log')
    await host.writeFileAt('/log', 2, new Uint8Array([1, 2]))
    expect([...before]).toEqual([0, 0, 0, 0, 0, 0, 0, 0])
    expect([...(await host.readFile('/log'))]).toEqual([0, 0, 1, 2, 0, 0, 0, 0])
    // Past the end, leaving a hole: zeros between.
    await host.writeFileAt('/log', 10, new Uint8Array([3]))
    expect([...(await host.readFile('/log'))]).toEqual([0, 0, 1, 2, 0, 0, 0, 0, 0, 0, 3])
    // Many small writes past the end, as a journal without room makes them.
    for (let i = 0; i < 1000; i++) await host.writeFileAt('/log', 11 + i, new Uint8Array([i % 256]))
    const all = await host.readFile('/log')
    expect(all.length).toBe(1011)
    expect(all[1010]).toBe(999 % 256)
    expect((await host.stat('/log'))?.size).toBe(1011)
  })
})
