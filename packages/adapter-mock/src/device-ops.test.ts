import { isHostError } from '@kubevol/core'
import { describe, expect, it } from 'vitest'
import type { MemoryHost } from './memory-host.js'
import { createMemoryHost } from './memory-host.js'

const MiB = 2 ** 20

async function errorCode(promise: Promise<unknown> | undefined): Promise<string | undefined> {
  return (promise ?? Promise.resolve()).then(
    () => undefined,
    (err: unknown) => (isHostError(err) ? err.code : String(err)),
  )
}

function capabilities(host: MemoryHost) {
  const { loopDevices, blockDevices, filesystems, statfs } = host
  if (!loopDevices || !blockDevices || !filesystems || !statfs) throw new Error('memory host lacks a capability')
  return { loops: loopDevices, blocks: blockDevices, fs: filesystems, statfs }
}

async function formattedDisk(fstype = 'ext4') {
  const host = createMemoryHost()
  const caps = capabilities(host)
  host.addBlockDevice('/dev/sdb', 64 * MiB)
  await caps.fs.format('/dev/sdb', fstype)
  await host.mkdir('/mnt')
  return { host, ...caps }
}

describe('block devices and filesystems', () => {
  it('a device filesystem keeps its data across unmount and mount, at any mount point', async () => {
    const { host } = await formattedDisk()
    await host.mount({ source: '/dev/sdb', target: '/mnt', fstype: 'ext4' })
    await host.writeFile('/mnt/data', 'persisted')
    await host.unmount('/mnt')
    await host.mkdir('/elsewhere')
    await host.mount({ source: '/dev/sdb', target: '/elsewhere', fstype: 'ext4' })
    expect(host.tree('/elsewhere')).toMatchObject({
      mount: { fstype: 'ext4', source: '/dev/sdb' },
      children: { data: { text: 'persisted' }, 'lost+found': { type: 'directory', mode: 0o700 } },
    })
  })

  it('shows the device number in stat and the mount table', async () => {
    const { host } = await formattedDisk()
    await host.mount({ source: '/dev/sdb', target: '/mnt' })
    const entry = (await host.mounts()).find((e) => e.target === '/mnt')
    expect(entry).toMatchObject({ device: '8:0', root: '/', fstype: 'ext4', superOptions: ['rw'] })
    expect(host.tree('/dev/sdb')).toMatchObject({ type: 'block-device', device: '8:0' })
    expect((await host.stat('/mnt'))?.dev).toBe(8 << 8)
  })

  it.each([
    { case: 'a blank device', format: null, fstype: 'ext4' },
    { case: 'another filesystem type', format: 'xfs', fstype: 'ext4' },
  ])('mounting $case fails with EINVAL (wrong fs type)', async ({ format, fstype }) => {
    const host = createMemoryHost()
    host.addBlockDevice('/dev/sdb', 64 * MiB, format ? { fstype: format } : {})
    await host.mkdir('/mnt')
    expect(await errorCode(host.mount({ source: '/dev/sdb', target: '/mnt', fstype }))).toBe('EINVAL')
    expect(host.mountTargets()).toEqual([])
  })

  it.each([
    { case: 'a missing device', source: '/dev/nope', code: 'ENOENT' },
    { case: 'a directory', source: '/tmp', code: 'EINVAL' },
    { case: 'an unknown pseudo filesystem', source: 'server:/export', code: 'ENODEV' },
  ])('mounting $case fails with $code', async ({ source, code }) => {
    const host = createMemoryHost()
    await host.mkdir('/mnt')
    expect(await errorCode(host.mount({ source, target: '/mnt', fstype: 'nfs' }))).toBe(code)
  })

  it('format resets the tree and records the signature', async () => {
    const { host, fs } = await formattedDisk()
    await host.mount({ source: '/dev/sdb', target: '/mnt' })
    await host.writeFile('/mnt/old', 'x')
    await host.unmount('/mnt')
    await fs.format('/dev/sdb', 'xfs')
    expect(await fs.detect('/dev/sdb')).toBe('xfs')
    await host.mount({ source: '/dev/sdb', target: '/mnt', fstype: 'xfs' })
    expect(await host.readdir('/mnt')).toEqual([])
  })

  it('isOpen is true while mounted, through a bind of the mount too', async () => {
    const { host, blocks } = await formattedDisk()
    await host.mount({ source: '/dev/sdb', target: '/mnt' })
    await host.mkdir('/bind')
    await host.mount({ source: '/mnt', target: '/bind', bind: true })
    await host.unmount('/mnt')
    expect(await blocks.isOpen('/dev/sdb')).toBe(true)
    await host.unmount('/bind')
    expect(await blocks.isOpen('/dev/sdb')).toBe(false)
  })

  it('check fails while mounted read-write and without the filesystem', async () => {
    const { host, fs } = await formattedDisk()
    await fs.check('/dev/sdb', 'ext4')
    expect(await errorCode(fs.check('/dev/sdb', 'xfs'))).toBe('EINVAL')
    await host.mount({ source: '/dev/sdb', target: '/mnt' })
    expect(await errorCode(fs.check('/dev/sdb', 'ext4'))).toBe('EBUSY')
    await host.mount({ source: '/dev/sdb', target: '/mnt', remount: true, readOnly: true })
    await fs.check('/dev/sdb', 'ext4')
  })

  it('statfs reports the device capacity, the bytes used and the inodes', async () => {
    const { host, statfs } = await formattedDisk()
    await host.mount({ source: '/dev/sdb', target: '/mnt' })
    await host.writeFile('/mnt/f', new Uint8Array(MiB))
    expect(await statfs('/mnt/f')).toEqual({
      capacityBytes: 64 * MiB,
      usedBytes: MiB,
      availableBytes: 63 * MiB,
      inodes: 4096,
      inodesUsed: 3,
      inodesFree: 4093,
    })
  })

  it('a device filesystem is full at its capacity (ENOSPC)', async () => {
    const host = createMemoryHost()
    host.addBlockDevice('/dev/small', MiB, { fstype: 'ext4' })
    await host.mkdir('/mnt')
    await host.mount({ source: '/dev/small', target: '/mnt' })
    expect(await errorCode(host.writeFile('/mnt/big', new Uint8Array(2 * MiB)))).toBe('ENOSPC')
  })
})

