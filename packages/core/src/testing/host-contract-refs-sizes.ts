/**
 * Two parts of the Host contract (registered by `runHostContract`): mount references, as mount-utils'
 * `GetMountRefs` finds them, and the filesystem size query behind a resize decision.
 */
import { expect, it } from 'vitest'
import { type ContractContext, expectHostError } from './host-contract-support.js'

const MiB = 2 ** 20

/** `mountReferences`: binds of a mount point, and of a directory that is not one. */
export function mountReferencesContract({ h, p }: ContractContext): void {
  const tmpfs = (target: string) => h().mount({ source: 'tmpfs', target, fstype: 'tmpfs' })
  const bind = (source: string, target: string) => h().mount({ source, target, bind: true })

  it('mountReferences lists the binds of a mount point and of a directory inside a mount, by their root', async () => {
    for (const dir of ['t', 'b1', 'b2']) await h().mkdir(p(dir))
    await tmpfs(p('t'))
    await h().mkdir(p('t', 'sub'))
    await h().mkdir(p('t', 'other'))
    await bind(p('t'), p('b1'))
    await bind(p('t', 'sub'), p('b2'))
    expect(await h().mountReferences(p('t'))).toEqual([p('b1')])
    expect(await h().mountReferences(p('b1'))).toEqual([p('t')])
    // Not a mount point: its references are the mounts whose root is that directory.
    expect(await h().mountReferences(p('t', 'sub'))).toEqual([p('b2')])
    // The same directory reached through the bind of its parent.
    expect(await h().mountReferences(p('b1', 'sub'))).toEqual([p('b2')])
    expect(await h().mountReferences(p('t', 'other'))).toEqual([])
    expect(await h().mountReferences(p('b2'))).toEqual([])
  })

  it('mountReferences finds the binds of a plain directory of the root filesystem, also through a symlink', async () => {
    await h().mkdir(p('local'))
    await h().mkdir(p('pod-a'))
    await h().mkdir(p('pod-b'))
    await h().writeFile(p('file'), 'x')
    await h().writeFile(p('file-bind'), '')
    await h().symlink(p('local'), p('link'))
    expect(await h().mountReferences(p('local'))).toEqual([])
    await bind(p('local'), p('pod-a'))
    await bind(p('local'), p('pod-b'))
    await bind(p('file'), p('file-bind'))
    expect(await h().mountReferences(p('local'))).toEqual([p('pod-a'), p('pod-b')])
    expect(await h().mountReferences(p('link'))).toEqual([p('pod-a'), p('pod-b')])
    expect(await h().mountReferences(p('pod-a'))).toEqual([p('pod-b')])
    expect(await h().mountReferences(p('file'))).toEqual([p('file-bind')])
    await h().unmount(p('pod-b'))
    expect(await h().mountReferences(p('local'))).toEqual([p('pod-a')])
  })

  it('mountReferences of a missing path is empty', async () => {
    expect(await h().mountReferences(p('missing'))).toEqual([])
    expect(await h().mountReferences(p('missing', 'below'))).toEqual([])
  })
}

/** `filesystems.size` and `filesystems.needResize` on a loop device over a file that grows. */
export function filesystemSizeContract({ h, p, attach }: ContractContext): void {
  it('size and needResize follow a device that grows, and a resize that catches up', async (t) => {
    const fs = h().filesystems
    const truncate = h().truncate?.bind(h())
    const loops = h().loopDevices
    if (!loops || !fs || !truncate) return t.skip('needs loopDevices, filesystems and truncate')
    await h().writeFile(p('disk.img'), new Uint8Array(0))
    await truncate(p('disk.img'), 32 * MiB)
    const device = await attach(p('disk.img'))
    expect(await fs.needResize(device)).toBe(false)
    await fs.format(device, 'ext4')
    const before = await fs.size(device, 'ext4')
    expect(before.blockSize).toBeGreaterThan(0)
    expect(before.sizeBytes).toBeGreaterThan(30 * MiB)
    expect(before.sizeBytes).toBeLessThanOrEqual(32 * MiB)
    expect(await fs.needResize(device)).toBe(false)
    await truncate(p('disk.img'), 48 * MiB)
    await loops.refreshCapacity(device)
    expect(await fs.needResize(device)).toBe(true)
    await fs.resize(device, 'ext4')
    expect(await fs.needResize(device)).toBe(false)
    expect((await fs.size(device, 'ext4')).sizeBytes).toBeGreaterThan(46 * MiB)
  })

  it('needResize is false for a read-only device; size of an unsupported type is ENOTSUP', async (t) => {
    const fs = h().filesystems
    const truncate = h().truncate?.bind(h())
    const loops = h().loopDevices
    if (!loops || !fs || !truncate) return t.skip('needs loopDevices, filesystems and truncate')
    await h().writeFile(p('disk.img'), new Uint8Array(0))
    await truncate(p('disk.img'), 16 * MiB)
    const device = await attach(p('disk.img'))
    await fs.format(device, 'ext4')
    await loops.detach(device)
    await truncate(p('disk.img'), 32 * MiB)
    const readOnly = await attach(p('disk.img'), { readOnly: true })
    expect(await fs.needResize(readOnly)).toBe(false)
    await expectHostError(fs.size(readOnly, 'vfat'), 'ENOTSUP')
  })
}
