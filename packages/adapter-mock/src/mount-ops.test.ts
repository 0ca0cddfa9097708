import { isHostError } from '@kubevol/core'
import { describe, expect, it } from 'vitest'
import { createMemoryHost } from './memory-host.js'

const MiB = 2 ** 20

async function errorCode(promise: Promise<unknown>): Promise<string | undefined> {
  return promise.then(
    () => undefined,
    (err: unknown) => (isHostError(err) ? err.code : String(err)),
  )
}

async function hostWithDirs(...dirs: string[]) {
  const host = createMemoryHost({ memoryBytes: 8 * 2 ** 30 })
  for (const dir of dirs) await host.mkdir(dir, { recursive: true })
  return host
}

const tmpfsAt = (target: string, ...options: string[]) => ({ source: 'tmpfs', target, fstype: 'tmpfs', options })

describe('tmpfs', () => {
  it('appears in the mount table with an anonymous device, its options and private propagation', async () => {
    const host = await hostWithDirs('/m')
    await host.mount(tmpfsAt('/m', 'size=1m', 'nosuid', 'mode=0700'))
    expect((await host.mounts()).at(-1)).toMatchObject({
      parentId: 1,
      device: expect.stringMatching(/^0:\d+$/),
      root: '/',
      target: '/m',
      fstype: 'tmpfs',
      source: 'tmpfs',
      options: ['rw', 'nosuid'],
      superOptions: ['rw', 'size=1m', 'mode=0700'],
      propagation: 'private',
    })
    expect((await host.stat('/m'))?.mode).toBe(0o700)
  })

  it.each([
    { case: 'size= rounded to pages', options: ['size=100k'], capacityBytes: 100 * 1024 },
    { case: 'half of memory by default', options: [], capacityBytes: 4 * 2 ** 30 },
  ])('statfs capacity: $case', async ({ options, capacityBytes }) => {
    const host = await hostWithDirs('/m')
    await host.mount(tmpfsAt('/m', ...options))
    expect((await host.statfs?.('/m'))?.capacityBytes).toBe(capacityBytes)
  })

  it('a write beyond size= fails with ENOSPC and leaves what fit, as write(2) does', async () => {
    const host = await hostWithDirs('/m')
    await host.mount(tmpfsAt('/m', 'size=1m'))
    await host.writeFile('/m/a', new Uint8Array(MiB / 2))
    expect(await errorCode(host.writeFile('/m/b', new Uint8Array(MiB)))).toBe('ENOSPC')
    expect(host.tree('/m/b')).toMatchObject({ size: MiB / 2 })
    expect(await host.statfs?.('/m')).toMatchObject({ usedBytes: MiB, availableBytes: 0 })
    await host.remove('/m/b')
    expect(await host.statfs?.('/m')).toMatchObject({ usedBytes: MiB / 2 })
  })

  it('nr_inodes limits the entries (ENOSPC); remount size= changes the capacity', async () => {
    const host = await hostWithDirs('/m')
    await host.mount(tmpfsAt('/m', 'nr_inodes=3'))
    await host.mkdir('/m/a')
    await host.writeFile('/m/b', '')
    expect(await errorCode(host.symlink('a', '/m/c'))).toBe('ENOSPC')
    await host.mount({ ...tmpfsAt('/m', 'size=2m'), remount: true })
    expect((await host.statfs?.('/m'))?.capacityBytes).toBe(2 * MiB)
  })

  it('a fresh tmpfs each mount: its content is gone after unmount', async () => {
    const host = await hostWithDirs('/m')
    await host.mount(tmpfsAt('/m'))
    await host.writeFile('/m/f', 'x')
    await host.unmount('/m')
    await host.mount(tmpfsAt('/m'))
    expect(await host.readdir('/m')).toEqual([])
  })
})

