/**
 * The Host contract: the behaviour every Host implementation shares, checked by one suite that each
 * adapter runs against itself (the memory host in CI, the Linux host as root under /tmp). It asserts
 * only what the Linux kernel also does: errno codes, what is visible where, what survives an
 * unmount; never exact device numbers, mount ids or inode numbers.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { HostErrorCode } from '../errors.js'
import { HostError } from '../errors.js'
import type { Host, MountEntry } from '../host/host.js'
import { joinPath } from '../paths.js'
import { removeUnmounted } from '../plugins/util/remove-unmounted.js'
import { filesystemSizeContract, mountReferencesContract } from './host-contract-refs-sizes.js'

/** Parts of the contract a host can be excused from where it runs (they are reported as skipped). */
export type HostContractArea = 'files' | 'symlinks' | 'ownership' | 'mounts' | 'devices'

/** A host under test and the directory the suite may use. */
export interface HostContractSetup {
  readonly host: Host
  /** An existing, empty directory, given as a canonical absolute path (no symlinks in it). */
  readonly root: string
  /** Runs after each test, once the suite has unmounted what it mounted under `root`. */
  readonly cleanup?: () => Promise<void>
}

export interface HostContractOptions {
  /** Areas to skip, e.g. `['mounts', 'devices']` for a host that is not running as root. @default [] */
  readonly skip?: readonly HostContractArea[]
}

interface TextCodecs {
  TextEncoder: new () => { encode(text: string): Uint8Array }
  TextDecoder: new () => { decode(bytes: Uint8Array): string }
}
const codecs = globalThis as unknown as TextCodecs
const decoder = new codecs.TextDecoder()
const encoder = new codecs.TextEncoder()
const text = (bytes: Uint8Array): string => decoder.decode(bytes)
const MiB = 2 ** 20

/** Awaits `promise`, expects it to reject with a HostError of `code`, and returns that error. */
export async function expectHostError(promise: Promise<unknown>, code: HostErrorCode): Promise<HostError> {
  const error = await promise.then(
    () => undefined,
    (err: unknown) => err,
  )
  expect(error, `expected a HostError ${code}`).toBeInstanceOf(HostError)
  expect((error as HostError).code).toBe(code)
  return error as HostError
}

function isUnder(target: string, root: string): boolean {
  return target === root || target.startsWith(`${root}/`)
}

/**
 * Registers the Host contract suite (vitest `describe`/`it`) for one implementation. `setup` runs
 * before each test and gives a fresh root directory; after each test the suite lazily unmounts
 * everything under it and detaches the loop devices it attached, then calls `cleanup`.
 *
 * @example
 * runHostContract('memory host', async () => ({ host: createMemoryHost(), root: '/contract' }))
 */
