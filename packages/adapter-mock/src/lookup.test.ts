import { isHostError } from '@kubevol/core'
import { describe, expect, it } from 'vitest'
import { createMemoryHost } from './memory-host.js'

async function codeOf(promise: Promise<unknown>): Promise<string | undefined> {
  return promise.then(
    () => undefined,
    (err: unknown) => (isHostError(err) ? err.code : String(err)),
  )
}

async function chainOfLinks(length: number) {
  const host = createMemoryHost()
  await host.mkdir('/l')
  await host.writeFile('/l/end', 'reached')
  // /l/0 -> /l/1 -> ... -> /l/<length-1> -> /l/end: `length` links to follow.
  for (let i = 0; i < length; i++) await host.symlink(i === length - 1 ? '/l/end' : `/l/${i + 1}`, `/l/${i}`)
  return host
}

describe('path resolution', () => {
  it.each([
    { case: '40 links are followed', links: 40, code: undefined },
    { case: 'the 41st link fails with ELOOP', links: 41, code: 'ELOOP' },
  ])('$case', async ({ links, code }) => {
    const host = await chainOfLinks(links)
    expect(await codeOf(host.readFile('/l/0'))).toBe(code)
  })

  it('counts links across intermediate components too', async () => {
    const host = createMemoryHost()
    await host.mkdir('/d')
    await host.symlink('/d/self', '/d/self')
    expect(await codeOf(host.readdir('/d/self/x'))).toBe('ELOOP')
  })

  it.each([
    { case: 'a relative target, against the link directory', target: 'b/f', link: '/a/link' },
    { case: 'a target climbing with ..', target: '../a/b/f', link: '/a/up' },
    { case: 'an absolute target', target: '/a/b/f', link: '/elsewhere/abs' },
    { case: 'a target with . and // in it', target: './b//f', link: '/a/dots' },
  ])('resolves $case', async ({ target, link }) => {
    const host = createMemoryHost()
    await host.mkdir('/a/b', { recursive: true })
    await host.mkdir('/elsewhere')
    await host.writeFile('/a/b/f', 'found')
    await host.symlink(target, link)
    expect(host.tree(link)).toEqual({ type: 'symlink', target })
    expect(new TextDecoder().decode(await host.readFile(link))).toBe('found')
  })

  it('a relative link inside a bind mount resolves against the bind, not the source', async () => {
    const host = createMemoryHost()
    await host.mkdir('/src/dir', { recursive: true })
    await host.mkdir('/dst')
    await host.writeFile('/src/dir/f', 'same node')
    await host.symlink('../dir/f', '/src/dir/link')
    await host.mount({ source: '/src', target: '/dst', bind: true })
    expect(await host.readlink('/dst/dir/link')).toBe('../dir/f')
    expect(new TextDecoder().decode(await host.readFile('/dst/dir/link'))).toBe('same node')
  })

  it('.. at the root of a mount climbs to the directory holding the mount point', async () => {
    const host = createMemoryHost()
    await host.mkdir('/outer/mnt', { recursive: true })
    await host.writeFile('/outer/sibling', 'beside the mount')
    await host.mount({ source: 'tmpfs', target: '/outer/mnt', fstype: 'tmpfs' })
    expect(new TextDecoder().decode(await host.readFile('/outer/mnt/../sibling'))).toBe('beside the mount')
    expect(await host.readdir('/..')).toEqual(['dev', 'outer', 'tmp'])
  })

  it.each([
    { case: 'a missing intermediate directory', path: '/missing/f', code: 'ENOENT' },
    { case: 'a file as a directory', path: '/file/f', code: 'ENOTDIR' },
    { case: 'a link to a file as a directory', path: '/file-link/f', code: 'ENOTDIR' },
    { case: 'a relative path', path: 'relative/f', code: 'EINVAL' },
  ])('writing through $case fails with $code', async ({ path, code }) => {
    const host = createMemoryHost()
    await host.writeFile('/file', 'x')
    await host.symlink('/file', '/file-link')
    expect(await codeOf(host.writeFile(path, 'y'))).toBe(code)
  })

  it('writeFile through a dangling link creates its target, as open(O_CREAT) does', async () => {
    const host = createMemoryHost()
    await host.symlink('/tmp/created', '/link')
    await host.writeFile('/link', 'made')
    expect(host.tree('/tmp/created')).toMatchObject({ type: 'file', text: 'made' })
    expect(host.tree('/link')).toEqual({ type: 'symlink', target: '/tmp/created' })
  })

  it('mkdir and symlink do not follow a link in the last component', async () => {
    const host = createMemoryHost()
    await host.symlink('/tmp/nowhere', '/dangling')
    expect(await codeOf(host.mkdir('/dangling'))).toBe('EEXIST')
    expect(await codeOf(host.mkdir('/dangling', { recursive: true }))).toBe('EEXIST')
    expect(host.exists('/tmp/nowhere')).toBe(false)
  })

  it('a missing intermediate directory is ENOENT with the errno message where callers see it, and null from stat', async () => {
    const host = createMemoryHost()
    await expect(host.readFile('/missing/dir/f')).rejects.toThrow('ENOENT: open /missing/dir/f: no such file or directory')
    expect(await host.stat('/missing/dir/f')).toBeNull()
    expect(await host.lstat('/missing/dir/f')).toBeNull()
  })

  it.each([
    { case: 'plain missing parents', path: '/a/b/c', made: ['/a/b/c'], absent: [] },
    { case: '.. after a directory made on the way', path: '/a/new/../b', made: ['/a/new', '/a/b'], absent: ['/a/new/b'] },
    { case: '. after a directory made on the way', path: '/a/new/./b', made: ['/a/new/b'], absent: [] },
    { case: 'repeated slashes', path: '//a//b///c/', made: ['/a/b/c'], absent: [] },
  ])('recursive mkdir creates the missing parents: $case', async ({ path, made, absent }) => {
    const host = createMemoryHost()
    await host.mkdir(path, { recursive: true })
    for (const dir of made) expect(host.tree(dir)).toMatchObject({ type: 'directory' })
    for (const dir of absent) expect(host.exists(dir)).toBe(false)
  })

  it('recursive mkdir through a dangling link fails with EEXIST and creates nothing', async () => {
    const host = createMemoryHost()
    await host.symlink('/tmp/target', '/link')
    expect(await codeOf(host.mkdir('/link/sub/leaf', { recursive: true }))).toBe('EEXIST')
    expect(host.exists('/tmp/target')).toBe(false)
  })

  // Several missing levels, and what else may be on the way: a link, a file, a link to nowhere.
  it.each([
    { case: 'three levels below an existing directory', path: '/tmp/a/b/c', error: undefined, made: ['/tmp/a', '/tmp/a/b', '/tmp/a/b/c'] },
    { case: 'through a link to a directory', path: '/dirlink/a/b', error: undefined, made: ['/real/a/b'] },
    { case: 'through a file', path: '/file/a/b', error: 'ENOTDIR: mkdir /file/a/b: not a directory', made: [] },
    { case: 'through a link whose target is missing', path: '/dangling/a/b', error: 'ENOENT: mkdir /dangling: no such file or directory', made: [] },
    { case: 'through a link to a file', path: '/filelink/a/b', error: 'ENOTDIR: mkdir /filelink/a/b: not a directory', made: [] },
    { case: 'with .. below missing levels', path: '/tmp/x/y/../z', error: undefined, made: ['/tmp/x/y', '/tmp/x/z'] },
  ])('recursive mkdir of missing levels: $case', async ({ path, error, made }) => {
    const host = createMemoryHost()
    await host.mkdir('/real')
    await host.symlink('/real', '/dirlink')
    await host.writeFile('/file', 'f')
    await host.symlink('/file', '/filelink')
    await host.symlink('/nowhere/x', '/dangling')
    const before = host.tree('/')
    const result = host.mkdir(path, { recursive: true, mode: 0o750 })
    if (error) {
      await expect(result).rejects.toThrow(error)
      expect(host.tree('/')).toEqual(before)
    } else {
      await result
    }
    for (const dir of made) expect(host.tree(dir)).toMatchObject({ type: 'directory', mode: 0o750 })
  })

  // Levels made below where the walk found one missing are made on the filesystem it stood on.
  it('recursive mkdir of missing levels inside a mount crossed on the way, and under a read-only one', async () => {
    const host = createMemoryHost()
    await host.mkdir('/m/rw', { recursive: true })
    await host.mkdir('/m/ro', { recursive: true })
    await host.mount({ source: 'tmpfs', target: '/m/rw', fstype: 'tmpfs' })
    await host.mount({ source: 'tmpfs', target: '/m/ro', fstype: 'tmpfs', options: ['ro'] })
    await host.mkdir('/m/rw/a/b', { recursive: true })
    expect(host.tree('/m/rw/a/b')).toMatchObject({ type: 'directory', mode: 0o755 })
    await host.unmount('/m/rw')
    expect(host.exists('/m/rw/a')).toBe(false)
    await expect(host.mkdir('/m/ro/a/b', { recursive: true })).rejects.toThrow('EROFS: mkdir /m/ro/a/b: read-only file system')
    expect(host.exists('/m/ro/a')).toBe(false)
  })

  it('directories that had no entry get their own (a link into one is not seen in another)', async () => {
    const host = createMemoryHost()
    await host.mkdir('/x')
    await host.mkdir('/y')
    await host.writeFile('/x/f', 'in x')
    expect(await host.readdir('/x')).toEqual(['f'])
    expect(await host.readdir('/y')).toEqual([])
    await host.remove('/x/f')
    expect(await host.readdir('/x')).toEqual([])
  })
})