describe('bind mounts', () => {
  it('share the same nodes: inode numbers match and a bind of a bind sees writes too', async () => {
    const host = await hostWithDirs('/src', '/b1', '/b2')
    await host.writeFile('/src/f', 'x')
    await host.mount({ source: '/src', target: '/b1', bind: true })
    await host.mount({ source: '/b1', target: '/b2', bind: true })
    await host.writeFile('/b2/g', 'through two binds')
    expect(host.tree('/src/g')).toMatchObject({ text: 'through two binds' })
    expect((await host.stat('/b2/f'))?.ino).toBe((await host.stat('/src/f'))?.ino)
  })

  it.each([
    { case: 'a plain bind does not show mounts below the source', recursive: false, inner: [] as string[] },
    { case: 'a recursive bind copies them', recursive: true, inner: ['marker'] },
  ])('$case', async ({ recursive, inner }) => {
    const host = await hostWithDirs('/src/sub', '/dst')
    await host.mount(tmpfsAt('/src/sub'))
    await host.writeFile('/src/sub/marker', 'x')
    await host.mount({ source: '/src', target: '/dst', bind: true, recursive })
    expect(await host.readdir('/dst/sub')).toEqual(inner)
    expect(await host.isMountPoint('/dst/sub')).toBe(recursive)
  })

  it('a recursive bind into its own subtree copies the submounts once', async () => {
    const host = await hostWithDirs('/a/m', '/a/inner')
    await host.mount(tmpfsAt('/a/m'))
    await host.mount({ source: '/a', target: '/a/inner', bind: true, recursive: true })
    expect(host.mountTargets()).toEqual(['/a/m', '/a/inner', '/a/inner/m'])
  })

  it('copies the read-only flag of the source mount', async () => {
    const host = await hostWithDirs('/m', '/b')
    await host.mount({ ...tmpfsAt('/m'), readOnly: true })
    await host.mount({ source: '/m', target: '/b', bind: true })
    expect(await errorCode(host.writeFile('/b/f', 'x'))).toBe('EROFS')
  })

  it('a remount without bind makes the filesystem read-only through every mount of it', async () => {
    const host = await hostWithDirs('/m', '/b')
    await host.mount(tmpfsAt('/m'))
    await host.mount({ source: '/m', target: '/b', bind: true })
    await host.mount({ source: 'tmpfs', target: '/m', remount: true, readOnly: true })
    expect(await errorCode(host.writeFile('/b/f', 'x'))).toBe('EROFS')
    expect((await host.mounts()).find((e) => e.target === '/b')).toMatchObject({ options: ['rw'], superOptions: ['ro'] })
  })

  it('remount of a path that is not a mount point fails with EINVAL', async () => {
    const host = await hostWithDirs('/d')
    expect(await errorCode(host.mount({ source: '/d', target: '/d', bind: true, remount: true, readOnly: true }))).toBe('EINVAL')
  })

  it('a file that is a bind target cannot be removed or replaced (EBUSY)', async () => {
    const host = await hostWithDirs('/d')
    await host.writeFile('/d/src', 'a')
    await host.writeFile('/d/dst', 'b')
    await host.writeFile('/d/other', 'c')
    await host.mount({ source: '/d/src', target: '/d/dst', bind: true })
    expect(await errorCode(host.remove('/d/dst'))).toBe('EBUSY')
    expect(await errorCode(host.rename('/d/other', '/d/dst'))).toBe('EBUSY')
  })

  it('a bind whose source directory was removed keeps its content alive', async () => {
    const host = await hostWithDirs('/src', '/dst')
    await host.writeFile('/src/f', 'alive')
    await host.mount({ source: '/src', target: '/dst', bind: true })
    await host.removeAll('/src')
    expect(host.tree('/dst/f')).toMatchObject({ text: 'alive' })
    expect((await host.mounts()).at(-1)?.root).toBe('/src//deleted')
  })
})

