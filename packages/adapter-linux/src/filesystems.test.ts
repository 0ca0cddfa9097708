import { execFileSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { expectHostError } from '@kubevol/core/testing/host-contract'
import { describe, expect, it } from 'vitest'
import { describeAsRoot } from '../test/as-root.js'
import { useLinuxHost } from '../test/harness.js'
import { fsckVerdict, mkfsArgs, PARTITIONED, parseBlkidExport, parseFsInfo } from './filesystems.js'

const MiB = 2 ** 20

describe('filesystem tool arguments and answers', () => {
  it.each([
    { fstype: 'ext4', args: ['-F', '-m0', '/dev/x'] },
    { fstype: 'ext3', args: ['-F', '-m0', '/dev/x'] },
    { fstype: 'xfs', args: ['-f', '/dev/x'] },
    { fstype: 'btrfs', args: ['/dev/x'] },
  ])('mkfs.$fstype gets $args', ({ fstype, args }) => {
    expect(mkfsArgs(fstype, '/dev/x')).toEqual(args)
  })

  it('passes format options first', () => {
    expect(mkfsArgs('ext4', '/dev/x', ['-E', 'nodiscard'])).toEqual(['-E', 'nodiscard', '-F', '-m0', '/dev/x'])
  })

  // mount-utils' checkAndRepairFilesystem: 1 corrected, exactly 4 fails, the rest is logged and the mount goes on.
  it.each([
    { code: 0, verdict: 'ok' },
    { code: 1, verdict: 'ok' },
    { code: 2, verdict: 'ignored' },
    { code: 3, verdict: 'ignored' },
    { code: 4, verdict: 'uncorrected' },
    { code: 5, verdict: 'ignored' },
    { code: 6, verdict: 'ignored' },
    { code: 8, verdict: 'ignored' },
    { code: 12, verdict: 'ignored' },
    { code: null, verdict: 'ignored' },
  ] as const)('fsck exit $code is $verdict', ({ code, verdict }) => {
    expect(fsckVerdict(code)).toBe(verdict)
  })

  it('reads block size and count as mount-utils does: keys lower-cased, other lines skipped, a bad number refused', () => {
    const dumpe2fs = 'dumpe2fs 1.47.0 (5-Feb-2023)\nFilesystem created:       Mon Jan  1 00:00:00 2024\nBlock count:              16384\nBlock size:               1024\n'
    expect(parseFsInfo(dumpe2fs, ':', 'block size', 'block count')).toEqual({ blockSize: 1024, blockCount: 16384 })
    const xfsIo = 'fd.path = "/mnt"\nstatfs.f_bsize = 4096\ngeom.bsize = 4096\ngeom.agcount = 4\ngeom.datablocks = 81920\n'
    expect(parseFsInfo(xfsIo, '=', 'geom.bsize', 'geom.datablocks')).toEqual({ blockSize: 4096, blockCount: 81920 })
    expect(parseFsInfo('nothing here', ':', 'block size', 'block count')).toEqual({ blockSize: 0, blockCount: 0 })
    expect(() => parseFsInfo('Block size: many', ':', 'block size', 'block count')).toThrow('failed to parse block size many')
  })

  it('parses blkid export output and rejects anything else', () => {
    expect(parseBlkidExport('DEVNAME=/dev/loop0\nTYPE=ext4\n')).toEqual(
      new Map([
        ['DEVNAME', '/dev/loop0'],
        ['TYPE', 'ext4'],
      ]),
    )
    expect(() => parseBlkidExport('garbage')).toThrow(/blkid returns invalid output/)
  })
})

/** A DOS partition table with one Linux partition: 0x55AA signature and one entry at offset 446. */
function writeMbr(file: string, sizeBytes: number): void {
  const image = Buffer.alloc(sizeBytes)
  const entry = Buffer.alloc(16)
  entry[4] = 0x83
  entry.writeUInt32LE(2048, 8)
  entry.writeUInt32LE(sizeBytes / 512 - 2048, 12)
  entry.copy(image, 446)
  image[510] = 0x55
  image[511] = 0xaa
  writeFileSync(file, image)
}

const hasXfs = (() => {
  try {
    execFileSync('mkfs.xfs', ['-V'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
})()
// Skipped (with the reason printed) on a machine without xfsprogs; CI installs it and never skips.
const skipXfs = !hasXfs && process.env.CI !== 'true'
if (skipXfs) console.warn('[adapter-linux] skipping the xfs test: mkfs.xfs not found (apt-get install xfsprogs)')

describeAsRoot('filesystems on loop devices', () => {
  const h = useLinuxHost()
  const attach = async (name: string, size: number, init?: (file: string) => void) => {
    const { host, p } = h()
    if (init) init(p(name))
    else await host.writeFile(p(name), new Uint8Array(size))
    const loops = host.loopDevices
    if (!loops) throw new Error('no loop devices')
    return loops.attach(p(name))
  }

  it('detect: blank is null, a filesystem its type, a partition table is never blank', async () => {
    const { host, p } = h()
    const blank = await attach('blank.img', 16 * MiB)
    expect(await host.filesystems.detect(blank)).toBeNull()
    const partitioned = await attach('mbr.img', 16 * MiB, (file) => writeMbr(file, 16 * MiB))
    expect(await host.filesystems.detect(partitioned)).toBe(PARTITIONED)
    await expectHostError(host.filesystems.format(partitioned, 'ext4'), 'EEXIST')
    await expectHostError(host.filesystems.detect(p('no-such-device')), 'ENOENT')
  })

  it('format refuses a device that already has a filesystem, whatever type is asked', async () => {
    const { host } = h()
    const device = await attach('disk.img', 16 * MiB)
    await host.filesystems.format(device, 'ext4')
    const error = await expectHostError(host.filesystems.format(device, 'ext3'), 'EEXIST')
    expect(error.message).toContain('already has ext4; refusing to format it')
    await expectHostError(host.filesystems.format(device, 'ext4; rm -rf /'), 'EINVAL')
  })

  it('check passes a clean filesystem, fails one `fsck -a` cannot repair (exit 4), and ignores exit 8 as the kubelet does', async () => {
    const { host } = h()
    const device = await attach('disk.img', 16 * MiB)
    await host.filesystems.format(device, 'ext4')
    await host.filesystems.check(device, 'ext4')
    // Clear the root inode and flag the filesystem as having errors: preen mode must give up.
    execFileSync('debugfs', ['-w', '-R', 'clri <2>', device], { stdio: 'ignore' })
    execFileSync('debugfs', ['-w', '-R', 'ssv state 2', device], { stdio: 'ignore' })
    // The detail is fsck's own output: formatAndMount puts it after the kubelet's words.
    const error = await expectHostError(host.filesystems.check(device, 'ext4'), 'EIO')
    expect(error.message).toContain('UNEXPECTED INCONSISTENCY; RUN fsck MANUALLY')
    // No superblock at all: fsck exits 8 (operational error); the kubelet logs it and mounts anyway.
    execFileSync('dd', ['if=/dev/zero', `of=${device}`, 'bs=1024', 'seek=1', 'count=1', 'conv=notrunc'], { stdio: 'ignore' })
    await host.filesystems.check(device, 'ext4')
  })

  it('resize grows ext4 offline (resize2fs after e2fsck -f) when not mounted', async () => {
    const { host, p } = h()
    const device = await attach('disk.img', 16 * MiB)
    await host.filesystems.format(device, 'ext4')
    await host.truncate(p('disk.img'), 32 * MiB)
    await host.loopDevices?.refreshCapacity(device)
    await host.filesystems.resize(device, 'ext4')
    await host.mkdir(p('mnt'))
    await host.mount({ source: device, target: p('mnt'), fstype: 'ext4' })
    expect((await host.statfs(p('mnt'))).capacityBytes).toBeGreaterThan(24 * MiB)
  })

  it('resize of a mounted ext4 grows it online, or (without CAP_SYS_RESOURCE) fails with EPERM and grows offline after unmount', async () => {
    const { host, p } = h()
    const device = await attach('disk.img', 16 * MiB)
    await host.filesystems.format(device, 'ext4')
    await host.mkdir(p('mnt'))
    await host.mount({ source: device, target: p('mnt'), fstype: 'ext4' })
    await host.truncate(p('disk.img'), 32 * MiB)
    await host.loopDevices?.refreshCapacity(device)
    const online = await host.filesystems.resize(device, 'ext4', p('mnt')).then(
      () => 'grown online',
      (err: Error) => err,
    )
    if (online !== 'grown online') {
      expect(online).toMatchObject({ code: 'EPERM', message: expect.stringContaining('unmount it and resize again to grow it offline') })
      await host.unmount(p('mnt'))
      await host.filesystems.resize(device, 'ext4')
      await host.mount({ source: device, target: p('mnt'), fstype: 'ext4' })
    }
    expect((await host.statfs(p('mnt'))).capacityBytes).toBeGreaterThan(24 * MiB)
  })

  it.skipIf(skipXfs)('resize grows xfs online with xfs_growfs; without a mount path it refuses', async () => {
    const { host, p } = h()
    const device = await attach('disk.img', 320 * MiB)
    await host.filesystems.format(device, 'xfs')
    expect(await host.filesystems.detect(device)).toBe('xfs')
    await host.mkdir(p('mnt'))
    await host.mount({ source: device, target: p('mnt'), fstype: 'xfs' })
    const before = (await host.statfs(p('mnt'))).capacityBytes
    await host.truncate(p('disk.img'), 640 * MiB)
    await host.loopDevices?.refreshCapacity(device)
    await expectHostError(host.filesystems.resize(device, 'xfs'), 'EINVAL')
    await host.filesystems.resize(device, 'xfs', p('mnt'))
    expect((await host.statfs(p('mnt'))).capacityBytes).toBeGreaterThan(before * 1.5)
  })

  it('needResize: not for growth within one block; yes once the device outgrows ext4 by more, mounted or not', async () => {
    const { host, p } = h()
    const device = await attach('disk.img', 16 * MiB)
    await host.filesystems.format(device, 'ext4')
    // dumpe2fs -h: block count × block size, the whole device here.
    expect(await host.filesystems.size(device, 'ext4')).toEqual({ sizeBytes: 16 * MiB, blockSize: 1024 })
    await host.truncate(p('disk.img'), 16 * MiB + 512)
    await host.loopDevices?.refreshCapacity(device)
    expect(await host.blockDevices.size(device)).toBe(16 * MiB + 512)
    expect(await host.filesystems.needResize(device)).toBe(false)
    await host.truncate(p('disk.img'), 24 * MiB)
    await host.loopDevices?.refreshCapacity(device)
    expect(await host.filesystems.needResize(device)).toBe(true)
    await host.mkdir(p('mnt'))
    await host.mount({ source: device, target: p('mnt'), fstype: 'ext4' })
    expect(await host.filesystems.needResize(device, p('mnt'))).toBe(true)
    const grown = await host.filesystems.resize(device, 'ext4', p('mnt')).then(
      () => true,
      () => false,
    )
    // Without CAP_SYS_RESOURCE the online grow is refused (see above): then it is grown offline.
    if (!grown) {
      await host.unmount(p('mnt'))
      await host.filesystems.resize(device, 'ext4')
    }
    expect(await host.filesystems.needResize(device)).toBe(false)
    expect((await host.filesystems.size(device, 'ext4')).sizeBytes).toBe(24 * MiB)
  })

  it('needResize is false on a blank device and on a read-only one; an unknown format is an error', async () => {
    const { host, p } = h()
    const blank = await attach('blank.img', 16 * MiB)
    expect(await host.filesystems.needResize(blank)).toBe(false)
    const formatted = await attach('ro.img', 16 * MiB)
    await host.filesystems.format(formatted, 'ext4')
    await host.loopDevices?.detach(formatted)
    await host.truncate(p('ro.img'), 24 * MiB)
    // Outgrown, but read-only (blockdev --getro): nothing may grow it.
    const readOnly = await host.loopDevices?.attach(p('ro.img'), { readOnly: true })
    expect(await host.filesystems.needResize(readOnly ?? '')).toBe(false)
    const partitioned = await attach('mbr.img', 16 * MiB, (file) => writeMbr(file, 16 * MiB))
    const error = await expectHostError(host.filesystems.needResize(partitioned), 'ENOTSUP')
    expect(error.message).toContain(`Could not parse fs info on given filesystem format: ${PARTITIONED}`)
  })

  it.skipIf(skipXfs)('needResize and size of xfs ask the mounted filesystem (xfs_io -c statfs)', async () => {
    const { host, p } = h()
    const device = await attach('disk.img', 320 * MiB)
    await host.filesystems.format(device, 'xfs')
    await host.mkdir(p('mnt'))
    await expectHostError(host.filesystems.needResize(device), 'EINVAL')
    await host.mount({ source: device, target: p('mnt'), fstype: 'xfs' })
    const before = await host.filesystems.size(device, 'xfs', p('mnt'))
    expect(before.blockSize).toBe(4096)
    expect(before.sizeBytes).toBe(320 * MiB)
    expect(await host.filesystems.needResize(device, p('mnt'))).toBe(false)
    await host.truncate(p('disk.img'), 400 * MiB)
    await host.loopDevices?.refreshCapacity(device)
    expect(await host.filesystems.needResize(device, p('mnt'))).toBe(true)
    await host.filesystems.resize(device, 'xfs', p('mnt'))
    expect(await host.filesystems.needResize(device, p('mnt'))).toBe(false)
    expect((await host.filesystems.size(device, 'xfs', p('mnt'))).sizeBytes).toBe(400 * MiB)
  })

  it('an unsupported type is ENOTSUP; a missing tool is ENOTSUP naming it', async () => {
    const { host } = h()
    const device = await attach('disk.img', 16 * MiB)
    await expectHostError(host.filesystems.resize(device, 'vfat'), 'ENOTSUP')
    const error = await expectHostError(host.filesystems.format(device, 'nosuchfs'), 'ENOTSUP')
    expect(error.message).toContain('mkfs.nosuchfs is not installed')
  })
})