export function runHostContract(name: string, setup: () => Promise<HostContractSetup>, options: HostContractOptions = {}): void {
  const skipped = new Set(options.skip ?? [])

  describe(`Host contract: ${name}`, () => {
    let current: HostContractSetup | undefined
    let attached: string[] = []

    const ctx = (): HostContractSetup => {
      if (!current) throw new Error('host contract: setup did not run')
      return current
    }
    const h = (): Host => ctx().host
    const p = (...parts: string[]): string => joinPath(ctx().root, ...parts)
    const read = async (path: string): Promise<string> => text(await h().readFile(path))
    const entryAt = async (target: string): Promise<MountEntry | undefined> => (await h().mounts()).findLast((e) => e.target === target)
    const attach = async (file: string, attachOptions?: { readonly readOnly?: boolean }): Promise<string> => {
      const loops = h().loopDevices
      if (!loops) throw new Error('host contract: no loopDevices')
      const device = await loops.attach(file, attachOptions)
      attached.push(device)
      return device
    }

    beforeEach(async () => {
      current = await setup()
      attached = []
    })

    afterEach(async () => {
      const { host, root, cleanup } = ctx()
      // Lazy, deepest and latest first; a few rounds because a lazy unmount takes its children along.
      for (let round = 0; round < 5; round++) {
        const under = (await host.mounts()).filter((e) => isUnder(e.target, root)).reverse()
        if (under.length === 0) break
        for (const entry of under) await host.unmount(entry.target, { lazy: true }).catch(() => undefined)
      }
      for (const device of attached) await host.loopDevices?.detach(device).catch(() => undefined)
      current = undefined
      await cleanup?.()
    })

    describe.skipIf(skipped.has('files'))('directories and files', () => {
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
        expect(await h().readdir(ctx().root)).toEqual(['0-dir', 'a', 'b', 'c'])
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
    })

    describe.skipIf(skipped.has('symlinks'))('symlinks', () => {
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
    })

    describe.skipIf(skipped.has('ownership'))('ownership', () => {
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
    })

    describe.skipIf(skipped.has('mounts'))('mounts', () => {
      const tmpfs = (target: string, ...options: string[]) => h().mount({ source: 'tmpfs', target, fstype: 'tmpfs', options })
      mountReferencesContract({ h, p, attach })

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
        // A dangling symlink where a directory is to be made: never followed.
        await expectHostError(subPaths.bind(p('vol'), 'dangling/x', p('t3')), 'EEXIST')
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
    })

    describe.skipIf(skipped.has('devices'))('loop devices and filesystems', () => {
      filesystemSizeContract({ h, p, attach })
      it('attach, find and detach a loop device over a file; detaching twice fails with ENXIO', async (t) => {
        const loops = h().loopDevices
        if (!loops) return t.skip('no loopDevices capability')
        await h().writeFile(p('disk.img'), new Uint8Array(32 * MiB))
        const device = await attach(p('disk.img'))
        expect(device).toMatch(/^\/dev\/loop\d+$/)
        expect(await loops.find(p('disk.img'))).toContain(device)
        expect((await h().stat(device))?.type).toBe('block-device')
        if (h().blockDevices) expect(await h().blockDevices?.size(device)).toBe(32 * MiB)
        await loops.detach(device)
        expect(await loops.find(p('disk.img'))).not.toContain(device)
        await expectHostError(loops.detach(device), 'ENXIO')
      })

      it('status: a new attachment on every attach, the mount points of its filesystem, held while mounted; null when detached', async (t) => {
        const loops = h().loopDevices
        const fs = h().filesystems
        if (!loops || !fs) return t.skip('needs loopDevices and filesystems')
        await h().writeFile(p('disk.img'), new Uint8Array(32 * MiB))
        const device = await attach(p('disk.img'))
        const first = await loops.status(device)
        expect(first).toEqual({ attachment: expect.any(String), mountPoints: [], held: false })
        await fs.format(device, 'ext4')
        await h().mkdir(p('mnt'))
        await h().mkdir(p('bind'))
        await h().mount({ source: device, target: p('mnt'), fstype: 'ext4' })
        await h().mount({ source: p('mnt'), target: p('bind'), bind: true })
        expect(await loops.status(device)).toEqual({ attachment: first?.attachment, mountPoints: [p('mnt'), p('bind')], held: true })
        await h().unmount(p('bind'))
        await h().unmount(p('mnt'))
        expect((await loops.status(device))?.held).toBe(false)
        await loops.detach(device)
        expect(await loops.status(device)).toBeNull()
        // The same file attached again, maybe on the same device: another attachment.
        const again = await attach(p('disk.img'))
        expect((await loops.status(again))?.attachment).not.toBe(first?.attachment)
      })

      it('refreshCapacity picks up a grown backing file', async (t) => {
        const loops = h().loopDevices
        const blocks = h().blockDevices
        if (!loops || !blocks) return t.skip('needs loopDevices and blockDevices')
        await h().writeFile(p('disk.img'), new Uint8Array(8 * MiB))
        const device = await attach(p('disk.img'))
        await h().writeFile(p('disk.img'), new Uint8Array(12 * MiB))
        await loops.refreshCapacity(device)
        expect(await blocks.size(device)).toBe(12 * MiB)
      })

      it('format, mount, and find the data again after unmount and mount', async (t) => {
        const fs = h().filesystems
        if (!h().loopDevices || !fs) return t.skip('needs loopDevices and filesystems')
        await h().writeFile(p('disk.img'), new Uint8Array(32 * MiB))
        const device = await attach(p('disk.img'))
        await h().mkdir(p('mnt'))
        expect(await fs.detect(device)).toBeNull()
        await expectHostError(h().mount({ source: device, target: p('mnt'), fstype: 'ext4' }), 'EINVAL')
        await fs.format(device, 'ext4')
        expect(await fs.detect(device)).toBe('ext4')
        await fs.check(device, 'ext4')
        await h().mount({ source: device, target: p('mnt'), fstype: 'ext4' })
        expect(await entryAt(p('mnt'))).toMatchObject({ fstype: 'ext4', source: device })
        if (h().blockDevices) expect(await h().blockDevices?.isOpen(device)).toBe(true)
        const statfs = h().statfs?.bind(h())
        if (statfs) {
          const { capacityBytes } = await statfs(p('mnt'))
          expect(capacityBytes).toBeGreaterThan(0)
          expect(capacityBytes).toBeLessThanOrEqual(32 * MiB)
        }
        await h().writeFile(p('mnt', 'data'), encoder.encode('persisted'))
        await h().unmount(p('mnt'))
        if (h().blockDevices) expect(await h().blockDevices?.isOpen(device)).toBe(false)
        expect(await h().lstat(p('mnt', 'data'))).toBeNull()
        await h().mount({ source: device, target: p('mnt'), fstype: 'ext4' })
        expect(await read(p('mnt', 'data'))).toBe('persisted')
        await h().unmount(p('mnt'))
      })
    })
  })
}
