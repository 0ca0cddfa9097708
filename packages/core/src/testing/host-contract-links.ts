/** The Host contract's symlinks and ownership (registered by `runHostContract`). */
import { expect, it } from 'vitest'
import { type ContractContext, expectHostError } from './host-contract-support.js'

/**
 * Symlinks: made, read and followed as the kernel does.
 *
 * Long by design: the body is a list of independent `it` cases, one per promise of the port, that
 * share only the context; splitting it would scatter one area of the contract over several files.
 */
export function symlinksContract({ h, p, read }: ContractContext): void {
  it('readlink returns the target verbatim; lstat sees the link, stat its target', async () => {
    await h().mkdir(p('real'))
    await h().symlink('real', p('rel'))
    await h().symlink(p('real'), p('abs'))
    expect(await h().readlink(p('rel'))).toBe('real')
    expect(await h().readlink(p('abs'))).toBe(p('real'))
    expect((await h().lstat(p('rel')))?.type).toBe('symlink')
    expect((await h().stat(p('rel')))?.type).toBe('directory')
  })

  it('a dangling link: lstat sees it, stat gives null', async () => {
    await h().symlink(p('nowhere'), p('dangling'))
    expect((await h().lstat(p('dangling')))?.type).toBe('symlink')
    expect(await h().stat(p('dangling'))).toBeNull()
  })

  it('a relative target resolves against the directory of the link', async () => {
    await h().mkdir(p('a', 'b'), { recursive: true })
    await h().writeFile(p('a', 'b', 'f'), 'in b')
    await h().writeFile(p('top'), 'at top')
    await h().symlink('b/f', p('a', 'down'))
    await h().symlink('../top', p('a', 'up'))
    expect(await read(p('a', 'down'))).toBe('in b')
    expect(await read(p('a', 'up'))).toBe('at top')
  })

  it('symlinks in intermediate components are followed', async () => {
    await h().mkdir(p('real'))
    await h().symlink(p('real'), p('alias'))
    await h().writeFile(p('alias', 'f'), 'through the link')
    expect(await read(p('real', 'f'))).toBe('through the link')
    expect(await h().readdir(p('alias'))).toEqual(['f'])
  })

  it('symlink onto an existing path fails with EEXIST; readlink of a file with EINVAL', async () => {
    await h().writeFile(p('f'), 'x')
    await h().symlink('f', p('link'))
    await expectHostError(h().symlink('other', p('f')), 'EEXIST')
    await expectHostError(h().symlink('other', p('link')), 'EEXIST')
    await expectHostError(h().readlink(p('f')), 'EINVAL')
    await expectHostError(h().readlink(p('missing')), 'ENOENT')
  })

  it('remove and rename act on the link, never on its target', async () => {
    await h().writeFile(p('target'), 'kept')
    await h().symlink('target', p('link'))
    await h().writeFile(p('replacement'), 'new')
    await h().rename(p('replacement'), p('link'))
    expect((await h().lstat(p('link')))?.type).toBe('file')
    expect(await read(p('target'))).toBe('kept')
    await h().symlink('target', p('link2'))
    await h().remove(p('link2'))
    expect(await read(p('target'))).toBe('kept')
  })

  it('removeAll does not follow a symlink inside the tree', async () => {
    await h().mkdir(p('outside'))
    await h().writeFile(p('outside', 'f'), 'kept')
    await h().mkdir(p('tree'))
    await h().symlink(p('outside'), p('tree', 'link'))
    await h().removeAll(p('tree'))
    expect(await read(p('outside', 'f'))).toBe('kept')
  })

  it('removeAll of a symlink to a directory removes the link, never the target', async () => {
    await h().mkdir(p('outside'))
    await h().writeFile(p('outside', 'f'), 'kept')
    await h().symlink(p('outside'), p('link'))
    await h().removeAll(p('link'))
    expect(await h().lstat(p('link'))).toBeNull()
    expect(await read(p('outside', 'f'))).toBe('kept')
  })

  it('a symlink loop fails with ELOOP', async () => {
    await h().symlink(p('b'), p('a'))
    await h().symlink(p('a'), p('b'))
    await expectHostError(h().stat(p('a')), 'ELOOP')
    await expectHostError(h().readFile(p('a', 'x')), 'ELOOP')
  })
}

/** Ownership: lchown of a link and of its target. */
export function ownershipContract({ h, p }: ContractContext): void {
  it('lchown changes the link itself, not its target; -1 keeps a value', async () => {
    await h().writeFile(p('target'), 'x')
    await h().symlink('target', p('link'))
    const before = await h().stat(p('target'))
    await h().lchown(p('link'), 1234, 2345)
    expect(await h().lstat(p('link'))).toMatchObject({ uid: 1234, gid: 2345 })
    expect(await h().stat(p('target'))).toMatchObject({ uid: before?.uid, gid: before?.gid })
    await h().lchown(p('target'), 1111, -1)
    expect(await h().stat(p('target'))).toMatchObject({ uid: 1111, gid: before?.gid })
  })
}
