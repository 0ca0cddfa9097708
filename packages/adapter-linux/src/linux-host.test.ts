import { execFileSync } from 'node:child_process'
import { closeSync, openSync, readFileSync } from 'node:fs'
import { silentLogger } from '@kubevol/core'
import { VolumeJournal } from '@kubevol/core/engine'
import { expectHostError } from '@kubevol/core/testing/host-contract'
import { expect, it } from 'vitest'
import { describeAsRoot } from '../test/as-root.js'
import { useLinuxHost } from '../test/harness.js'
import { checkMountNamespace, checkRootPropagation } from './doctor.js'
import { parseMountInfo } from './mountinfo.js'

describeAsRoot('linux host: mounts on the real kernel', () => {
  const h = useLinuxHost()

  it('runs in a private mount namespace: a mount made here is not in the mount table of PID 1', async () => {
    const { host, p } = h()
    await host.mkdir(p('m'))
    await host.mount({ source: 'tmpfs', target: p('m'), fstype: 'tmpfs' })
    expect(parseMountInfo(readFileSync('/proc/self/mountinfo', 'utf8')).some((e) => e.target === p('m'))).toBe(true)
    expect(parseMountInfo(readFileSync('/proc/1/mountinfo', 'utf8')).some((e) => e.target === p('m'))).toBe(false)
    expect((await checkMountNamespace()).ok).toBe(false)
  })

  it('answers isMountPoint from one snapshot, read again only when the kernel reports a change', async () => {
    const { host, p } = h()
    await host.mkdir(p('m'))
    await host.isMountPoint(p('m'))
    const reads = host.mountTableReads
    for (let i = 0; i < 20; i++) expect(await host.isMountPoint(p('m'))).toBe(false)
    expect(host.mountTableReads).toBe(reads)
    // A mount made behind the host's back (mount(8) in this namespace): poll(2) says the table
    // changed, so the snapshot no longer answers no; the kernel does (statx), with no read.
    execFileSync('mount', ['-t', 'tmpfs', 'tmpfs', p('m')])
    expect(await host.isMountPoint(p('m'))).toBe(true)
    expect(host.mountTableReads).toBe(reads)
    // Listed in the table once it is read; gone from it after the unmount, read again.
    expect((await host.mounts()).some((e) => e.target === p('m'))).toBe(true)
    expect(host.mountTableReads).toBe(reads + 1)
    expect(await host.isMountPoint(p('m'))).toBe(true)
    execFileSync('umount', [p('m')])
    expect(await host.isMountPoint(p('m'))).toBe(false)
    expect(host.mountTableReads).toBe(reads + 2)
  })

  it('a mount point listed in an out-of-date table is checked against a fresh one', async () => {
    const { host, p } = h()
    await host.mkdir(p('m'))
    execFileSync('mount', ['-t', 'tmpfs', 'tmpfs', p('m')])
    expect(await host.isMountPoint(p('m'))).toBe(true)
    // Unmounted behind the host's back: the snapshot still lists it, the answer must not.
    execFileSync('umount', [p('m')])
    expect(await host.isMountPoint(p('m'))).toBe(false)
  })

  it('sees a bind mount of the same filesystem (invisible to the st_dev heuristic)', async () => {
    const { host, p } = h()
    await host.mkdir(p('src'))
    await host.mkdir(p('dst'))
    await host.mount({ source: p('src'), target: p('dst'), bind: true })
    expect((await host.stat(p('dst')))?.dev).toBe((await host.stat(p('src')))?.dev)
    expect(await host.isMountPoint(p('dst'))).toBe(true)
  })

  it('isMountPoint resolves symlinks in the parent and in the last component', async () => {
    const { host, p } = h()
    await host.mkdir(p('real', 'm'), { recursive: true })
    await host.mount({ source: 'tmpfs', target: p('real', 'm'), fstype: 'tmpfs' })
    await host.symlink(p('real'), p('alias'))
    await host.symlink(p('real', 'm'), p('link-to-m'))
    expect(await host.isMountPoint(p('alias', 'm'))).toBe(true)
    expect(await host.isMountPoint(p('link-to-m'))).toBe(true)
    expect(await host.isMountPoint(`${p('real')}/./m/`)).toBe(true)
  })

  it('handles mount points with spaces and backslashes (kernel octal escapes)', async () => {
    const { host, p } = h()
    const target = p('with space\\and backslash')
    await host.mkdir(target)
    await host.mount({ source: 'tmpfs', target, fstype: 'tmpfs' })
    expect(await host.isMountPoint(target)).toBe(true)
    expect((await host.mounts()).some((e) => e.target === target)).toBe(true)
    await host.unmount(target)
    expect(await host.isMountPoint(target)).toBe(false)
  })

  it('a read-only bind in one request is a bind plus a read-only remount; flags and data reach the kernel', async () => {
    const { host, p } = h()
    await host.mkdir(p('src'))
    await host.mkdir(p('ro'))
    await host.mkdir(p('t'))
    await host.mount({ source: p('src'), target: p('ro'), bind: true, readOnly: true })
    await expectHostError(host.writeFile(p('ro', 'f'), 'x'), 'EROFS')
    await host.mount({ source: 'tmpfs', target: p('t'), fstype: 'tmpfs', options: ['size=2m', 'mode=0700', 'nosuid', 'nodev', 'defaults'] })
    const entry = (await host.mounts()).findLast((e) => e.target === p('t'))
    expect(entry?.options).toEqual(expect.arrayContaining(['nosuid', 'nodev']))
    expect(entry?.superOptions).toEqual(expect.arrayContaining(['size=2048k', 'mode=700']))
    expect((await host.stat(p('t')))?.mode).toBe(0o700)
  })

  it('keeps locked flags on a read-only bind of a nosuid,nodev,noexec mount', async () => {
    const { host, p } = h()
    await host.mkdir(p('locked'))
    await host.mkdir(p('ro'))
    await host.mount({ source: 'tmpfs', target: p('locked'), fstype: 'tmpfs', options: ['nosuid', 'nodev', 'noexec'] })
    await host.mount({ source: p('locked'), target: p('ro'), bind: true, readOnly: true })
    const entry = (await host.mounts()).findLast((e) => e.target === p('ro'))
    expect(entry?.options).toEqual(expect.arrayContaining(['ro', 'nosuid', 'nodev', 'noexec']))
  })

  it('an lstat asked after another call in the same turn sees what that call did, not a shared earlier answer', async () => {
    const { host, p } = h()
    await host.mkdir(p('moded'))
    await host.chmod(p('moded'), 0o755)
    // One turn: the worker gets lstat, chmod, lstat in this order, and answers each as made.
    const before = host.lstat(p('moded'))
    const changed = host.chmod(p('moded'), 0o700)
    const after = host.lstat(p('moded'))
    expect(((await before)?.mode ?? 0) & 0o777).toBe(0o755)
    await changed
    expect(((await after)?.mode ?? 0) & 0o777).toBe(0o700)
  })

  it('mkdir -p: a pod of volumes at once makes their shared parents, with the mode, and refuses a file', async () => {
    const { host, p } = h()
    const volumes = Array.from({ length: 10 }, (_, i) => p('pods', 'u1', 'volumes', 'plugin', `v${i}`))
    // Siblings under four missing levels, one of them asked for twice, all in one turn.
    await Promise.all([...volumes, volumes[3] as string].map((v) => host.mkdir(v, { recursive: true, mode: 0o750 })))
    for (const v of [...volumes, p('pods', 'u1', 'volumes'), p('pods')]) {
      const info = await host.lstat(v)
      expect(info?.type).toBe('directory')
      expect((info?.mode ?? 0) & 0o777).toBe(0o750)
    }
    // Existing: no error, and nothing changes.
    await host.mkdir(volumes[0] as string, { recursive: true })
    await host.writeFile(p('pods', 'file'), 'x')
    await expectHostError(host.mkdir(p('pods', 'file'), { recursive: true }), 'EEXIST')
    await expectHostError(host.mkdir(p('pods', 'file', 'below'), { recursive: true }), 'ENOTDIR')
  })

  it('removeUnmounted: a mount point is refused by the check before any rmdir(2); a symlink to one is only unlinked', async () => {
    const { host, p } = h()
    await host.mkdir(p('vol', 'mount'), { recursive: true })
    await host.mount({ source: 'tmpfs', target: p('vol', 'mount'), fstype: 'tmpfs' })
    await host.symlink(p('vol', 'mount'), p('link'))
    // The table not read since the mount, then read: the worker's statx, then the table, answer.
    for (const readTable of [false, true]) {
      if (readTable) await host.mounts()
      const err = await expectHostError(host.removeUnmounted([p('vol', 'mount'), p('vol')]), 'EBUSY')
      // rmdir(2) would have said EBUSY too; the check names itself.
      expect([err.syscall, err.path]).toEqual(['remove', p('vol', 'mount')])
      expect(await host.isMountPoint(p('vol', 'mount'))).toBe(true)
    }
    await host.removeUnmounted([p('link')])
    expect(await host.lstat(p('link'))).toBeNull()
    expect(await host.isMountPoint(p('vol', 'mount'))).toBe(true)
    await host.unmount(p('vol', 'mount'))
    await host.removeUnmounted([p('vol', 'mount'), p('vol')])
    expect(await host.lstat(p('vol'))).toBeNull()
  })

  it('removeUnmounted removes each path by the type statx saw: the link, never what it points at; a directory with something in it stops it', async () => {
    const { host, p } = h()
    await host.mkdir(p('target', 'inside'), { recursive: true })
    await host.writeFile(p('target', 'inside', 'keep'), 'keep me')
    await host.mkdir(p('vol', 'empty'), { recursive: true })
    await host.writeFile(p('vol', 'file'), 'x')
    await host.symlink(p('target'), p('vol', 'link-to-dir'))
    await host.symlink(p('nowhere'), p('vol', 'dangling'))
    execFileSync('mkfifo', [p('vol', 'fifo')])
    await host.mkdir(p('vol', 'full'))
    await host.writeFile(p('vol', 'full', 'left'), 'left')
    const kinds = ['file', 'link-to-dir', 'dangling', 'fifo', 'empty'].map((name) => p('vol', name))
    const err = await expectHostError(host.removeUnmounted([...kinds, p('vol', 'full'), p('vol')]), 'ENOTEMPTY')
    expect([err.syscall, err.path]).toEqual(['rmdir', p('vol', 'full')])
    for (const path of kinds) expect(await host.lstat(path)).toBeNull()
    expect(readFileSync(p('vol', 'full', 'left'), 'utf8')).toBe('left')
    expect(readFileSync(p('target', 'inside', 'keep'), 'utf8')).toBe('keep me')
    // A path that is now another type than it was: still removed by its own type.
    await host.mkdir(p('vol', 'file'))
    await host.writeFile(p('vol', 'empty'), 'y')
    await host.removeUnmounted([p('vol', 'file'), p('vol', 'empty')])
    expect(await host.lstat(p('vol', 'file'))).toBeNull()
    expect(await host.lstat(p('vol', 'empty'))).toBeNull()
  })

  it('appendFile on a filesystem that fills up mid-write fails (ENOSPC) instead of leaving part of the data unseen', async () => {
    const { host, p } = h()
    await host.mkdir(p('small'))
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', p('small')])
    try {
      // Room for about half of the append: write(2) writes what fits and says so, then ENOSPC.
      await host.writeFile(p('small', 'fill'), new Uint8Array(64 * 1024 - 40 * 1024))
      const log = p('small', 'log')
      await expectHostError(host.appendFile(log, 'x'.repeat(80 * 1024)), 'ENOSPC')
      // What it wrote stays (the caller decides); once there is room, an append works.
      await host.remove(log)
      await host.appendFile(p('small', 'other'), 'line\n')
      expect(readFileSync(p('small', 'other'), 'utf8')).toBe('line\n')
    } finally {
      execFileSync('umount', [p('small')])
    }
  })

  it('the journal on a filesystem that fills up: a failed intent costs nothing written after it', async () => {
    const { host, p } = h()
    await host.mkdir(p('small'))
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', p('small')])
    try {
      const path = p('small', 'journal', 'volumes.log')
      await host.mkdir(p('small', 'journal'))
      const journal = await VolumeJournal.open({ host, path, logger: silentLogger })
      const setup = (volume: string, size = 0) => ({ kind: 'setup', volume, pod: 'a', podUID: 'a', outerName: 'v'.repeat(size + 1), spec: { name: 'v', readOnly: false }, gid: '' }) as const
      await journal.record(setup('p/before'))
      await host.writeFile(p('small', 'fill'), new Uint8Array(64 * 1024 - 40 * 1024))
      // An intent larger than the room left: part of it written, then ENOSPC.
      await expect(journal.record(setup('p/too-big', 60 * 1024))).rejects.toMatchObject({ code: 'ENOSPC' })
      await host.remove(p('small', 'fill'))
      await journal.record(setup('p/after'))
      const reopened = await VolumeJournal.read({ host, path, logger: silentLogger })
      expect([...reopened.volumes().keys()].sort()).toEqual(['p/after', 'p/before'])
    } finally {
      execFileSync('umount', [p('small')])
    }
  })

  it('removeUnmounted with unmountLast: a busy tmpfs fails with the unmount’s error and stays mounted with its files', async () => {
    const { host, p } = h()
    await host.mkdir(p('m'))
    await host.mount({ source: 'tmpfs', target: p('m'), fstype: 'tmpfs' })
    await host.writeFile(p('m', 'open'), 'held open')
    await host.writeFile(p('marker'), '')
    const fd = openSync(p('m', 'open'), 'r')
    try {
      const err = await expectHostError(host.removeUnmounted?.([p('marker'), p('m')], { unmountLast: true }) as Promise<void>, 'EBUSY')
      expect(err.syscall).toBe('umount')
      expect(err.path).toBe(p('m'))
      expect(await host.lstat(p('marker'))).toBeNull()
      expect(await host.isMountPoint(p('m'))).toBe(true)
      expect(readFileSync(p('m', 'open'), 'utf8')).toBe('held open')
    } finally {
      closeSync(fd)
      await host.unmount(p('m'))
    }
  })

  it('a failed mount names the call, the path and the kernel reason', async () => {
    const { host, p } = h()
    await host.mkdir(p('m'))
    const error = await expectHostError(host.mount({ source: 'none', target: p('m'), fstype: 'no-such-fs' }), 'ENODEV')
    expect(error.message).toBe(`ENODEV: mount ${p('m')}: mount -t no-such-fs none ${p('m')}: no such device`)
  })

  it('unmount does not follow a symlink by default (UMOUNT_NOFOLLOW)', async () => {
    const { host, p } = h()
    await host.mkdir(p('m'))
    await host.mount({ source: 'tmpfs', target: p('m'), fstype: 'tmpfs' })
    await host.symlink(p('m'), p('link'))
    await expectHostError(host.unmount(p('link')), 'EINVAL')
    await host.unmount(p('link'), { noFollow: false })
    expect(await host.isMountPoint(p('m'))).toBe(false)
  })

  it('removeAll refuses a tree with a bind of the same filesystem inside and deletes nothing', async () => {
    const { host, p } = h()
    await host.mkdir(p('tree', 'a'), { recursive: true })
    await host.writeFile(p('tree', 'keep'), 'x')
    await host.mkdir(p('data'))
    await host.writeFile(p('data', 'precious'), 'y')
    await host.mount({ source: p('data'), target: p('tree', 'a'), bind: true })
    const error = await expectHostError(host.removeAll(p('tree')), 'EBUSY')
    expect(error.message).toContain(`${p('tree', 'a')} is a mount point`)
    expect(await host.readdir(p('tree'))).toEqual(['a', 'keep'])
    expect(await host.readdir(p('data'))).toEqual(['precious'])
    await expectHostError(host.removeAll(p('tree', 'a')), 'EBUSY')
  })

  it('removeAll of a file bind-mount target fails with EBUSY; of a symlink removes only the link', async () => {
    const { host, p } = h()
    await host.writeFile(p('src'), 'x')
    await host.writeFile(p('dst'), 'y')
    await host.mount({ source: p('src'), target: p('dst'), bind: true })
    await expectHostError(host.removeAll(p('dst')), 'EBUSY')
    await host.mkdir(p('dir'))
    await host.symlink(p('dir'), p('link'))
    await host.removeAll(p('link'))
    expect((await host.lstat(p('dir')))?.type).toBe('directory')
  })

  it('mountsOfDevice lists the mounts of a filesystem, binds included', async () => {
    const { host, p } = h()
    const loops = host.loopDevices
    if (!loops) throw new Error('no loop devices on this machine')
    await host.writeFile(p('disk.img'), new Uint8Array(16 * 2 ** 20))
    const device = await loops.attach(p('disk.img'))
    await host.filesystems.format(device, 'ext4')
    await host.mkdir(p('disk'))
    await host.mkdir(p('bind'))
    await host.mount({ source: device, target: p('disk'), fstype: 'ext4' })
    await host.mount({ source: p('disk'), target: p('bind'), bind: true })
    expect((await host.mountsOfDevice(device)).map((e) => e.target)).toEqual([p('disk'), p('bind')])
    await host.unmount(p('bind'))
    await host.unmount(p('disk'))
    expect(await host.mountsOfDevice(device)).toEqual([])
    await loops.detach(device)
  })

  it('doctor: the root must be on a shared mount for volumes to reach containers', async () => {
    const { host, p } = h()
    await host.mkdir(p('root'))
    await host.mount({ source: 'tmpfs', target: p('root'), fstype: 'tmpfs' })
    expect(await checkRootPropagation(host, p('root', 'pods'))).toMatchObject({ ok: false })
    await host.mount({ source: p('root'), target: p('root'), bind: true, remount: true, propagation: 'shared' })
    expect(await checkRootPropagation(host, p('root', 'pods'))).toMatchObject({ ok: true })
  })

  it('statfs reports capacity, use and inodes of a sized tmpfs', async () => {
    const { host, p } = h()
    await host.mkdir(p('m'))
    await host.mount({ source: 'tmpfs', target: p('m'), fstype: 'tmpfs', options: ['size=4m', 'nr_inodes=100'] })
    await host.writeFile(p('m', 'f'), new Uint8Array(2 ** 20))
    expect(await host.statfs(p('m'))).toEqual({
      capacityBytes: 4 * 2 ** 20,
      availableBytes: 3 * 2 ** 20,
      usedBytes: 2 ** 20,
      inodes: 100,
      inodesFree: 98,
      inodesUsed: 2,
    })
  })

  it('selinux is enabled exactly when the enforce file exists', async () => {
    const { host } = h()
    const { createLinuxHost } = await import('./create-linux-host.js')
    expect(await host.selinux.enabled()).toBe(readFileSyncExists('/sys/fs/selinux/enforce'))
    expect(await createLinuxHost({ selinuxEnforcePath: '/proc/self/status' }).selinux.enabled()).toBe(true)
  })
})

function readFileSyncExists(path: string): boolean {
  try {
    readFileSync(path)
    return true
  } catch {
    return false
  }
}