describe('a walk after the tree changed', () => {
  const text = async (host: ReturnType<typeof createMemoryHost>, path: string) =>
    host.readFile(path).then(
      (data) => new TextDecoder().decode(data),
      (err: unknown) => (isHostError(err) ? err.code : String(err)),
    )

  // Each case walks /a/b/c/f (and neighbours) first, then changes the tree on the way and reads
  // again: whatever a walk keeps of an earlier one must not outlive such a change.
  it.each([
    {
      case: 'a walked directory renamed away and another made in its place',
      change: async (host: ReturnType<typeof createMemoryHost>) => {
        await host.rename('/a/b', '/a/old')
        await host.mkdir('/a/b/c', { recursive: true })
        await host.writeFile('/a/b/c/f', 'new')
      },
      expected: { '/a/b/c/f': 'new', '/a/old/c/f': 'old', '/a/b/c/g': 'ENOENT' },
    },
    {
      case: 'a mount over a walked directory',
      change: async (host: ReturnType<typeof createMemoryHost>) => {
        await host.mount({ source: 'tmpfs', target: '/a/b', fstype: 'tmpfs' })
      },
      expected: { '/a/b/c/f': 'ENOENT', '/a/b/c/g': 'ENOENT', '/a/x/f': 'x' },
    },
    {
      case: 'a mount over a walked directory, then unmounted',
      change: async (host: ReturnType<typeof createMemoryHost>) => {
        await host.mount({ source: 'tmpfs', target: '/a/b', fstype: 'tmpfs' })
        await host.mkdir('/a/b/c')
        await host.writeFile('/a/b/c/f', 'on tmpfs')
        expect(await text(host, '/a/b/c/f')).toBe('on tmpfs')
        await host.unmount('/a/b')
      },
      expected: { '/a/b/c/f': 'old', '/a/b/c/g': 'g' },
    },
    {
      case: 'a walked directory replaced by a symlink to another tree',
      change: async (host: ReturnType<typeof createMemoryHost>) => {
        await host.removeAll('/a/b')
        await host.symlink('/a/x', '/a/b')
      },
      expected: { '/a/b/c/f': 'ENOENT', '/a/b/f': 'x', '/a/b/../x/f': 'x' },
    },
    {
      case: 'a walked directory removed',
      change: async (host: ReturnType<typeof createMemoryHost>) => {
        await host.removeAll('/a/b/c')
      },
      expected: { '/a/b/c/f': 'ENOENT', '/a/b/c/g': 'ENOENT' },
    },
    {
      case: 'a walked directory renamed in its own directory',
      change: async (host: ReturnType<typeof createMemoryHost>) => {
        await host.rename('/a/b/c', '/a/b/d')
      },
      expected: { '/a/b/c/f': 'ENOENT', '/a/b/d/f': 'old', '/a/b/d/g': 'g' },
    },
    {
      case: 'a walked file replaced under its name',
      change: async (host: ReturnType<typeof createMemoryHost>) => {
        await host.rename('/a/x/f', '/a/b/c/f')
      },
      expected: { '/a/b/c/f': 'x', '/a/x/f': 'ENOENT', '/a/b/c/g': 'g' },
    },
    {
      case: 'nothing that moves a walked path (a file added and removed beside it)',
      change: async (host: ReturnType<typeof createMemoryHost>) => {
        await host.writeFile('/a/b/c/h', 'h')
        await host.remove('/a/b/c/h')
      },
      expected: { '/a/b/c/f': 'old', '/a/b/c/g': 'g', '/a/bc/f': 'bc', '/a/b/./c//f': 'old', '/a/x/../b/c/f': 'old' },
    },
  ])('sees $case', async ({ change, expected }) => {
    const host = createMemoryHost()
    await host.mkdir('/a/b/c', { recursive: true })
    await host.mkdir('/a/bc')
    await host.mkdir('/a/x')
    await host.writeFile('/a/b/c/f', 'old')
    await host.writeFile('/a/b/c/g', 'g')
    await host.writeFile('/a/bc/f', 'bc')
    await host.writeFile('/a/x/f', 'x')
    expect([await text(host, '/a/b/c/f'), await text(host, '/a/b/c/g'), await text(host, '/a/bc/f')]).toEqual(['old', 'g', 'bc'])
    await change(host)
    for (const [path, want] of Object.entries(expected)) expect([path, await text(host, path)]).toEqual([path, want])
  })

  it('keeps no place across hosts', async () => {
    const one = createMemoryHost()
    const two = createMemoryHost()
    await one.mkdir('/a/b', { recursive: true })
    await one.writeFile('/a/b/f', 'one')
    await two.mkdir('/a/b', { recursive: true })
    await two.writeFile('/a/b/f', 'two')
    expect([await text(one, '/a/b/f'), await text(two, '/a/b/f'), await text(one, '/a/b/f')]).toEqual(['one', 'two', 'one'])
  })
})

