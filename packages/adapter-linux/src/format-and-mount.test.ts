/**
 * formatAndMount (mount-utils SafeFormatAndMount, SPEC §8.5) on the real kernel: an existing
 * filesystem is checked with `fsck -a` before every read-write mount, whatever type was asked, and
 * never before a read-only one. Whether fsck ran is read from the superblock: a filesystem marked
 * "not clean" stays so across a mount and unmount, and only a check marks it clean.
 */
import { execFileSync } from 'node:child_process'
import { FormatAndMountError, formatAndMount } from '@kubevol/core/plugins'
import { expect, it } from 'vitest'
import { describeAsRoot } from '../test/as-root.js'
import { useLinuxHost } from '../test/harness.js'

const MiB = 2 ** 20

function stateOf(device: string): string {
  const header = execFileSync('dumpe2fs', ['-h', device], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
  return /^Filesystem state:\s*(.+)$/m.exec(header)?.[1]?.trim() ?? '(no state line)'
}

describeAsRoot('formatAndMount checks an existing filesystem before a read-write mount', () => {
  const h = useLinuxHost()

  /** An ext4 image on a loop device, marked as not cleanly unmounted (superblock state 0). */
  async function uncleanExt4(): Promise<string> {
    const { host, p } = h()
    await host.writeFile(p('disk.img'), new Uint8Array(0))
    await host.truncate(p('disk.img'), 16 * MiB)
    const device = await host.loopDevices.attach(p('disk.img'))
    await host.filesystems.format(device, 'ext4')
    execFileSync('debugfs', ['-w', '-R', 'ssv state 0', device], { stdio: 'ignore' })
    expect(stateOf(device)).toBe('not clean')
    await host.mkdir(p('mnt'))
    return device
  }

  it('checks it when the type asked is the one on the disk', async () => {
    const { host, p } = h()
    const device = await uncleanExt4()
    await formatAndMount(host, device, p('mnt'), { fstype: 'ext4' })
    expect(await host.isMountPoint(p('mnt'))).toBe(true)
    await host.unmount(p('mnt'))
    expect(stateOf(device)).toBe('clean')
  })

  it('checks it when another type is asked, then fails the mount as FilesystemMismatch', async () => {
    const { host, p } = h()
    const device = await uncleanExt4()
    const error = await formatAndMount(host, device, p('mnt'), { fstype: 'xfs' }).catch((err: unknown) => err)
    expect(error).toBeInstanceOf(FormatAndMountError)
    expect(error).toMatchObject({ type: 'FilesystemMismatch', message: expect.stringContaining('the disk has ext4, xfs was requested') })
    expect(stateOf(device)).toBe('clean')
  })

  it.each([
    { how: 'readOnly', options: { readOnly: true } },
    { how: 'an ro mount option', options: { options: ['ro'] } },
  ])('never checks it for a read-only mount ($how)', async ({ options }) => {
    const { host, p } = h()
    const device = await uncleanExt4()
    await formatAndMount(host, device, p('mnt'), { fstype: 'ext4', ...options })
    expect((await host.mounts()).findLast((e) => e.target === p('mnt'))?.options).toContain('ro')
    await host.unmount(p('mnt'))
    expect(stateOf(device)).toBe('not clean')
  })

  it('fails with HasFilesystemErrors, the kubelet text and then fsck output, when fsck -a cannot repair it (exit 4)', async () => {
    const { host, p } = h()
    const device = await uncleanExt4()
    // Clear the root inode and flag the filesystem as having errors: preen mode gives up.
    execFileSync('debugfs', ['-w', '-R', 'clri <2>', device], { stdio: 'ignore' })
    execFileSync('debugfs', ['-w', '-R', 'ssv state 2', device], { stdio: 'ignore' })
    const error = await formatAndMount(host, device, p('mnt'), { fstype: 'ext4' }).catch((err: unknown) => err)
    expect(error).toMatchObject({ type: 'HasFilesystemErrors' })
    const message = (error as Error).message
    expect(message.startsWith(`'fsck' found errors on device ${device} but could not correct them: fsck from util-linux`)).toBe(true)
    expect(message).toContain('UNEXPECTED INCONSISTENCY; RUN fsck MANUALLY')
    expect(await host.isMountPoint(p('mnt'))).toBe(false)
  })
})
