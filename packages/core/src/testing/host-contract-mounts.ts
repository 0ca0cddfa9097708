/** The Host contract's mounts (registered by `runHostContract`). */
import { expect, it } from 'vitest'
import { isHostError } from '../errors.js'
import { removeUnmounted } from '../plugins/util/remove-unmounted.js'
import { mountReferencesContract } from './host-contract-refs-sizes.js'
import { type ContractContext, MiB, expectHostError } from './host-contract-support.js'

/**
 * Mounts: tmpfs and binds, the mount table, mount points, unmounts and what survives them.
 *
 * Long by design: the body is a list of independent `it` cases, one per promise of the port, that
 * share only the context; splitting it would scatter one area of the contract over several files.
 */
export function mountsContract(contract: ContractContext): void {
  const { h, p, read, entryAt } = contract
  const tmpfs = (target: string, ...options: string[]) => h().mount({ source: 'tmpfs', target, fstype: 'tmpfs', options })
  mountReferencesContract(contract)

  it('a tmpfs hides the directory below it until it is unmounted', async () => {
    await h().mkdir(p('m'))
    await h().writeFile(p('m', 'under'), 'below the mount')
    const before = await h().stat(p('m'))
    await tmpfs(p('m'))
    expect(await h().isMountPoint(p('m'))).toBe(true)
    expect(await h().readdir(p('m'))).toEqual([])
    expect((await h().stat(p('m')))?.dev).not.toBe(before?.dev)
    await h().writeFile(p('m', 'on-tmpfs'), 'x')
    const entry = await entryAt(p('m'))
    expect(entry).toMatchObject({ fstype: 'tmpfs', source: 'tmpfs', target: p('m') })
    expect(entry?.options).toContain('rw')
    await h().unmount(p('m'))
    expect(await h().isMountPoint(p('m'))).toBe(false)
    expect(await h().readdir(p('m'))).toEqual(['under'])
    expect(await read(p('m', 'under'))).toBe('below the mount')
    expect(await entryAt(p('m'))).toBeUndefined()
  })

  it('isMountPoint is false for an ordinary directory and fails with ENOENT for a missing path', async () => {
    await h().mkdir(p('d'))
    expect(await h().isMountPoint(p('d'))).toBe(false)
    await expectHostError(h().isMountPoint(p('missing')), 'ENOENT')
  })

  it('mount onto a missing target fails with ENOENT; unmount of a plain directory with EINVAL', async () => {
    await expectHostError(tmpfs(p('missing')), 'ENOENT')
    await h().mkdir(p('d'))
    await expectHostError(h().unmount(p('d')), 'EINVAL')
  })

  it('a bind mount shows the same tree: writes through either side are seen on the other', async () => {
    await h().mkdir(p('src'))
    await h().mkdir(p('dst'))
    await h().writeFile(p('dst', 'hidden'), 'x')
    await h().writeFile(p('src', 'a'), 'from source')
    await h().mount({ source: p('src'), target: p('dst'), bind: true })
    expect(await h().isMountPoint(p('dst'))).toBe(true)
    expect(await h().isMountPoint(p('src'))).toBe(false)
    expect(await read(p('dst', 'a'))).toBe('from source')
    await h().writeFile(p('dst', 'b'), 'through the bind')
    expect(await read(p('src', 'b'))).toBe('through the bind')
    expect(await entryAt(p('dst'))).toBeDefined()
    await h().unmount(p('dst'))
    expect(await h().readdir(p('dst'))).toEqual(['hidden'])
    expect(await h().readdir(p('src'))).toEqual(['a', 'b'])
  })

  it('a bind of a subdirectory reports its root and the device of its source', async () => {
    await h().mkdir(p('t'))
    await tmpfs(p('t'))
    await h().mkdir(p('t', 'sub'))
    await h().mkdir(p('b'))
    await h().mount({ source: p('t', 'sub'), target: p('b'), bind: true })
    const bound = await entryAt(p('b'))
    expect(bound?.root).toBe('/sub')
    expect(bound?.device).toBe((await entryAt(p('t')))?.device)
  })

  it('a file binds onto a file; a directory onto a file fails with ENOTDIR', async () => {
    await h().writeFile(p('src'), 'source content')
    await h().writeFile(p('dst'), 'target content')
    await h().mount({ source: p('src'), target: p('dst'), bind: true })
    expect(await read(p('dst'))).toBe('source content')
    expect(await h().isMountPoint(p('dst'))).toBe(true)
    await h().unmount(p('dst'))
    expect(await read(p('dst'))).toBe('target content')
    await h().mkdir(p('dir'))
    await expectHostError(h().mount({ source: p('dir'), target: p('dst'), bind: true }), 'ENOTDIR')
    await expectHostError(tmpfs(p('dst')), 'ENOTDIR')
  })

  it('a read-only remount of a bind refuses writes with EROFS; the source stays writable', async () => {
    await h().mkdir(p('src'))
    await h().mkdir(p('dst'))
    await h().writeFile(p('src', 'f'), 'x')
    await h().mount({ source: p('src'), target: p('dst'), bind: true })
    await h().mount({ source: p('src'), target: p('dst'), bind: true, remount: true, readOnly: true })
    await expectHostError(h().writeFile(p('dst', 'f'), 'y'), 'EROFS')
    await expectHostError(h().mkdir(p('dst', 'd')), 'EROFS')
    await expectHostError(h().remove(p('dst', 'f')), 'EROFS')
    expect((await entryAt(p('dst')))?.options).toContain('ro')
    await h().writeFile(p('src', 'g'), 'still writable')
    expect(await read(p('dst', 'g'))).toBe('still writable')
    await h().mount({ source: p('src'), target: p('dst'), bind: true, remount: true, readOnly: false })
    await h().writeFile(p('dst', 'f'), 'writable again')
    expect(await read(p('src', 'f'))).toBe('writable again')
  })

  it('a read-only tmpfs refuses writes with EROFS', async () => {
    await h().mkdir(p('m'))
    await h().mount({ source: 'tmpfs', target: p('m'), fstype: 'tmpfs', readOnly: true })
    await expectHostError(h().writeFile(p('m', 'f'), 'x'), 'EROFS')
    expect((await entryAt(p('m')))?.options).toContain('ro')
  })

  it('a mount through a symlink lands on the resolved path', async () => {
    await h().mkdir(p('real'))
    await h().symlink(p('real'), p('link'))
    await tmpfs(p('link'))
    expect(await h().isMountPoint(p('real'))).toBe(true)
    expect(await entryAt(p('real'))).toBeDefined()
    expect(await entryAt(p('link'))).toBeUndefined()
    await h().unmount(p('real'))
  })

  it('isMountPoint resolves a parent that is a symlink, and follows a last component that is one', async () => {
    await h().mkdir(p('real', 'm'), { recursive: true })
    await h().symlink(p('real'), p('dirlink'))
    await h().symlink(p('real', 'm'), p('mlink'))
    await tmpfs(p('real', 'm'))
    expect(await h().isMountPoint(p('dirlink', 'm'))).toBe(true)
    expect(await h().isMountPoint(p('mlink'))).toBe(true)
    // Asked again once the mount table has been read since the mount.
    await h().mounts()
    expect(await h().isMountPoint(p('dirlink', 'm'))).toBe(true)
    expect(await h().isMountPoint(p('mlink'))).toBe(true)
    await h().unmount(p('real', 'm'))
    expect(await h().isMountPoint(p('dirlink', 'm'))).toBe(false)
    expect(await h().isMountPoint(p('mlink'))).toBe(false)
  })

  it('a second mount on the same path goes on top; unmount uncovers the first with its data', async () => {
    await h().mkdir(p('m'))
    await tmpfs(p('m'))
    await h().writeFile(p('m', 'first'), '1')
    await tmpfs(p('m'))
    expect(await h().readdir(p('m'))).toEqual([])
    await h().unmount(p('m'))
    expect(await h().isMountPoint(p('m'))).toBe(true)
    expect(await read(p('m', 'first'))).toBe('1')
  })

  it('lists mounts in mount order with the parent mount as parentId; propagation as requested', async () => {
    await h().mkdir(p('outer'))
    await h().mount({ source: 'tmpfs', target: p('outer'), fstype: 'tmpfs', propagation: 'shared' })
    await h().mkdir(p('outer', 'inner'))
    await h().mount({ source: 'tmpfs', target: p('outer', 'inner'), fstype: 'tmpfs', propagation: 'private' })
    const entries = await h().mounts()
    const outer = entries.findIndex((e) => e.target === p('outer'))
    const inner = entries.findIndex((e) => e.target === p('outer', 'inner'))
    expect(outer).toBeGreaterThanOrEqual(0)
    expect(inner).toBeGreaterThan(outer)
    expect(entries[inner]?.parentId).toBe(entries[outer]?.id)
    expect(entries[outer]?.propagation).toBe('shared')
    expect(entries[inner]?.propagation).toBe('private')
  })

  it('remove and rename of a mount point fail with EBUSY; rename across mounts with EXDEV', async () => {
    await h().mkdir(p('m'))
    await tmpfs(p('m'))
    await h().writeFile(p('m', 'f'), 'x')
    await h().writeFile(p('outside'), 'x')
    await expectHostError(h().remove(p('m')), 'EBUSY')
    await expectHostError(h().rename(p('m'), p('moved')), 'EBUSY')
    await expectHostError(h().rename(p('m', 'f'), p('moved')), 'EXDEV')
    await expectHostError(h().rename(p('outside'), p('m', 'g')), 'EXDEV')
    expect(await read(p('m', 'f'))).toBe('x')
  })

  it('removeUnmounted removes in order, skips what is missing, and stops at a mount point or a non-empty directory', async () => {
    const vol = p('pod', 'volumes', 'vol')
    const paths = [p('pod', 'volumes', 'vol', 'mount'), p('pod', 'volumes', 'vol', 'vol_data.json'), vol]
    await h().mkdir(paths[0] as string, { recursive: true })
    await h().writeFile(paths[1] as string, '{}')
    await tmpfs(paths[0] as string)
    await h().writeFile(p('pod', 'volumes', 'vol', 'mount', 'data'), 'keep me')
    // Whether or not the host has read its mount table since the mount.
    for (const readTable of [false, true]) {
      if (readTable) await h().mounts()
      const err = await expectHostError(removeUnmounted(h(), paths), 'EBUSY')
      expect(err.path).toBe(paths[0])
      expect(await read(p('pod', 'volumes', 'vol', 'mount', 'data'))).toBe('keep me')
      expect(await read(paths[1] as string)).toBe('{}')
    }
    await h().unmount(paths[0] as string)
    // A directory with something left in it ends it: its parent stays.
    await h().writeFile(p('pod', 'volumes', 'vol', 'mount', 'left'), 'x')
    expect((await expectHostError(removeUnmounted(h(), paths), 'ENOTEMPTY')).path).toBe(paths[0])
    expect(await read(paths[1] as string)).toBe('{}')
    await h().remove(p('pod', 'volumes', 'vol', 'mount', 'left'))
    await removeUnmounted(h(), paths)
    expect(await h().lstat(vol)).toBeNull()
    // Missing paths (and a missing parent) are skipped; then the rest goes.
    await h().mkdir(p('pod', 'other'))
    await removeUnmounted(h(), [p('pod', 'gone'), p('pod', 'gone', 'below'), p('pod', 'other')])
    expect(await h().readdir(p('pod', 'volumes'))).toEqual([])
    expect(await h().lstat(p('pod', 'other'))).toBeNull()
  })

  it('removeUnmounted with unmountLast unmounts a tmpfs at the last path, then removes it; a mount point before it still ends it', async () => {
    const dir = p('pod', 'volumes', 'm')
    const marker = p('pod', 'plugins', 'm', 'ready')
    const paths = [marker, p('pod', 'plugins', 'm'), dir]
    // Whether or not the host has read its mount table since the mount.
    for (const readTable of [false, true]) {
      await h().mkdir(dir, { recursive: true })
      await h().mkdir(p('pod', 'plugins', 'm'), { recursive: true })
      await h().writeFile(marker, '')
      await tmpfs(dir)
      await h().writeFile(p('pod', 'volumes', 'm', 'on-tmpfs'), 'gone with the tmpfs')
      if (readTable) await h().mounts()
      await removeUnmounted(h(), paths, { unmountLast: true })
      for (const path of paths) expect(await h().lstat(path)).toBeNull()
      expect((await h().mounts()).some((m) => m.target === dir)).toBe(false)
    }
    // Not a mount point: removed as the others.
    await h().mkdir(dir, { recursive: true })
    await removeUnmounted(h(), [dir], { unmountLast: true })
    expect(await h().lstat(dir)).toBeNull()
    // Only the last path is unmounted: a mount point before it ends it with EBUSY, nothing unmounted.
    await h().mkdir(p('pod', 'first'), { recursive: true })
    await h().mkdir(dir, { recursive: true })
    await tmpfs(p('pod', 'first'))
    expect((await expectHostError(removeUnmounted(h(), [p('pod', 'first'), dir], { unmountLast: true }), 'EBUSY')).path).toBe(p('pod', 'first'))
    expect(await h().isMountPoint(p('pod', 'first'))).toBe(true)
    expect((await h().lstat(dir))?.type).toBe('directory')
    await h().unmount(p('pod', 'first'))
  })

  it('removeUnmounted with unmountLast unmounts once: a mount stacked below is left (EBUSY), files below the tmpfs are kept (ENOTEMPTY)', async () => {
    const dir = p('pod', 'volumes', 'm')
    await h().mkdir(dir, { recursive: true })
    await tmpfs(dir)
    await h().writeFile(p('pod', 'volumes', 'm', 'lower'), 'on the first tmpfs')
    await tmpfs(dir)
    const stacked = await expectHostError(removeUnmounted(h(), [p('pod', 'before'), dir], { unmountLast: true }), 'EBUSY')
    expect(stacked.path).toBe(dir)
    expect(await h().isMountPoint(dir)).toBe(true)
    expect(await read(p('pod', 'volumes', 'm', 'lower'))).toBe('on the first tmpfs')
    await h().unmount(dir)
    // A file in the directory below the tmpfs: the tmpfs goes, the directory and the file stay.
    await h().writeFile(p('pod', 'volumes', 'm', 'below'), 'under the mount')
    await tmpfs(dir)
    expect((await expectHostError(removeUnmounted(h(), [dir], { unmountLast: true }), 'ENOTEMPTY')).path).toBe(dir)
    expect(await h().isMountPoint(dir)).toBe(false)
    expect(await read(p('pod', 'volumes', 'm', 'below'))).toBe('under the mount')
  })

  it('removeAll refuses to cross a mount point (EBUSY) and leaves the mounted data intact', async () => {
    await h().mkdir(p('pod', 'volumes', 'vol'), { recursive: true })
    await h().mkdir(p('data'))
    await h().writeFile(p('data', 'precious'), 'keep me')
    await h().mount({ source: p('data'), target: p('pod', 'volumes', 'vol'), bind: true })
    await expectHostError(h().removeAll(p('pod')), 'EBUSY')
    expect(await read(p('pod', 'volumes', 'vol', 'precious'))).toBe('keep me')
    expect(await read(p('data', 'precious'))).toBe('keep me')
    await h().unmount(p('pod', 'volumes', 'vol'))
    await h().removeAll(p('pod'))
    expect(await h().lstat(p('pod'))).toBeNull()
    expect(await read(p('data', 'precious'))).toBe('keep me')
  })

  it('removeAll of a path that is itself a mount point fails with EBUSY and removes nothing', async () => {
    await h().mkdir(p('vol'))
    await h().mkdir(p('data'))
    await h().writeFile(p('data', 'precious'), 'keep me')
    await h().mount({ source: p('data'), target: p('vol'), bind: true })
    await expectHostError(h().removeAll(p('vol')), 'EBUSY')
    expect(await read(p('data', 'precious'))).toBe('keep me')
    expect(await h().isMountPoint(p('vol'))).toBe(true)
  })

  it('unmount does not follow a symlink: a link to a mount point fails with EINVAL and the mount stays', async () => {
    await h().mkdir(p('m'))
    await h().symlink(p('m'), p('link'))
    await tmpfs(p('m'))
    await expectHostError(h().unmount(p('link')), 'EINVAL')
    expect(await h().isMountPoint(p('m'))).toBe(true)
    await h().unmount(p('m'))
  })

  it('a subPath bind creates a missing sub path inside the volume, never through a symlink', async (t) => {
    const subPaths = h().subPaths
    if (!subPaths) return t.skip()
    await h().mkdir(p('vol', 'real'), { recursive: true })
    await h().chmod(p('vol'), 0o2770)
    await h().mkdir(p('outside'))
    await h().symlink(p('outside'), p('vol', 'escape'))
    await h().symlink(p('outside', 'new'), p('vol', 'dangling'))
    await h().symlink(p('vol', 'real'), p('vol', 'inside'))
    for (const t of ['t1', 't2', 't3', 't4']) await h().mkdir(p(t))
    // Missing: made component by component, with the mode of the volume's root.
    await subPaths.bind(p('vol'), 'a/b/c', p('t1'))
    for (const dir of [['a'], ['a', 'b'], ['a', 'b', 'c']]) {
      const info = await h().lstat(p('vol', ...dir))
      expect([info?.type, info?.mode]).toEqual(['directory', 0o2770])
    }
    await h().writeFile(p('t1', 'f'), 'through the bind')
    expect(await read(p('vol', 'a', 'b', 'c', 'f'))).toBe('through the bind')
    // A symlink in the middle that leads out of the volume: refused, nothing made outside.
    await expectHostError(subPaths.bind(p('vol'), 'escape/x/y', p('t2')), 'EACCES')
    // A dangling symlink where a directory is to be made: never followed (EEXIST; EACCES where the
    // host resolves the sub path beneath the volume, which refuses an absolute link outright).
    const dangling = await subPaths.bind(p('vol'), 'dangling/x', p('t3')).catch((err: unknown) => err)
    expect(isHostError(dangling, 'EEXIST', 'EACCES'), String(dangling)).toBe(true)
    expect(await h().readdir(p('outside'))).toEqual([])
    expect(await h().isMountPoint(p('t2'))).toBe(false)
    expect(await h().isMountPoint(p('t3'))).toBe(false)
    // A symlink that stays inside the volume is followed, as the kubelet does.
    await subPaths.bind(p('vol'), 'inside/new', p('t4'))
    expect((await h().lstat(p('vol', 'real', 'new')))?.type).toBe('directory')
  })

  it('unmount of a mount with a mount below it fails with EBUSY; a lazy unmount detaches both', async () => {
    await h().mkdir(p('outer'))
    await tmpfs(p('outer'))
    await h().mkdir(p('outer', 'inner'))
    await tmpfs(p('outer', 'inner'))
    await expectHostError(h().unmount(p('outer')), 'EBUSY')
    await h().unmount(p('outer'), { lazy: true })
    expect(await h().isMountPoint(p('outer'))).toBe(false)
    const targets = (await h().mounts()).map((e) => e.target)
    expect(targets).not.toContain(p('outer'))
    expect(targets).not.toContain(p('outer', 'inner'))
  })

  it('a tmpfs honours size=: statfs reports it and writes beyond it fail with ENOSPC', async (t) => {
    await h().mkdir(p('m'))
    await tmpfs(p('m'), 'size=1m')
    const statfs = h().statfs?.bind(h())
    if (statfs) {
      const stats = await statfs(p('m'))
      expect(stats.capacityBytes).toBe(MiB)
      await h().writeFile(p('m', 'quarter'), new Uint8Array(MiB / 4))
      expect((await statfs(p('m'))).usedBytes).toBeGreaterThanOrEqual(MiB / 4)
    }
    await expectHostError(h().writeFile(p('m', 'big'), new Uint8Array(2 * MiB)), 'ENOSPC')
    if (!statfs) t.skip('statfs is not a capability of this host')
  })
}