describe('the mount table', () => {
  it('follows a renamed parent directory, as /proc/self/mountinfo does', async () => {
    const host = await hostWithDirs('/pods/u1/vol')
    await host.mount(tmpfsAt('/pods/u1/vol'))
    await host.rename('/pods/u1', '/pods/u2')
    expect(host.mountTargets()).toEqual(['/pods/u2/vol'])
    expect(await host.isMountPoint('/pods/u2/vol')).toBe(true)
  })

  it('unmount does not follow a symlink unless noFollow is false', async () => {
    const host = await hostWithDirs('/real')
    await host.symlink('/real', '/link')
    await host.mount(tmpfsAt('/link'))
    expect(await errorCode(host.unmount('/link'))).toBe('EINVAL')
    await host.unmount('/link', { noFollow: false })
    expect(host.mountTargets()).toEqual([])
  })

  it('unmount of / fails with EBUSY; unmount of a missing path with ENOENT', async () => {
    const host = createMemoryHost()
    expect(await errorCode(host.unmount('/'))).toBe('EBUSY')
    expect(await errorCode(host.unmount('/missing'))).toBe('ENOENT')
    expect(await host.isMountPoint('/')).toBe(true)
  })

  it('mount ids are never reused', async () => {
    const host = await hostWithDirs('/m')
    await host.mount(tmpfsAt('/m'))
    const first = (await host.mounts()).at(-1)?.id ?? 0
    await host.unmount('/m')
    await host.mount(tmpfsAt('/m'))
    expect((await host.mounts()).at(-1)?.id).toBeGreaterThan(first)
  })
})

describe('the mount table listing kept between calls', () => {
  const line = async (host: ReturnType<typeof createMemoryHost>, target: string) => (await host.mounts()).find((m) => m.target === target)

  it('shows every change: mounts added and removed, a remount, a renamed parent, a removed bind source', async () => {
    const host = createMemoryHost({ memoryBytes: 8 * 2 ** 30 })
    await host.mkdir('/a/m', { recursive: true })
    await host.mkdir('/src', { recursive: true })
    await host.mkdir('/b', { recursive: true })
    const before = await host.mounts()
    await host.mount({ source: 'tmpfs', target: '/a/m', fstype: 'tmpfs' })
    expect((await host.mounts()).length).toBe(before.length + 1)
    expect((await line(host, '/a/m'))?.options).toEqual(['rw'])
    await host.mount({ source: '/a/m', target: '/a/m', remount: true, bind: true, readOnly: true })
    expect((await line(host, '/a/m'))?.options).toEqual(['ro'])
    await host.mount({ source: '/src', target: '/b', bind: true })
    expect((await line(host, '/b'))?.root).toBe('/src')
    await host.unmount('/a/m')
    expect(await line(host, '/a/m')).toBeUndefined()
    await host.mount({ source: 'tmpfs', target: '/a/m', fstype: 'tmpfs' })
    await host.rename('/a', '/c')
    expect(await line(host, '/a/m')).toBeUndefined()
    expect(await line(host, '/c/m')).toBeDefined()
    await host.remove('/src')
    expect((await line(host, '/b'))?.root).toBe('/src//deleted')
    // Unchanged between two calls: the same listing, not a copy.
    expect(await host.mounts()).toBe(await host.mounts())
    // File calls that touch no mount keep it; renaming a file that is a bind's source changes its line.
    const kept = await host.mounts()
    await host.writeFile('/c/file', 'x')
    await host.appendFile('/c/log', 'y')
    await host.remove('/c/file')
    expect(await host.mounts()).toBe(kept)
    await host.writeFile('/c/source', 'z')
    await host.writeFile('/c/target', '')
    await host.mount({ source: '/c/source', target: '/c/target', bind: true })
    expect((await line(host, '/c/target'))?.root).toBe('/c/source')
    await host.rename('/c/source', '/c/moved')
    expect((await line(host, '/c/target'))?.root).toBe('/c/moved')
  })
})
