/** The Host contract's directories and files (registered by `runHostContract`). */
import { expect, it } from 'vitest'
import type { Host } from '../host/host.js'
import { joinPath } from '../paths.js'
import { decodeUtf8, encodeUtf8 } from '../text.js'
import { type ContractContext, expectHostError } from './host-contract-support.js'

/**
 * Directories and files: mkdir, read and write, rename, remove, readdir and their errno codes.
 *
 * Long by design: the body is a list of independent `it` cases, one per promise of the port, that
 * share only the context; splitting it would scatter one area of the contract over several files.
 */
export function filesContract({ h, p, root, read }: ContractContext): void {
  it('mkdir creates a directory; a second mkdir fails with EEXIST', async () => {
    await h().mkdir(p('d'))
    expect((await h().lstat(p('d')))?.type).toBe('directory')
    await expectHostError(h().mkdir(p('d')), 'EEXIST')
  })

  it('mkdir needs the parent (ENOENT) unless recursive; recursive accepts an existing directory', async () => {
    await expectHostError(h().mkdir(p('a', 'b')), 'ENOENT')
    await h().mkdir(p('a', 'b', 'c'), { recursive: true })
    await h().mkdir(p('a', 'b'), { recursive: true })
    expect(await h().readdir(p('a', 'b'))).toEqual(['c'])
  })

  it('mkdir through a file fails with ENOTDIR; recursive mkdir onto a file with EEXIST', async () => {
    await h().writeFile(p('f'), 'x')
    await expectHostError(h().mkdir(p('f', 'd'), { recursive: true }), 'ENOTDIR')
    await expectHostError(h().mkdir(p('f'), { recursive: true }), 'EEXIST')
  })

  it('recursive mkdirs that share missing parents, started together, all succeed', async () => {
    const leaves = Array.from({ length: 8 }, (_, i) => p('pod', 'volumes', 'plugin', `v${i}`))
    await Promise.all([...leaves, ...leaves].map((leaf) => h().mkdir(leaf, { recursive: true, mode: 0o750 })))
    expect(await h().readdir(p('pod', 'volumes', 'plugin'))).toEqual(leaves.map((_, i) => `v${i}`))
    for (const leaf of leaves) expect((await h().lstat(leaf))?.type).toBe('directory')
  })

  it('writeFile of no bytes creates an empty file and empties an existing one', async () => {
    await h().writeFile(p('marker'), '')
    expect(await h().stat(p('marker'))).toMatchObject({ type: 'file', size: 0 })
    await h().writeFile(p('full'), 'content', { mode: 0o600 })
    await h().writeFile(p('full'), new Uint8Array(0))
    expect(await h().stat(p('full'))).toMatchObject({ type: 'file', size: 0, mode: 0o600 })
    await h().writeFile(p('new'), '', { mode: 0o640 })
    expect((await h().stat(p('new')))?.mode).toBe(0o640)
    await h().mkdir(p('dir'))
    await expectHostError(h().writeFile(p('dir'), ''), 'EISDIR')
    await expectHostError(h().writeFile(p('missing', 'f'), ''), 'ENOENT')
  })

  it('writeFile creates and replaces a file; readFile returns its bytes', async () => {
    await h().writeFile(p('f'), 'first')
    await h().writeFile(p('f'), 'second')
    expect(await read(p('f'))).toBe('second')
    await h().writeFile(p('bytes'), new Uint8Array([0, 1, 255]))
    expect([...(await h().readFile(p('bytes')))]).toEqual([0, 1, 255])
  })

  it('writeFileAt writes into a file at an offset, keeps every other byte, grows it only past its end; ENOENT when missing', async (ctx) => {
    const host = h()
    if (!host.writeFileAt) return ctx.skip()
    await host.writeFile(p('log'), new Uint8Array(16), { mode: 0o600 })
    await host.writeFileAt(p('log'), 4, encodeUtf8('abcd'), { sync: true })
    await host.writeFileAt(p('log'), 8, encodeUtf8('ef'))
    expect([...(await host.readFile(p('log')))]).toEqual([0, 0, 0, 0, 97, 98, 99, 100, 101, 102, 0, 0, 0, 0, 0, 0])
    expect((await host.stat(p('log')))?.mode).toBe(0o600)
    await host.writeFileAt(p('log'), 14, encodeUtf8('ghij'))
    expect((await host.stat(p('log')))?.size).toBe(18)
    expect(decodeUtf8((await host.readFile(p('log'))).subarray(14))).toBe('ghij')
    await expectHostError(host.writeFileAt(p('missing'), 0, new Uint8Array([1])), 'ENOENT')
    expect(await host.lstat(p('missing'))).toBeNull()
    await host.mkdir(p('dir'))
    await expectHostError(host.writeFileAt(p('dir'), 0, new Uint8Array([1])), 'EISDIR')
  })

  it('stat reports the type and size, distinct inodes, and one device within a filesystem', async () => {
    await h().mkdir(p('d'))
    await h().writeFile(p('d', 'f'), 'hello')
    await h().writeFile(p('d', 'g'), '')
    const f = await h().stat(p('d', 'f'))
    const g = await h().stat(p('d', 'g'))
    expect(f).toMatchObject({ type: 'file', size: 5 })
    expect(g?.ino).not.toBe(f?.ino)
    expect(g?.dev).toBe(f?.dev)
    expect((await h().stat(p('d')))?.dev).toBe(f?.dev)
  })

  it('lstat and stat give null for a missing path and fail with ENOTDIR through a file', async () => {
    expect(await h().lstat(p('missing'))).toBeNull()
    expect(await h().stat(p('missing', 'deeper'))).toBeNull()
    await h().writeFile(p('f'), 'x')
    await expectHostError(h().stat(p('f', 'x')), 'ENOTDIR')
  })

  it.each([
    { call: 'readFile of a missing file', code: 'ENOENT', run: (host: Host, dir: string) => host.readFile(joinPath(dir, 'missing')) },
    { call: 'readFile of a directory', code: 'EISDIR', run: (host: Host, dir: string) => host.readFile(dir) },
    { call: 'writeFile onto a directory', code: 'EISDIR', run: (host: Host, dir: string) => host.writeFile(dir, 'x') },
    { call: 'writeFile in a missing directory', code: 'ENOENT', run: (host: Host, dir: string) => host.writeFile(joinPath(dir, 'no', 'f'), 'x') },
    { call: 'readdir of a missing directory', code: 'ENOENT', run: (host: Host, dir: string) => host.readdir(joinPath(dir, 'missing')) },
    { call: 'readdir of a file', code: 'ENOTDIR', run: (host: Host, dir: string) => host.readdir(joinPath(dir, 'file')) },
  ] as const)('$call fails with $code', async ({ code, run }) => {
    await h().mkdir(p('dir'))
    await h().writeFile(p('dir', 'file'), 'x')
    await expectHostError(run(h(), p('dir')), code)
  })

  it('readdir lists the names, sorted', async () => {
    for (const name of ['b', 'c', 'a']) await h().writeFile(p(name), name)
    await h().mkdir(p('0-dir'))
    expect(await h().readdir(root())).toEqual(['0-dir', 'a', 'b', 'c'])
  })

  it('rename moves a file and replaces an existing one', async () => {
    await h().writeFile(p('a'), 'new')
    await h().writeFile(p('b'), 'old')
    await h().rename(p('a'), p('b'))
    expect(await h().lstat(p('a'))).toBeNull()
    expect(await read(p('b'))).toBe('new')
  })

  it('rename moves a directory with its contents, and may replace an empty directory', async () => {
    await h().mkdir(p('src', 'sub'), { recursive: true })
    await h().writeFile(p('src', 'sub', 'f'), 'x')
    await h().mkdir(p('empty'))
    await h().rename(p('src'), p('empty'))
    expect(await read(p('empty', 'sub', 'f'))).toBe('x')
    expect(await h().lstat(p('src'))).toBeNull()
  })

  it.each([
    { case: 'a missing source', from: 'missing', to: 'x', code: 'ENOENT' },
    { case: 'a directory onto a non-empty directory', from: 'dir', to: 'full', code: 'ENOTEMPTY' },
    { case: 'a directory onto a file', from: 'dir', to: 'file', code: 'ENOTDIR' },
    { case: 'a file onto a directory', from: 'file', to: 'dir', code: 'EISDIR' },
    { case: 'a directory into itself', from: 'dir', to: 'dir/inside', code: 'EINVAL' },
  ] as const)('rename of $case fails with $code', async ({ from, to, code }) => {
    await h().mkdir(p('dir'))
    await h().mkdir(p('full'))
    await h().writeFile(p('full', 'f'), 'x')
    await h().writeFile(p('file'), 'x')
    await expectHostError(h().rename(p(from), p(to)), code)
  })

  it('remove deletes a file and an empty directory; ENOTEMPTY and ENOENT otherwise', async () => {
    await h().mkdir(p('d'))
    await h().writeFile(p('d', 'f'), 'x')
    await expectHostError(h().remove(p('d')), 'ENOTEMPTY')
    await h().remove(p('d', 'f'))
    await h().remove(p('d'))
    expect(await h().lstat(p('d'))).toBeNull()
    await expectHostError(h().remove(p('d')), 'ENOENT')
  })

  it('removeAll deletes a tree, and a missing path is not an error', async () => {
    await h().mkdir(p('t', 'a', 'b'), { recursive: true })
    await h().writeFile(p('t', 'a', 'b', 'f'), 'x')
    await h().writeFile(p('t', 'g'), 'x')
    await h().removeAll(p('t'))
    expect(await h().lstat(p('t'))).toBeNull()
    await h().removeAll(p('t'))
  })

  it('chmod sets the permission bits exactly, setgid included', async () => {
    await h().mkdir(p('d'))
    await h().chmod(p('d'), 0o2775)
    expect((await h().stat(p('d')))?.mode).toBe(0o2775)
    await h().writeFile(p('f'), 'x')
    await h().chmod(p('f'), 0o640)
    expect((await h().stat(p('f')))?.mode).toBe(0o640)
  })

  it('writeFile applies its mode on creation and keeps the mode of an existing file', async () => {
    await h().writeFile(p('f'), 'x', { mode: 0o600 })
    expect((await h().stat(p('f')))?.mode).toBe(0o600)
    await h().writeFile(p('f'), 'y', { mode: 0o644 })
    expect((await h().stat(p('f')))?.mode).toBe(0o600)
  })
}
