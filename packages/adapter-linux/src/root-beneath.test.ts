/**
 * The root the kernel enforces (issue 36), on the real kernel: after lockRoot, every path beneath the
 * root is resolved from its descriptor with no symlink followed at any level, and every act is made
 * on what that resolution found. Each case plants a symlink to a canary directory outside the root
 * at every level of a path the engine uses, for every operation, and a race swaps a level for such a
 * symlink in a tight loop (renameat2 RENAME_EXCHANGE from another process) while the host works.
 */
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { lstatSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import type { Host, HostError } from '@kubevol/core'
import { isHostError } from '@kubevol/core'
import { expect, it } from 'vitest'
import { describeAsRoot } from '../test/as-root.js'
import { useLinuxHost } from '../test/harness.js'

/** Every file below `dir` by its relative path and its content's hash, links by their target. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {}
  const walk = (d: string, rel: string): void => {
    for (const name of readdirSync(d).sort()) {
      const path = join(d, name)
      const key = rel ? `${rel}/${name}` : name
      const info = lstatSync(path)
      if (info.isDirectory()) {
        out[`${key}/`] = (info.mode & 0o7777).toString(8)
        walk(path, key)
      } else if (info.isSymbolicLink()) out[key] = 'link'
      else out[key] = `${(info.mode & 0o7777).toString(8)} ${createHash('sha256').update(readFileSync(path)).digest('hex')}`
    }
  }
  walk(dir, '')
  return out
}

const VOLUME = ['pods', 'uid-1', 'volumes', 'kubernetes.io~empty-dir', 'cache']

/** The operations of the Host port on `path` (a file or directory beneath the root). */
const OPERATIONS: readonly { readonly name: string; run(host: Host, path: string, outside: string): Promise<unknown> }[] = [
  { name: 'mkdir', run: (h, p) => h.mkdir(`${p}/new`) },
  { name: 'mkdir -p', run: (h, p) => h.mkdir(`${p}/a/b`, { recursive: true }) },
  { name: 'writeFile', run: (h, p) => h.writeFile(`${p}/ready`, 'x') },
  { name: 'readFile', run: (h, p) => h.readFile(`${p}/canary`) },
  { name: 'stat', run: (h, p) => h.stat(`${p}/canary`) },
  { name: 'lstat', run: (h, p) => h.lstat(`${p}/canary`) },
  { name: 'chmod', run: (h, p) => h.chmod(`${p}/canary`, 0o777) },
  { name: 'lchown', run: (h, p) => h.lchown(`${p}/canary`, 1234, 1234) },
  { name: 'readdir', run: (h, p) => h.readdir(p) },
  { name: 'remove', run: (h, p) => h.remove(`${p}/canary`) },
  { name: 'removeAll', run: (h, p) => h.removeAll(p) },
  { name: 'removeUnmounted', run: (h, p) => h.removeUnmounted?.([`${p}/canary`, p], { unmountLast: true }) },
  { name: 'rename', run: (h, p) => h.rename(`${p}/canary`, `${p}/moved`) },
  { name: 'symlink', run: (h, p) => h.symlink('/etc', `${p}/link`) },
  { name: 'appendFile', run: (h, p) => h.appendFile?.(`${p}/canary`, 'more') },
  { name: 'writeFileAt', run: (h, p) => h.writeFileAt?.(`${p}/canary`, 0, new Uint8Array([0, 0])) },
  { name: 'truncate', run: (h, p) => h.truncate?.(`${p}/canary`, 0) },
  { name: 'fileSteps', run: (h, p) => h.fileSteps?.([{ op: 'mkdir', path: `${p}/s`, mode: 0o777 }, { op: 'writeFile', path: `${p}/s/ready`, data: 'x' }, { op: 'setPermissions', path: `${p}/canary`, permissions: 0o777 }]) },
  { name: 'mount tmpfs', run: (h, p) => h.mount({ source: 'tmpfs', target: p, fstype: 'tmpfs' }) },
  { name: 'mount tmpfs in steps', run: (h, p) => h.fileSteps?.([{ op: 'mountUnlessMountPoint', path: p, mount: { source: 'tmpfs', fstype: 'tmpfs' } }]) },
  { name: 'bind onto', run: (h, p, outside) => h.mount({ source: outside, target: p, bind: true }) },
  { name: 'bind from', run: (h, p, outside) => h.mount({ source: p, target: outside, bind: true }) },
  { name: 'unmount', run: (h, p) => h.unmount(p) },
  { name: 'isMountPoint', run: (h, p) => h.isMountPoint(p) },
  { name: 'subPath bind', run: (h, p) => h.subPaths?.bind(p, 'canary', `${p}-sub`) ?? Promise.resolve() },
]

/** A process swapping two names with renameat2(RENAME_EXCHANGE) in a tight loop: argv a, b, milliseconds. */
const EXCHANGER = `
  const koffi = require(${JSON.stringify(createRequire(import.meta.url).resolve('koffi'))})
  const renameat2 = koffi.load('libc.so.6').func('int renameat2(int, const char *, int, const char *, unsigned int)')
  const [a, b] = process.argv.slice(1)
  const end = Date.now() + Number(process.argv[3])
  while (Date.now() < end) renameat2(-100, a, -100, b, 2)
`

describeAsRoot('the root the kernel enforces (Linux host)', () => {
  const h = useLinuxHost()

  /** The root R below the temp dir, a canary directory outside it (with a mount point of its own). */
  async function node() {
    const { host, p } = h()
    const outside = p('outside')
    mkdirSync(join(outside, 'sub'), { recursive: true })
    writeFileSync(join(outside, 'canary'), 'outside canary\n', { mode: 0o640 })
    writeFileSync(join(outside, 'sub', 'data'), 'nested canary\n')
    const root = p('r')
    const lock = await host.lockRoot(root)
    if (!lock.locked) throw new Error('root not locked')
    const volume = join(root, ...VOLUME)
    await host.mkdir(volume, { recursive: true })
    await host.writeFile(join(volume, 'canary'), 'inside\n')
    return { host, root, outside, volume, lock, before: snapshot(outside) }
  }

  /** Replaces level `depth` of the volume's path by a symlink to `outside`, keeping the real directory beside it. */
  function plant(root: string, depth: number, outside: string): string {
    const level = join(root, ...VOLUME.slice(0, depth + 1))
    renameSync(level, `${level}.real`)
    symlinkSync(outside, level)
    return level
  }

  // Each operation asked alone, and with an lstat in the same turn that holds pods/uid-1 open for the
  // batch: a batch resolves a path from the deepest directory it holds, with the same refusals below it.
  const ASKED = [
    { how: 'alone', from: 0, held: undefined },
    { how: 'below a directory the batch holds', from: 2, held: ['pods', 'uid-1', 'absent'] },
  ] as const
  it.each(ASKED.flatMap((asked) => OPERATIONS.map((op) => [op.name, asked.how, op, asked] as const)))('%s, %s: a symlink at any level beneath the root is refused, nothing outside changes', async (_, _how, op, asked) => {
    for (let depth = asked.from; depth < VOLUME.length; depth++) {
      const { host, root, outside, volume, lock, before } = await node()
      plant(root, depth, outside)
      const [held, result] = await Promise.all([
        asked.held ? host.lstat(join(root, ...asked.held)) : null,
        op.run(host, volume, outside).then(
          () => undefined,
          (err: unknown) => err as HostError,
        ),
      ])
      expect(held).toBeNull()
      // The last level is the volume itself: members that act on the entry may act on the link alone.
      if (depth < VOLUME.length - 1 || !['lstat', 'remove', 'removeAll', 'removeUnmounted', 'isMountPoint', 'unmount', 'rename'].includes(op.name)) {
        if (result !== undefined && !isHostError(result, 'ELOOP', 'ENOENT', 'EINVAL', 'ENOTDIR')) throw result
        // A refusal or a missing name; never an act through the link.
        if (result === undefined && !['lstat', 'isMountPoint', 'bind from'].includes(op.name)) throw new Error(`${op.name} at depth ${depth}: no refusal`)
      }
      expect(snapshot(outside), `${op.name} at depth ${depth}`).toEqual(before)
      expect(readFileSync('/proc/self/mountinfo', 'utf8')).not.toContain(`${outside} `)
      await lock.release()
      rmSync(root, { recursive: true, force: true })
    }
  })

  it('below a directory the batch holds, the refusal still names the level that is a symlink, and a path with .. is judged against the root', async () => {
    const { host, root, outside } = await node()
    const level = plant(root, 3, outside)
    const [, refused, through] = await Promise.all([
      host.lstat(join(root, 'pods', 'uid-1', 'absent')),
      host.writeFile(join(root, ...VOLUME, 'ready'), 'x').catch((err: HostError) => err),
      // Up from pods/uid-1 and down again: beneath the root all the way, so allowed.
      host.writeFile(join(root, 'pods', 'uid-1', '..', 'uid-1', 'volumes', 'kept'), 'y'),
    ])
    expect(isHostError(refused, 'ELOOP')).toBe(true)
    expect((refused as HostError).message).toContain(`refusing to follow a symlink beneath the root: ${level} is a symlink`)
    expect(through).toBeUndefined()
    expect(readFileSync(join(root, 'pods', 'uid-1', 'volumes', 'kept'), 'utf8')).toBe('y')
  })

  it('names the level that is a symlink in the refusal', async () => {
    const { host, root, outside, volume } = await node()
    const level = plant(root, 1, outside)
    const error = await host.writeFile(join(volume, 'ready'), 'x').catch((err: HostError) => err)
    expect(isHostError(error, 'ELOOP')).toBe(true)
    expect((error as HostError).message).toContain(`refusing to follow a symlink beneath the root: ${level} is a symlink`)
  })

  it('before a lock, and outside the root, paths resolve as the kernel resolves them (a hostPath may be a symlink)', async () => {
    const { host, p } = h()
    mkdirSync(p('real'))
    symlinkSync(p('real'), p('link'))
    await host.writeFile(p('link', 'f'), 'through the link')
    expect(readFileSync(p('real', 'f'), 'utf8')).toBe('through the link')
  })

  it('a level swapped for a symlink in a tight loop while volumes are set up and torn down: nothing outside is touched', async () => {
    const { host, root, outside, before } = await node()
    for (let depth = 0; depth < VOLUME.length; depth++) {
      const level = join(root, ...VOLUME.slice(0, depth + 1))
      symlinkSync(outside, `${level}.swap`)
      const swapper = spawn(process.execPath, ['-e', EXCHANGER, level, `${level}.swap`, '400'], { stdio: 'ignore' })
      const done = new Promise((resolve) => swapper.on('exit', resolve))
      const volume = join(root, ...VOLUME)
      for (let i = 0; i < 40; i++) {
        await host
          .fileSteps?.([
            { op: 'mkdir', path: volume, recursive: true, mode: 0o777 },
            { op: 'setPermissions', path: volume, permissions: 0o777 },
            { op: 'writeFile', path: `${volume}/ready`, data: 'x' },
            { op: 'mountUnlessMountPoint', path: `${volume}-mem`, mount: { source: 'tmpfs', fstype: 'tmpfs' } },
          ])
          .catch(() => undefined)
        await host.removeUnmounted?.([`${volume}/ready`, volume], { unmountLast: true }).catch(() => undefined)
        await host.removeAll(`${volume}-mem`).catch(() => undefined)
        await host.unmount(`${volume}-mem`).catch(() => undefined)
      }
      await done
      // Put the real directory back where the loop left it.
      if (lstatSync(level).isSymbolicLink()) {
        renameSync(`${level}.swap`, `${level}.tmp`)
        renameSync(level, `${level}.swap`)
        renameSync(`${level}.tmp`, level)
      }
      rmSync(`${level}.swap`, { recursive: true, force: true })
      // Once the swaps stop, what the host mounted is where it named it: nothing landed on a
      // directory moved aside (the host undoes such a mount), so one unmount leaves nothing.
      while (await host.isMountPoint(`${volume}-mem`).catch(() => false)) await host.unmount(`${volume}-mem`)
      expect(readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter((line) => line.includes(` ${root}/`)), `mounts left at depth ${depth}`).toEqual([])
      expect(snapshot(outside), `swap at depth ${depth}`).toEqual(before)
      expect(readFileSync('/proc/self/mountinfo', 'utf8')).not.toContain(`${outside} `)
    }
  }, 120_000)

  it('a mount target swapped for a symlink while it is mounted: the mount never stays where its name does not lead', async () => {
    const { host, root, outside, before } = await node()
    const target = join(root, 'pods', 'uid-1', 'volumes', 'kubernetes.io~empty-dir', 'mem')
    await host.mkdir(target)
    symlinkSync(outside, `${target}.swap`)
    const swapper = spawn(process.execPath, ['-e', EXCHANGER, target, `${target}.swap`, '3000'], { stdio: 'ignore' })
    const done = new Promise((resolve) => swapper.on('exit', resolve))
    const refusals = new Set<string>()
    for (let i = 0; i < 400; i++) {
      await host.mount({ source: 'tmpfs', target, fstype: 'tmpfs' }).catch((err: HostError) => refusals.add(err.code))
      await host.unmount(target).catch(() => undefined)
    }
    await done
    // Whatever the swaps left: nothing outside the root was touched or mounted on.
    while (await host.isMountPoint(target).catch(() => false)) await host.unmount(target)
    expect(snapshot(outside)).toEqual(before)
    expect(readFileSync('/proc/self/mountinfo', 'utf8')).not.toContain(` ${outside}`)
    // A mount that landed on the directory moved aside is undone (EBUSY), and so is one whose
    // directory a rename already under way moved after mount(2) returned: nothing is left at the
    // moved-aside name. (Without the wait for that rename, about one run in three left one.)
    const left = readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter((line) => line.includes(` ${root}/`))
    expect(left, 'mounts left at a moved-aside name').toEqual([])
    expect(refusals.has('EBUSY'), 'no mount was undone: the swaps never raced a mount').toBe(true)
    expect([...refusals].every((code) => ['ELOOP', 'EBUSY', 'EINVAL', 'ENOENT'].includes(code)), [...refusals].join()).toBe(true)
  }, 60_000)

  it('the calls of one batch share the directories they open, and none goes stale when kubevol removes or makes one', async () => {
    const { host, root } = await node()
    const r = (...parts: string[]) => join(root, ...parts)
    // Asked in one turn: one batch on the I/O worker, in this order.
    const answers = await Promise.all([
      host.lstat(r('d', 'f')),
      host.mkdir(r('d')),
      host.writeFile(r('d', 'f'), 'one'),
      host.lstat(r('d', 'f')),
      host.remove(r('d', 'f')),
      host.remove(r('d')),
      host.mkdir(r('d')),
      host.writeFile(r('d', 'g'), 'two'),
      host.lstat(r('d', 'g')),
      host.readdir(r('d')),
    ])
    expect(answers[0]).toBeNull()
    expect((answers[3] as { type: string } | null)?.type).toBe('file')
    expect((answers[8] as { type: string } | null)?.type).toBe('file')
    expect(answers[9]).toEqual(['g'])
  })
})