describe('loop devices', () => {
  it('a filesystem made through a loop device is there again when the same file is attached again', async () => {
    const host = createMemoryHost()
    const { loops, fs } = capabilities(host)
    host.allocateFile('/var/disk.img', 32 * MiB)
    const first = await loops.attach('/var/disk.img')
    await fs.format(first, 'ext4')
    await host.mkdir('/mnt')
    await host.mount({ source: first, target: '/mnt', fstype: 'ext4' })
    await host.writeFile('/mnt/f', 'on the image')
    await host.unmount('/mnt')
    await loops.detach(first)
    host.allocateFile('/other.img', MiB)
    expect(await loops.attach('/other.img')).toBe(first)
    const second = await loops.attach('/var/disk.img')
    expect(second).not.toBe(first)
    expect(await fs.detect(second)).toBe('ext4')
    await host.mount({ source: second, target: '/mnt' })
    expect(host.tree('/mnt/f')).toMatchObject({ text: 'on the image' })
    expect((await host.mounts()).at(-1)?.device).toBe('7:1')
  })

  it('size follows the backing file at attach and refreshCapacity; resize grows the filesystem', async () => {
    const host = createMemoryHost()
    const { loops, blocks, fs, statfs } = capabilities(host)
    host.allocateFile('/disk.img', 16 * MiB)
    const device = await loops.attach('/disk.img')
    await fs.format(device, 'ext4')
    await host.mkdir('/mnt')
    await host.mount({ source: device, target: '/mnt' })
    host.allocateFile('/disk.img', 48 * MiB)
    expect(await blocks.size(device)).toBe(16 * MiB)
    await loops.refreshCapacity(device)
    expect(await blocks.size(device)).toBe(48 * MiB)
    expect((await statfs('/mnt')).capacityBytes).toBe(16 * MiB)
    await fs.resize(device, 'ext4', '/mnt')
    expect((await statfs('/mnt')).capacityBytes).toBe(48 * MiB)
    expect(await errorCode(fs.resize(device, 'ext4', '/tmp'))).toBe('EINVAL')
  })

  it('find lists every loop device over a file; detach of a free or non-loop device fails with ENXIO', async () => {
    const host = createMemoryHost()
    const { loops } = capabilities(host)
    host.allocateFile('/disk.img', MiB)
    const a = await loops.attach('/disk.img')
    const b = await loops.attach('/disk.img')
    expect(await loops.find('/disk.img')).toEqual([a, b])
    await loops.detach(a)
    expect(await loops.find('/disk.img')).toEqual([b])
    expect(await errorCode(loops.detach(a))).toBe('ENXIO')
    host.addBlockDevice('/dev/sdb', MiB)
    expect(await errorCode(loops.detach('/dev/sdb'))).toBe('ENXIO')
    expect(await errorCode(loops.detach('/dev/missing'))).toBe('ENOENT')
  })

  it('detach of a mounted loop device takes effect at its last unmount (autoclear)', async () => {
    const host = createMemoryHost()
    const { loops, fs } = capabilities(host)
    host.allocateFile('/disk.img', MiB)
    const device = await loops.attach('/disk.img')
    await fs.format(device, 'ext4')
    await host.mkdir('/mnt')
    await host.mount({ source: device, target: '/mnt' })
    await loops.detach(device)
    expect(await loops.find('/disk.img')).toEqual([device])
    await host.unmount('/mnt')
    expect(await loops.find('/disk.img')).toEqual([])
  })

  it('a block device used as loop backing is open; a read-only loop device mounts read-only', async () => {
    const host = createMemoryHost()
    const { loops, blocks } = capabilities(host)
    host.addBlockDevice('/dev/sdb', 8 * MiB, { fstype: 'ext4' })
    const device = await loops.attach('/dev/sdb', { readOnly: true })
    expect(await blocks.isOpen('/dev/sdb')).toBe(true)
    expect(await blocks.size(device)).toBe(8 * MiB)
    await host.mkdir('/mnt')
    await host.mount({ source: device, target: '/mnt', fstype: 'ext4' })
    expect(await errorCode(host.writeFile('/mnt/f', 'x'))).toBe('EROFS')
    expect(await errorCode(host.filesystems?.format(device, 'ext4'))).toBe('EROFS')
  })

  it('overwriting the backing file destroys the filesystem on it', async () => {
    const host = createMemoryHost()
    const { loops, fs } = capabilities(host)
    await host.writeFile('/disk.img', new Uint8Array(MiB))
    const device = await loops.attach('/disk.img')
    await fs.format(device, 'ext4')
    await host.writeFile('/disk.img', new Uint8Array(MiB))
    expect(await fs.detect(device)).toBeNull()
  })
})

