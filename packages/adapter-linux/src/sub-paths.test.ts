import { expectHostError } from '@kubevol/core/testing/host-contract'
import { expect, it } from 'vitest'
import { describeAsRoot } from '../test/as-root.js'
import { useLinuxHost } from '../test/harness.js'

const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes)

describeAsRoot('safe subPath binds on the real kernel', () => {
  const h = useLinuxHost()

  async function volume() {
    const { host, p } = h()
    await host.mkdir(p('vol', 'data', 'deep'), { recursive: true })
    await host.writeFile(p('vol', 'data', 'deep', 'f'), 'inside')
    await host.mkdir(p('secret'))
    await host.writeFile(p('secret', 'key'), 'outside')
    return { host, p }
  }

  it('binds a directory of the volume, creating the target; a read-only bind refuses writes', async () => {
    const { host, p } = await volume()
    await host.subPaths.bind(p('vol'), 'data', p('pod', 'sub'))
    expect(await host.isMountPoint(p('pod', 'sub'))).toBe(true)
    expect(text(await host.readFile(p('pod', 'sub', 'deep', 'f')))).toBe('inside')
    await host.subPaths.bind(p('vol'), 'data/deep', p('pod', 'ro'), { readOnly: true })
    await expectHostError(host.writeFile(p('pod', 'ro', 'g'), 'x'), 'EROFS')
    expect((await host.mounts()).findLast((e) => e.target === p('pod', 'ro'))?.options).toContain('ro')
    await host.unmount(p('pod', 'sub'))
    expect((await host.stat(p('pod', 'sub')))?.mode).toBe(0o750)
  })

  it('binds a file of the volume onto a created file', async () => {
    const { host, p } = await volume()
    await host.subPaths.bind(p('vol'), 'data/deep/f', p('pod', 'file'))
    expect(text(await host.readFile(p('pod', 'file')))).toBe('inside')
    expect((await host.lstat(p('pod', 'file')))?.type).toBe('file')
  })

  it('follows a symlink that stays inside the volume', async () => {
    const { host, p } = await volume()
    await host.symlink('data/deep', p('vol', 'shortcut'))
    await host.subPaths.bind(p('vol'), 'shortcut', p('pod', 'sub'))
    expect(await host.readdir(p('pod', 'sub'))).toEqual(['f'])
  })

  it.each([
    { case: 'an absolute symlink out of the volume', link: (root: string) => `${root}/secret`, subPath: 'escape' },
    { case: 'a relative symlink out of the volume', link: () => '../secret', subPath: 'escape' },
    { case: 'a symlink out in an intermediate component', link: () => '../secret', subPath: 'escape/key' },
  ])('refuses $case with EACCES and mounts nothing', async ({ link, subPath }) => {
    const { host, p } = await volume()
    await host.symlink(link(h().root), p('vol', 'escape'))
    const error = await expectHostError(host.subPaths.bind(p('vol'), subPath, p('pod', 'sub')), 'EACCES')
    expect(error.message).toContain(`not within volume path "${p('vol')}"`)
    expect((await host.mounts()).some((e) => e.target.startsWith(p('pod')))).toBe(false)
  })

  it('refuses a .. escape with EACCES', async () => {
    const { host, p } = await volume()
    await expectHostError(host.subPaths.bind(p('vol'), '../secret', p('pod', 'sub')), 'EACCES')
    await expectHostError(host.subPaths.bind(p('vol'), 'data/../../secret/key', p('pod', 'sub')), 'EACCES')
  })

  it.each([
    { case: 'an absolute symlink', link: (root: string) => `${root}/secret` },
    { case: 'a relative symlink', link: () => '../secret' },
  ])('a level swapped for $case out of the volume is refused by the kernel (EACCES), never followed', async ({ link }) => {
    const { host, p } = await volume()
    // What the kernel meets when a container replaced `data` by a symlink after any check: the
    // sub path is resolved beneath the volume's descriptor, so the swap cannot lead out of it.
    await host.rename(p('vol', 'data'), p('vol', 'moved'))
    await host.symlink(link(h().root), p('vol', 'data'))
    await expectHostError(host.subPaths.bind(p('vol'), 'data/key', p('pod', 'sub')), 'EACCES')
    await expectHostError(host.subPaths.bind(p('vol'), 'moved/deep/f/x', p('pod', 'sub2')), 'ENOTDIR')
    expect((await host.mounts()).some((e) => e.target.startsWith(p('pod')))).toBe(false)
    await host.subPaths.bind(p('vol'), 'moved/deep', p('pod', 'sub'))
    expect(await host.readdir(p('pod', 'sub'))).toEqual(['f'])
  })

  it('a missing sub path is created inside the volume, with the mode of its root, and bound', async () => {
    const { host, p } = await volume()
    await host.chmod(p('vol'), 0o2751)
    await host.subPaths.bind(p('vol'), 'data/new/deeper', p('pod', 'sub'))
    for (const dir of [['data', 'new'], ['data', 'new', 'deeper']]) expect((await host.lstat(p('vol', ...dir)))?.mode).toBe(0o2751)
    expect((await host.lstat(p('vol', 'data')))?.mode).not.toBe(0o2751)
    await host.writeFile(p('pod', 'sub', 'g'), 'written by the container')
    expect(text(await host.readFile(p('vol', 'data', 'new', 'deeper', 'g')))).toBe('written by the container')
  })

  it.each([
    { case: 'a symlink planted mid-path to a directory outside', subPath: 'escape/made/here', link: (root: string) => `${root}/secret`, code: 'EACCES' as const },
    { case: 'a relative one', subPath: 'data/escape/made', link: () => '../../secret', code: 'EACCES' as const, at: ['data', 'escape'] },
    { case: 'a dangling symlink where a directory is to be made', subPath: 'escape/made', link: (root: string) => `${root}/secret/made`, code: 'EEXIST' as const },
    { case: 'a dangling relative symlink where a directory is to be made', subPath: 'escape/made', link: () => 'gone', code: 'EEXIST' as const },
  ])('refuses to create a missing sub path through $case: nothing made outside', async ({ subPath, link, code, at }) => {
    const { host, p } = await volume()
    await host.symlink(link(h().root), p('vol', ...(at ?? ['escape'])))
    const error = await expectHostError(host.subPaths.bind(p('vol'), subPath, p('pod', 'sub')), code)
    if (code === 'EACCES') expect(error.message).toContain(`is outside of allowed base "${p('vol')}"`)
    // The canary outside is intact, and nothing was made beside it.
    expect(await host.readdir(p('secret'))).toEqual(['key'])
    expect(text(await host.readFile(p('secret', 'key')))).toBe('outside')
    expect((await host.mounts()).some((e) => e.target.startsWith(p('pod')))).toBe(false)
  })
})
