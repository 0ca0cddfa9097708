import { execFileSync } from 'node:child_process'
import { expectHostError } from '@kubevol/core/testing/host-contract'
import { expect, it } from 'vitest'
import { describeAsRoot } from '../test/as-root.js'
import { useLinuxHost } from '../test/harness.js'
import { loopFileName, makedev } from './loop-attach.js'

const MiB = 2 ** 20

it('makedev and the kernel file name field', () => {
  expect(makedev(7, 3)).toBe(0x703)
  expect(makedev(7, 256)).toBe(0x100700)
  const name = loopFileName(`/${'x'.repeat(100)}`)
  expect(name).toHaveLength(64)
  expect(name[63]).toBe(0)
})

describeAsRoot('loop devices and block devices on the real kernel', () => {
  const h = useLinuxHost()
  const loops = () => {
    const loopDevices = h().host.loopDevices
    if (!loopDevices) throw new Error('this machine has no /dev/loop-control')
    return loopDevices
  }

  it('attach is idempotent: the same file gives the same device, also through another path and concurrently', async () => {
    const { host, p } = h()
    await host.writeFile(p('disk.img'), new Uint8Array(8 * MiB))
    await host.symlink(p('disk.img'), p('alias.img'))
    const [a, b] = await Promise.all([loops().attach(p('disk.img')), loops().attach(p('disk.img'))])
    expect(b).toBe(a)
    expect(await loops().attach(p('alias.img'))).toBe(a)
    expect(await loops().find(p('alias.img'))).toEqual([a])
    // losetup agrees on the backing file.
    expect(execFileSync('losetup', ['--noheadings', '-O', 'BACK-FILE', a as string], { encoding: 'utf8' }).trim()).toBe(p('disk.img'))
    await loops().detach(a as string)
    expect(await loops().find(p('disk.img'))).toEqual([])
  })

  it('find of a missing file is empty; attach of a missing file is ENOENT, of a directory EINVAL', async () => {
    const { host, p } = h()
    expect(await loops().find(p('missing.img'))).toEqual([])
    await expectHostError(loops().attach(p('missing.img')), 'ENOENT')
    await host.mkdir(p('dir'))
    await expectHostError(loops().attach(p('dir')), 'EINVAL')
  })

  it('a block device is opened exclusively (EBUSY while mounted); regularFile refuses a device and a symlink', async () => {
    const { host, p } = h()
    await host.writeFile(p('disk.img'), new Uint8Array(16 * MiB))
    const device = await loops().attach(p('disk.img'))
    await host.filesystems.format(device, 'ext4')
    await host.mkdir(p('mnt'))
    await host.mount({ source: device, target: p('mnt'), fstype: 'ext4' })
    await host.symlink(device, p('link'))
    await host.symlink(p('disk.img'), p('image-link'))
    try {
      await expectHostError(loops().attach(device), 'EBUSY')
      await expectHostError(loops().attach(p('link')), 'EBUSY')
      await expectHostError(loops().attach(device, { regularFile: true }), 'EINVAL')
      // A symlink is not followed, whatever it names.
      await expectHostError(loops().attach(p('link'), { regularFile: true }), 'ELOOP')
      // Nothing was attached over the device.
      expect(execFileSync('losetup', ['-j', device], { encoding: 'utf8' }).trim()).toBe('')
    } finally {
      await host.unmount(p('mnt'))
    }
    // Unmounted, the device is not claimed: the exclusive open succeeds (and is closed again).
    const stacked = await loops().attach(device)
    await loops().detach(stacked)
    await loops().detach(device)
    await expectHostError(loops().attach(p('image-link'), { regularFile: true }), 'ELOOP')
    const plain = await loops().attach(p('disk.img'), { regularFile: true })
    await loops().detach(plain)
  })

  it('regularFile: a symlink at any level is refused (ELOOP), a /proc file too (ELOOP through /proc/self, EINVAL as a pseudo-filesystem file); the file itself is found again through a hard link', async () => {
    const { host, p } = h()
    await host.mkdir(p('real'))
    await host.writeFile(p('real', 'disk.img'), new Uint8Array(4 * MiB))
    await host.symlink(p('real'), p('linked-dir'))
    await host.mkdir(p('real', 'sub'))
    await host.symlink('..', p('real', 'sub', 'up'))
    const cases = [
      p('linked-dir', 'disk.img'),
      p('real', 'sub', 'up', 'disk.img'),
      '/proc/self/mem',
      '/proc/thread-self/mem',
      `/proc/${process.pid}/root${p('real', 'disk.img')}`,
    ]
    for (const path of cases) {
      const error = await loops().attach(path, { regularFile: true }).catch((err: unknown) => err)
      expect(error, path).toMatchObject({ code: 'ELOOP', message: expect.stringContaining('a symlink at some level of the path') })
    }
    // /proc/<pid>/mem says it is a regular file: its filesystem refuses it. /sys files too.
    await expect(loops().attach(`/proc/${process.pid}/mem`, { regularFile: true })).rejects.toMatchObject({ code: 'EINVAL', message: expect.stringContaining('a file of proc') })
    await expect(loops().attach('/sys/kernel/notes', { regularFile: true, readOnly: true })).rejects.toMatchObject({ code: 'EINVAL', message: expect.stringContaining('a file of sysfs') })
    await expectHostError(loops().attach(p('real'), { regularFile: true }), 'EINVAL')
    await expectHostError(loops().attach(p('real', 'missing.img'), { regularFile: true }), 'ENOENT')
    expect(execFileSync('losetup', ['-j', p('real', 'disk.img')], { encoding: 'utf8' }).trim()).toBe('')
    // No loop device was attached to anything under /proc or /sys either.
    const backing = execFileSync('losetup', ['--noheadings', '-l', '-O', 'BACK-FILE'], { encoding: 'utf8' })
    expect(backing).not.toMatch(/^\/(proc|sys)\//m)

    const device = await loops().attach(p('real', 'disk.img'), { regularFile: true })
    execFileSync('ln', [p('real', 'disk.img'), p('hard.img')])
    expect(await loops().attach(p('hard.img'), { regularFile: true })).toBe(device)
    expect(execFileSync('losetup', ['--noheadings', '-O', 'BACK-FILE', device], { encoding: 'utf8' }).trim()).toBe(p('real', 'disk.img'))
    await loops().detach(device)
  })

  it('a read-only attach gives a read-only device', async () => {
    const { host, p } = h()
    await host.writeFile(p('disk.img'), new Uint8Array(4 * MiB))
    const device = await loops().attach(p('disk.img'), { readOnly: true })
    expect(execFileSync('blockdev', ['--getro', device], { encoding: 'utf8' }).trim()).toBe('1')
    await loops().detach(device)
  })

  it('detach of a mounted device takes effect at the last unmount (autoclear)', async () => {
    const { host, p } = h()
    await host.writeFile(p('disk.img'), new Uint8Array(16 * MiB))
    const device = await loops().attach(p('disk.img'))
    await host.filesystems.format(device, 'ext4')
    await host.mkdir(p('mnt'))
    await host.mount({ source: device, target: p('mnt'), fstype: 'ext4' })
    await loops().detach(device)
    expect(await loops().find(p('disk.img'))).toEqual([device])
    await host.unmount(p('mnt'))
    await expect.poll(() => loops().find(p('disk.img'))).toEqual([])
  })

  it('blockDevices: size of a loop device, ENOTBLK for a file, ENOENT for a missing node; isOpen while mounted', async () => {
    const { host, p } = h()
    await host.writeFile(p('disk.img'), new Uint8Array(16 * MiB))
    const device = await loops().attach(p('disk.img'))
    expect(await host.blockDevices.size(device)).toBe(16 * MiB)
    await expectHostError(host.blockDevices.size(p('disk.img')), 'ENOTBLK')
    await expectHostError(host.blockDevices.size('/dev/no-such-device'), 'ENOENT')
    expect(await host.blockDevices.isOpen(device)).toBe(false)
    await host.filesystems.format(device, 'ext4')
    await host.mkdir(p('mnt'))
    await host.mount({ source: device, target: p('mnt'), fstype: 'ext4' })
    expect(await host.blockDevices.isOpen(device)).toBe(true)
    await host.unmount(p('mnt'))
    expect(await host.blockDevices.isOpen(device)).toBe(false)
    await loops().detach(device)
  })

  it('block mapping: the device node binds onto a file in the map path and stays a block device', async () => {
    const { host, p } = h()
    await host.writeFile(p('disk.img'), new Uint8Array(8 * MiB))
    const device = await loops().attach(p('disk.img'))
    await host.mkdir(p('map'))
    await host.writeFile(p('map', 'pod-uid'), '')
    await host.mount({ source: device, target: p('map', 'pod-uid'), bind: true })
    const mapped = await host.stat(p('map', 'pod-uid'))
    expect(mapped?.type).toBe('block-device')
    expect(mapped?.rdev).toBe((await host.stat(device))?.rdev)
    expect(await host.blockDevices.size(p('map', 'pod-uid'))).toBe(8 * MiB)
    expect(await host.isMountPoint(p('map', 'pod-uid'))).toBe(true)
    await host.unmount(p('map', 'pod-uid'))
    await host.remove(p('map', 'pod-uid'))
    await loops().detach(device)
  })
})