describe('beneath a locked root', () => {
  async function locked() {
    const host = createMemoryHost()
    await host.mkdir('/data/kubevol/pods', { recursive: true })
    await host.mkdir('/outside')
    await host.writeFile('/outside/canary', 'kept')
    await host.mkdir('/var/lib', { recursive: true })
    // The operator's choice: the root reached through a symlink, resolved once at lock time.
    await host.symlink('/data/kubevol', '/var/lib/kubevol')
    const lock = await host.lockRoot('/var/lib/kubevol')
    if (!lock.locked) throw new Error('not locked')
    await host.symlink('/outside', '/var/lib/kubevol/pods/link')
    return { host, lock }
  }

  it('refuses a symlink at a level with ELOOP naming the level, and `..` above the root with EXDEV', async () => {
    const { host } = await locked()
    const error = await host.readFile('/var/lib/kubevol/pods/link/canary').catch((err: unknown) => err)
    expect(isHostError(error, 'ELOOP') && error.message).toMatch(/refusing to follow a symlink beneath the root: \/var\/lib\/kubevol\/pods\/link is a symlink/)
    expect(await codeOf(host.readdir('/var/lib/kubevol//pods/../..'))).toBe('EXDEV')
    expect((await host.lstat('/var/lib/kubevol/pods/link'))?.type).toBe('symlink')
    // The root itself and paths elsewhere resolve as before.
    expect((await host.stat('/var/lib/kubevol'))?.type).toBe('directory')
    expect(await host.readdir('/data/kubevol/pods/link')).toEqual(['canary'])
  })

  it('keeps the directory found at lock time, and resolves as before once released', async () => {
    const { host, lock } = await locked()
    await host.rename('/data/kubevol', '/data/moved')
    expect(await host.readdir('/var/lib/kubevol/pods')).toEqual(['link'])
    await lock.release()
    expect(await codeOf(host.readdir('/var/lib/kubevol/pods'))).toBe('ENOENT')
    expect(await host.readdir('/data/moved/pods/link')).toEqual(['canary'])
  })
})
