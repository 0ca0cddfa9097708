import { isHostError } from '@kubevol/core'
import { describe, expect, it } from 'vitest'
import type { ViolationKind } from './host-state.js'
import type { MemoryHost } from './memory-host.js'
import { createMemoryHost } from './memory-host.js'

/** A host with a tmpfs at /pod/vol holding one file, and a formatted disk mounted at /disk. */
async function hostWithMounts(strict = true): Promise<MemoryHost> {
  const host = createMemoryHost({ strict })
  await host.mkdir('/pod/vol', { recursive: true })
  await host.mount({ source: 'tmpfs', target: '/pod/vol', fstype: 'tmpfs' })
  await host.writeFile('/pod/vol/data', 'precious')
  host.addBlockDevice('/dev/sdb', 64 * 2 ** 20, { fstype: 'ext4' })
  await host.mkdir('/disk')
  await host.mount({ source: '/dev/sdb', target: '/disk', fstype: 'ext4' })
  return host
}

async function errorCode(promise: Promise<unknown> | undefined): Promise<string | undefined> {
  return (promise ?? Promise.resolve()).then(
    () => undefined,
    (err: unknown) => (isHostError(err) ? err.code : String(err)),
  )
}

const breaches: { case: string; kind: ViolationKind; path: string; code?: string; act: (host: MemoryHost) => Promise<unknown> | undefined }[] = [
  { case: 'remove of a mount point', kind: 'remove-mount-point', path: '/pod/vol', code: 'EBUSY', act: (h) => h.remove('/pod/vol') },
  { case: 'rename of a mount point', kind: 'rename-mount-point', path: '/pod/vol', code: 'EBUSY', act: (h) => h.rename('/pod/vol', '/pod/other') },
  { case: 'removeAll across a mount point', kind: 'remove-all-across-mount', path: '/pod/vol', code: 'EBUSY', act: (h) => h.removeAll('/pod') },
  { case: 'format over a filesystem', kind: 'format-over-filesystem', path: '/dev/sdb', act: (h) => h.filesystems?.format('/dev/sdb', 'xfs') },
  { case: 'format of a mounted device', kind: 'format-device-in-use', path: '/dev/sdb', act: (h) => h.filesystems?.format('/dev/sdb', 'ext4') },
]

describe('strict mode', () => {
  it.each(breaches)('records $case ($kind), and the call behaves as the kernel', async ({ kind, path, code, act }) => {
    const host = await hostWithMounts()
    expect(await errorCode(act(host))).toBe(code)
    expect(host.violations).toContainEqual(expect.objectContaining({ kind, path }))
    expect(() => host.assertNoViolations()).toThrow(kind)
  })

  it.each(breaches)('records nothing when not strict: $case', async ({ code, act }) => {
    const host = await hostWithMounts(false)
    expect(await errorCode(act(host))).toBe(code)
    expect(host.violations).toEqual([])
    host.assertNoViolations()
  })

  it('removeUnmounted of a mount point is refused (EBUSY) as a check, not a breach', async () => {
    const host = await hostWithMounts()
    expect(await errorCode(host.removeUnmounted(['/pod/vol', '/pod']))).toBe('EBUSY')
    expect(host.tree('/pod/vol')).toMatchObject({ mount: { fstype: 'tmpfs' }, children: { data: { text: 'precious' } } })
    expect(host.violations).toEqual([])
  })

  it('removeAll across a mount point deletes nothing at all, on either filesystem', async () => {
    const host = await hostWithMounts()
    await host.writeFile('/pod/sibling', 'also kept')
    await errorCode(host.removeAll('/pod'))
    expect(host.tree('/pod')).toMatchObject({
      children: {
        sibling: { text: 'also kept' },
        vol: { mount: { fstype: 'tmpfs' }, children: { data: { text: 'precious' } } },
      },
    })
  })

  it('ordinary work records nothing; unmounting a source that is still bind-mounted elsewhere is fine', async () => {
    const host = await hostWithMounts()
    await host.mkdir('/pod/bind')
    await host.mount({ source: '/pod/vol', target: '/pod/bind', bind: true })
    await host.unmount('/pod/vol')
    expect(host.tree('/pod/bind/data')).toMatchObject({ text: 'precious' })
    await host.unmount('/pod/bind')
    await host.removeAll('/pod')
    await host.unmount('/disk')
    host.addBlockDevice('/dev/sdc', 2 ** 20)
    await host.filesystems?.format('/dev/sdc', 'ext4')
    expect(host.violations).toEqual([])
    host.assertNoViolations()
  })

  it('clearViolations forgets what a test already checked', async () => {
    const host = await hostWithMounts()
    await errorCode(host.remove('/pod/vol'))
    expect(host.violations).toHaveLength(1)
    host.clearViolations()
    host.assertNoViolations()
  })
})
