/** The Host contract's loop devices and filesystems (registered by `runHostContract`). */
import { expect, it } from 'vitest'
import { filesystemSizeContract } from './host-contract-refs-sizes.js'
import { type ContractContext, MiB, encoder, expectHostError } from './host-contract-support.js'

/**
 * Loop devices and filesystems: attach, find, detach, format, check and size.
 *
 * Long by design: the body is a list of independent `it` cases, one per promise of the port, that
 * share only the context; splitting it would scatter one area of the contract over several files.
 */
export function devicesContract(contract: ContractContext): void {
  const { h, p, read, entryAt, attach } = contract
  filesystemSizeContract(contract)
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
}