describe('loop attach of a disk image (regularFile)', () => {
  it('refuses a symlink at any level (ELOOP) and a file under /proc or /sys (EINVAL); attaches the file itself', async () => {
    const { host, loops } = await formattedDisk()
    await host.mkdir('/real/sub', { recursive: true })
    await host.writeFile('/real/disk.img', new Uint8Array(MiB))
    await host.symlink('/real', '/linked')
    await host.symlink('..', '/real/sub/up')
    await host.mkdir('/proc/1', { recursive: true })
    await host.writeFile('/proc/1/mem', new Uint8Array(MiB))
    await host.symlink('/proc/1', '/proc/self')
    for (const path of ['/linked/disk.img', '/real/sub/up/disk.img', '/proc/self/mem']) expect(await errorCode(loops.attach(path, { regularFile: true })), path).toBe('ELOOP')
    expect(await errorCode(loops.attach('/proc/1/mem', { regularFile: true }))).toBe('EINVAL')
    expect(await errorCode(loops.attach('/real', { regularFile: true }))).toBe('EINVAL')
    expect(await loops.find('/real/disk.img')).toEqual([])
    expect(await loops.attach('/real/disk.img', { regularFile: true })).toMatch(/^\/dev\/loop\d+$/)
  })
})

describe('loop attach of what is in use', () => {
  it('a mounted block device is EBUSY (the exclusive open); regularFile refuses a device (EINVAL) and a symlink (ELOOP)', async () => {
    const { host, loops } = await formattedDisk()
    await host.mount({ source: '/dev/sdb', target: '/mnt', fstype: 'ext4' })
    await host.symlink('/dev/sdb', '/link')
    await host.writeFile('/disk.img', new Uint8Array(MiB))
    await host.symlink('/disk.img', '/image-link')
    expect(await errorCode(loops.attach('/dev/sdb'))).toBe('EBUSY')
    expect(await errorCode(loops.attach('/link'))).toBe('EBUSY')
    expect(await errorCode(loops.attach('/dev/sdb', { regularFile: true }))).toBe('EINVAL')
    expect(await errorCode(loops.attach('/image-link', { regularFile: true }))).toBe('ELOOP')
    expect(await errorCode(loops.attach('/link', { regularFile: true }))).toBe('ELOOP')
    expect(await loops.attach('/disk.img', { regularFile: true })).toMatch(/^\/dev\/loop\d+$/)
    await host.unmount('/mnt')
    expect(await loops.attach('/dev/sdb')).toMatch(/^\/dev\/loop\d+$/)
  })
})
