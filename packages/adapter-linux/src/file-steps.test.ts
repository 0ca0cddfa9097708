import type { FileStep, HostError } from '@kubevol/core'
import { fileStepsOneByOne } from '@kubevol/core/host'
import { expect, it } from 'vitest'
import { describeAsRoot } from '../test/as-root.js'
import { useLinuxHost } from '../test/harness.js'

/** What a failure says: the same from the one worker call as from the separate calls. */
const said = (err: unknown) => {
  const e = err as HostError
  return { code: e.code, syscall: e.syscall, path: e.path }
}

describeAsRoot('linux host: fileSteps on the real kernel', () => {
  const h = useLinuxHost()

  it.each<[string, (p: (...parts: string[]) => string) => FileStep[]]>([
    ['mkdir -p through a file (ENOTDIR)', (p) => [{ op: 'mkdir', path: p('file', 'd'), recursive: true }]],
    ['mkdir of what exists (EEXIST)', (p) => [{ op: 'mkdir', path: p('ro') }]],
    ['mkdir -p below a read-only mount (EROFS)', (p) => [{ op: 'mkdir', path: p('ro', 'a', 'b'), recursive: true, mode: 0o777 }]],
    ['the chmod of setPermissions on a read-only mount (EROFS)', (p) => [{ op: 'setPermissions', path: p('ro', 'dir'), permissions: 0o777 }]],
    ['the stat of setPermissions through a file (ENOTDIR)', (p) => [{ op: 'setPermissions', path: p('file', 'x'), permissions: 0o777 }]],
    ['a write into a missing directory (ENOENT)', (p) => [{ op: 'writeFile', path: p('missing', 'ready'), data: '' }]],
    ['an lstat through a file (ENOTDIR)', (p) => [{ op: 'lstat', path: p('file', 'x'), stopIfFound: true }]],
    ['a symlink loop (ELOOP)', (p) => [{ op: 'mkdir', path: p('loop', 'd'), recursive: true }]],
  ])('a failing step ends the one worker call with the error its separate call gives: %s', async (_, steps) => {
    const { host, p } = h()
    await host.writeFile(p('file'), 'x')
    await host.symlink(p('loop'), p('loop'))
    await host.mkdir(p('ro'))
    await host.mkdir(p('ro', 'dir'), { mode: 0o700 })
    await host.mount({ source: p('ro'), target: p('ro'), bind: true, readOnly: true })
    // A step before it, made; one after it, not made.
    const all: FileStep[] = [{ op: 'mkdir', path: p('before') }, ...steps(p), { op: 'mkdir', path: p('after') }]
    const one = await host.fileSteps(all).then(() => null, (err: unknown) => err)
    expect(one).not.toBeNull()
    expect((await host.lstat(p('before')))?.type).toBe('directory')
    expect(await host.lstat(p('after'))).toBeNull()
    await host.remove(p('before'))
    const separate = await fileStepsOneByOne(host, all).then(() => null, (err: unknown) => err)
    expect(said(one)).toEqual(said(separate))
    expect(await host.lstat(p('after'))).toBeNull()
  })

  it('sets an emptyDir up in one call: 0777 whatever the umask, the marker last', async () => {
    const { host, p } = h()
    const umask = process.umask(0o077)
    try {
      const steps: FileStep[] = [
        { op: 'lstat', path: p('plugins', 'v', 'ready'), stopIfFound: true },
        { op: 'mkdir', path: p('volumes', 'v'), recursive: true, mode: 0o777 },
        { op: 'setPermissions', path: p('volumes', 'v'), permissions: 0o777 },
        { op: 'mkdir', path: p('plugins', 'v'), recursive: true, mode: 0o750 },
        { op: 'writeFile', path: p('plugins', 'v', 'ready'), data: '' },
      ]
      expect(await host.fileSteps(steps)).toBe(5)
      expect((await host.stat(p('volumes', 'v')))?.mode).toBe(0o777)
      // The umask (077) cut the marker's directory, as it does the separate mkdir's.
      expect((await host.stat(p('plugins', 'v')))?.mode).toBe(0o700)
      expect(await host.fileSteps(steps)).toBe(0)
    } finally {
      process.umask(umask)
    }
  })
})
