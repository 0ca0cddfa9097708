/** The Host contract's file steps (registered by `runHostContract`), through `runFileSteps`: the host's `fileSteps` where it has one. */
import { expect, it } from 'vitest'
import type { FileStep } from '../host/host.js'
import { runFileSteps } from '../plugins/util/file-steps.js'
import { type ContractContext, expectHostError } from './host-contract-support.js'

/** A sequence of dependent file steps: what each step does, where it stops, and how it fails. */
export function fileStepsContract({ h, p, read }: ContractContext): void {
  /** An emptyDir's set-up: its marker looked at, its directory and mode, the marker's directory, the marker. */
  const setUp = (): FileStep[] => [
    { op: 'lstat', path: p('plugin', 'v', 'ready'), stopIfFound: true },
    { op: 'mkdir', path: p('pod', 'volumes', 'v'), recursive: true, mode: 0o777 },
    { op: 'setPermissions', path: p('pod', 'volumes', 'v'), permissions: 0o777 },
    { op: 'mkdir', path: p('plugin', 'v'), recursive: true, mode: 0o750 },
    { op: 'writeFile', path: p('plugin', 'v', 'ready'), data: 'x', mode: 0o640 },
  ]

  it('fileSteps makes every step in order and answers their number', async () => {
    expect(await runFileSteps(h(), setUp())).toBe(5)
    // 0777 whatever the umask took from the mkdir.
    expect(await h().stat(p('pod', 'volumes', 'v'))).toMatchObject({ type: 'directory', mode: 0o777 })
    expect((await h().stat(p('plugin', 'v')))?.type).toBe('directory')
    expect(await h().stat(p('plugin', 'v', 'ready'))).toMatchObject({ type: 'file', mode: 0o640 })
    expect(await read(p('plugin', 'v', 'ready'))).toBe('x')
    // Again: the recursive mkdirs accept what exists, the file is replaced.
    expect(await runFileSteps(h(), setUp().slice(1))).toBe(4)
  })

  it('fileSteps stops at an lstat with stopIfFound that finds something, a dangling symlink included, and makes nothing after it', async () => {
    await h().mkdir(p('plugin', 'v'), { recursive: true })
    await h().symlink(p('nowhere'), p('plugin', 'v', 'ready'))
    expect(await runFileSteps(h(), setUp())).toBe(0)
    expect(await h().lstat(p('pod'))).toBeNull()
    // Without stopIfFound it is only a look.
    expect(await runFileSteps(h(), [{ op: 'lstat', path: p('plugin', 'v', 'ready') }, { op: 'mkdir', path: p('d') }])).toBe(2)
    expect((await h().lstat(p('d')))?.type).toBe('directory')
  })

  it('fileSteps ends at the first step that fails, with that step’s error, and makes nothing after it', async () => {
    await h().writeFile(p('pod'), 'a file where a directory should be')
    const err = await expectHostError(runFileSteps(h(), setUp()), 'ENOTDIR')
    expect(err.path).toBe(p('pod', 'volumes', 'v'))
    expect(await h().lstat(p('plugin'))).toBeNull()
    // A file written into a missing directory: ENOENT naming the file; the mkdir before it stays.
    const write = await expectHostError(
      runFileSteps(h(), [
        { op: 'mkdir', path: p('made') },
        { op: 'writeFile', path: p('missing', 'f'), data: '' },
        { op: 'mkdir', path: p('after') },
      ]),
      'ENOENT',
    )
    expect(write.path).toBe(p('missing', 'f'))
    expect((await h().lstat(p('made')))?.type).toBe('directory')
    expect(await h().lstat(p('after'))).toBeNull()
    // A plain mkdir of what exists: EEXIST, as the member.
    await expectHostError(runFileSteps(h(), [{ op: 'mkdir', path: p('made') }]), 'EEXIST')
  })

  /** A memory emptyDir's set-up: the steps of `setUp()` with its tmpfs mounted after the directory is made. */
  const memorySetUp = (options: readonly string[] = ['size=1m']): FileStep[] => {
    const steps = setUp()
    steps.splice(2, 0, { op: 'mountUnlessMountPoint', path: p('pod', 'volumes', 'v'), mount: { source: 'tmpfs', fstype: 'tmpfs', options } })
    return steps
  }
  const mountsAt = async (target: string): Promise<number> => (await h().mounts()).filter((m) => m.target === target).length

  it('mountUnlessMountPoint mounts onto a directory that is not a mount point, and not again onto one that is', async () => {
    const dir = p('pod', 'volumes', 'v')
    expect(await runFileSteps(h(), memorySetUp())).toBe(6)
    expect(await h().isMountPoint(dir)).toBe(true)
    expect(await mountsAt(dir)).toBe(1)
    // The steps after the mount are made on the tmpfs: its root's permission bits (0777; the sticky
    // bit a tmpfs root has is kept), then the marker beside it.
    expect(await h().stat(dir)).toMatchObject({ type: 'directory', mode: 0o1777 })
    expect(await read(p('plugin', 'v', 'ready'))).toBe('x')
    await h().writeFile(p('pod', 'volumes', 'v', 'on-tmpfs'), 'kept')
    // Again (a restart's set-up): the tmpfs that is there stays, with what is on it.
    expect(await runFileSteps(h(), memorySetUp().slice(1))).toBe(5)
    expect(await mountsAt(dir)).toBe(1)
    expect(await read(p('pod', 'volumes', 'v', 'on-tmpfs'))).toBe('kept')
    await h().unmount(dir)
    expect(await h().lstat(p('pod', 'volumes', 'v', 'on-tmpfs'))).toBeNull()
  })

  it('mountUnlessMountPoint follows a symlink at the target as isMountPoint and mount do', async () => {
    await h().mkdir(p('real'))
    await h().symlink(p('real'), p('link'))
    const step: FileStep = { op: 'mountUnlessMountPoint', path: p('link'), mount: { source: 'tmpfs', fstype: 'tmpfs', options: ['size=1m'] } }
    expect(await runFileSteps(h(), [step, { op: 'writeFile', path: p('link', 'f'), data: 'on it' }])).toBe(2)
    expect(await h().isMountPoint(p('real'))).toBe(true)
    expect(await runFileSteps(h(), [step])).toBe(1)
    expect(await mountsAt(p('real'))).toBe(1)
    expect(await read(p('real', 'f'))).toBe('on it')
    await h().unmount(p('real'))
  })

  it('a mount step that fails ends the steps with the mount’s error (or the check’s), and makes nothing after it', async () => {
    const dir = p('pod', 'volumes', 'v')
    // tmpfs refuses a size it cannot read: the mount's EINVAL, naming the directory.
    const refused = await expectHostError(runFileSteps(h(), memorySetUp(['size=lots'])), 'EINVAL')
    expect(refused.syscall).toBe('mount')
    expect(refused.path).toBe(dir)
    expect((await h().lstat(dir))?.type).toBe('directory')
    expect(await h().isMountPoint(dir)).toBe(false)
    expect(await h().lstat(p('plugin', 'v'))).toBeNull()
    // No directory to mount onto: the check's ENOENT.
    const missing = await expectHostError(
      runFileSteps(h(), [
        { op: 'mountUnlessMountPoint', path: p('nowhere', 'v'), mount: { source: 'tmpfs', fstype: 'tmpfs', options: ['size=1m'] } },
        { op: 'mkdir', path: p('after') },
      ]),
      'ENOENT',
    )
    expect(missing.path).toBe(p('nowhere', 'v'))
    expect(await h().lstat(p('after'))).toBeNull()
  })

  it('setPermissions changes only the permission bits, keeps setgid, and passes over a missing path', async () => {
    await h().mkdir(p('d'))
    await h().chmod(p('d'), 0o2750)
    await h().writeFile(p('f'), '', { mode: 0o644 })
    const steps: FileStep[] = [
      { op: 'setPermissions', path: p('d'), permissions: 0o777 },
      { op: 'setPermissions', path: p('f'), permissions: 0o644 },
      { op: 'setPermissions', path: p('missing'), permissions: 0o777 },
    ]
    expect(await runFileSteps(h(), steps)).toBe(3)
    expect((await h().stat(p('d')))?.mode).toBe(0o2777)
    expect((await h().stat(p('f')))?.mode).toBe(0o644)
    await expectHostError(runFileSteps(h(), [{ op: 'setPermissions', path: p('f', 'below'), permissions: 0o777 }]), 'ENOTDIR')
  })
}
