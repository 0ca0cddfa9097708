/**
 * formatAndMount on the memory host: the check (`fsck -a`) runs before every read-write mount of an
 * existing filesystem, the type asked or not, and never before a read-only one.
 */
import type { HostCall } from './faults.js'
import { formatAndMount } from '@kubevol/core/plugins'
import { describe, expect, it } from 'vitest'
import { createMemoryHost } from './memory-host.js'

async function setUp() {
  const host = createMemoryHost()
  host.addBlockDevice('/dev/sdb', 64 * 2 ** 20, { fstype: 'ext4' })
  await host.mkdir('/mnt')
  const checks: unknown[][] = []
  host.intercept((call: HostCall, next) => {
    if (call.method === 'filesystems.check') checks.push([...call.args])
    return next()
  })
  return { host, checks }
}

describe('formatAndMount on the memory host', () => {
  it('checks an existing filesystem of the type asked, then mounts it', async () => {
    const { host, checks } = await setUp()
    await formatAndMount(host, '/dev/sdb', '/mnt', { fstype: 'ext4' })
    expect(checks).toEqual([['/dev/sdb', 'ext4']])
    expect(await host.isMountPoint('/mnt')).toBe(true)
  })

  it('checks it as what it is when another type is asked, and the mount fails as FilesystemMismatch', async () => {
    const { host, checks } = await setUp()
    const error = await formatAndMount(host, '/dev/sdb', '/mnt', { fstype: 'xfs' }).catch((err: unknown) => err)
    expect(checks).toEqual([['/dev/sdb', 'ext4']])
    expect(error).toMatchObject({ type: 'FilesystemMismatch' })
  })

  it.each([{ readOnly: true }, { options: ['ro'] }])('never checks it for a read-only mount (%o)', async (options) => {
    const { host, checks } = await setUp()
    await formatAndMount(host, '/dev/sdb', '/mnt', { fstype: 'ext4', ...options })
    expect(checks).toEqual([])
    expect((await host.mounts()).findLast((e) => e.target === '/mnt')?.options).toContain('ro')
  })
})
