/**
 * A fileDisk volume whose handle is not a disk image file (issue: a block device mounted elsewhere
 * was attached again, checked and mounted a second time, and both ext4 mounts corrupted it). The
 * whole manager with the built-in plugins on the real kernel: a device handle and a symlink to the
 * device are refused with a clear error and the filesystem is left as it was; a regular file works.
 */
import { execFileSync, spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { type VolumeEvent, createVolumeManager } from '@kubevol/core'
import { FILE_DISK_DRIVER, createBuiltinPlugins } from '@kubevol/core/plugins'
import { buildClaim, buildPod, createMemoryObjectReader, createMemoryPodSource } from '@kubevol/core/testing'
import { expect, it } from 'vitest'
import { describeAsRoot } from '../test/as-root.js'
import { useLinuxHost } from '../test/harness.js'
import { parseMountInfo } from './mountinfo.js'

const MiB = 2 ** 20
async function until(check: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out')
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}
const mountTable = () => parseMountInfo(readFileSync('/proc/self/mountinfo', 'utf8'))

describeAsRoot('fileDisk refuses a handle that is not a regular file', () => {
  const h = useLinuxHost()

  it('a loop device mounted elsewhere, or a symlink to it, is refused and stays intact; an image file mounts', async () => {
    const { host, p } = h()
    const loops = host.loopDevices
    if (!loops) throw new Error('this machine has no /dev/loop-control')
    // Someone else's filesystem, on a loop device, mounted outside kubevol's root, with a canary.
    await host.writeFile(p('victim.img'), new Uint8Array(32 * MiB))
    const victim = await loops.attach(p('victim.img'))
    await host.filesystems.format(victim, 'ext4')
    await host.mkdir(p('elsewhere'))
    await host.mount({ source: victim, target: p('elsewhere'), fstype: 'ext4' })
    await host.writeFile(p('elsewhere', 'canary'), 'the owner wrote this')
    await host.symlink(victim, p('link-to-device'))
    await host.writeFile(p('good.img'), '')
    await host.truncate(p('good.img'), 32 * MiB)

    const root = p('kubevol')
    const objects = createMemoryObjectReader()
    const handles = { dev: victim, link: p('link-to-device'), good: p('good.img') }
    for (const [claim, handle] of Object.entries(handles)) {
      const { pvc, pv } = buildClaim({ claim, pv: `pv-${claim}`, pvSource: { csi: { driver: FILE_DISK_DRIVER, volumeHandle: handle, fsType: 'ext4' } } })
      objects.put('PersistentVolumeClaim', pvc)
      objects.put('PersistentVolume', pv)
    }
    const pods = createMemoryPodSource()
    const events: VolumeEvent[] = []
    const recorder = { event: (event: VolumeEvent) => events.push(event) }
    const manager = createVolumeManager({ host, plugins: createBuiltinPlugins(), podSource: pods, objects, nodeName: 'node-1', rootDir: root, controllerAttachDetach: false, recorder })
    const stop = new AbortController()
    const running = manager.run(stop.signal)
    try {
      const podOf = (claim: string) => buildPod({ name: claim, uid: `uid-${claim}`, volumes: [{ name: 'data', persistentVolumeClaim: { claimName: claim } }] })
      for (const claim of Object.keys(handles)) pods.setPod(podOf(claim))

      await manager.waitForAttachAndMount(podOf('good'), { timeoutMs: 30_000 })
      await host.writeFile(`${root}/pods/uid-good/volumes/kubevol.io~file-disk/pv-good/ok`, 'yes')
      const warnings = (uid: string) => events.filter((e) => e.type === 'Warning' && e.target.metadata.uid === uid).map((e) => e.message)
      await until(() => warnings('uid-dev').length > 0 && warnings('uid-link').length > 0)
      for (const [claim, what] of [['dev', `volumeHandle ${victim} is a block device, not a regular file`], ['link', `volumeHandle ${handles.link} is a symlink, not a regular file`]] as const) {
        await expect(manager.waitForAttachAndMount(podOf(claim), { timeoutMs: 500 })).rejects.toThrow(/unattached volumes=\[data\]/)
        expect(warnings(`uid-${claim}`).join('\n')).toContain(what)
      }

      // Nothing was attached over the device and its filesystem is mounted once, where its owner put it.
      const victimDev = execFileSync('lsblk', ['-dno', 'MAJ:MIN', victim], { encoding: 'utf8' }).trim()
      expect(mountTable().filter((m) => m.device === victimDev).map((m) => m.target)).toEqual([p('elsewhere')])
      expect(execFileSync('losetup', ['-j', victim], { encoding: 'utf8' }).trim()).toBe('')
      expect(mountTable().filter((m) => m.target.startsWith(`${root}/`) && m.target.includes('pv-dev'))).toEqual([])
    } finally {
      stop.abort()
      await running
    }
    await host.unmount(p('elsewhere'))
    const fsck = spawnSync('e2fsck', ['-fn', victim], { encoding: 'utf8' })
    expect(fsck.status, fsck.stdout + fsck.stderr).toBe(0)
    await host.mount({ source: victim, target: p('elsewhere'), fstype: 'ext4', readOnly: true })
    expect(readFileSync(p('elsewhere', 'canary'), 'utf8')).toBe('the owner wrote this')
    await host.unmount(p('elsewhere'))
    await loops.detach(victim)
    // The good pod's mounts are left for the harness: unmount them so its loop device goes too.
    for (const m of mountTable().filter((e) => e.target.startsWith(`${root}/`)).reverse()) await host.unmount(m.target, { lazy: true })
    for (const device of await loops.find(p('good.img'))) await loops.detach(device)
  })

  it('an image file someone else attached, mounted elsewhere or not, is refused and left alone; once freed it mounts', async () => {
    const { host, p } = h()
    // Someone else's images, outside kubevol's root: one attached and mounted (with a canary), one only attached.
    for (const name of ['busy', 'idle']) {
      await host.writeFile(p(`${name}.img`), '')
      await host.truncate(p(`${name}.img`), 32 * MiB)
    }
    execFileSync('mkfs.ext4', ['-q', '-F', p('busy.img')])
    const busy = execFileSync('losetup', ['-f', '--show', p('busy.img')], { encoding: 'utf8' }).trim()
    const idle = execFileSync('losetup', ['-f', '--show', p('idle.img')], { encoding: 'utf8' }).trim()
    await host.mkdir(p('owner'))
    execFileSync('mount', ['-t', 'ext4', busy, p('owner')])
    await host.writeFile(p('owner', 'canary'), 'the owner wrote this')
    const attachedTo = (image: string) => execFileSync('losetup', ['-nO', 'NAME', '-j', image], { encoding: 'utf8' }).trim()

    const root = p('kubevol')
    const objects = createMemoryObjectReader()
    for (const claim of ['busy', 'idle']) {
      const { pvc, pv } = buildClaim({ claim, pv: `pv-${claim}`, pvSource: { csi: { driver: FILE_DISK_DRIVER, volumeHandle: p(`${claim}.img`), fsType: 'ext4' } } })
      objects.put('PersistentVolumeClaim', pvc)
      objects.put('PersistentVolume', pv)
    }
    const pods = createMemoryPodSource()
    const events: VolumeEvent[] = []
    const recorder = { event: (event: VolumeEvent) => events.push(event) }
    const manager = createVolumeManager({ host, plugins: createBuiltinPlugins(), podSource: pods, objects, nodeName: 'node-1', rootDir: root, controllerAttachDetach: false, recorder })
    const stop = new AbortController()
    const running = manager.run(stop.signal)
    const busyDev = execFileSync('lsblk', ['-dno', 'MAJ:MIN', busy], { encoding: 'utf8' }).trim()
    try {
      const podOf = (claim: string) => buildPod({ name: claim, uid: `uid-${claim}`, volumes: [{ name: 'data', persistentVolumeClaim: { claimName: claim } }] })
      pods.setPod(podOf('busy'))
      pods.setPod(podOf('idle'))
      const warnings = (uid: string) => events.filter((e) => e.type === 'Warning' && e.target.metadata.uid === uid).map((e) => e.message).join('\n')
      await until(() => warnings('uid-busy') !== '' && warnings('uid-idle') !== '')
      expect(warnings('uid-busy')).toContain(`${FILE_DISK_DRIVER} volumeHandle ${p('busy.img')} is in use: attached as ${busy} and mounted at ${p('owner')}`)
      expect(warnings('uid-idle')).toContain(`${FILE_DISK_DRIVER} volumeHandle ${p('idle.img')} is in use: attached as ${idle} by someone else`)
      // Nothing attached besides the owners' devices, the busy filesystem mounted only by its owner, nothing under the root.
      expect(attachedTo(p('busy.img'))).toBe(busy)
      expect(attachedTo(p('idle.img'))).toBe(idle)
      expect(mountTable().filter((m) => m.device === busyDev).map((m) => m.target)).toEqual([p('owner')])
      expect(mountTable().filter((m) => m.target.startsWith(`${root}/`))).toEqual([])

      // The refusal is not for good: once its owner lets the idle image go, a retry attaches and mounts it.
      execFileSync('losetup', ['-d', idle])
      await manager.waitForAttachAndMount(podOf('idle'), { timeoutMs: 30_000 })
      const [ours] = await host.loopDevices?.find(p('idle.img')) ?? []
      expect(mountTable().filter((m) => m.source === ours).map((m) => m.target)).toEqual([
        `${root}/plugins/kubevol.io/file-disk/mounts/pv-idle`,
        `${root}/pods/uid-idle/volumes/kubevol.io~file-disk/pv-idle`,
      ])

      // Deleting the pods takes kubevol's mounts and its loop device away, and leaves the owner's as they were.
      pods.deletePod('uid-busy')
      pods.deletePod('uid-idle')
      await manager.waitForUnmount(podOf('idle'), { timeoutMs: 30_000 })
      await until(() => attachedTo(p('idle.img')) === '')
      expect(mountTable().filter((m) => m.target.startsWith(`${root}/`))).toEqual([])
      expect(attachedTo(p('busy.img'))).toBe(busy)
    } finally {
      stop.abort()
      await running
    }
    await host.writeFile(p('owner', 'more'), 'written after kubevol looked')
    execFileSync('umount', [p('owner')])
    const fsck = spawnSync('e2fsck', ['-fn', busy], { encoding: 'utf8' })
    expect(fsck.status, fsck.stdout + fsck.stderr).toBe(0)
    execFileSync('mount', ['-t', 'ext4', '-o', 'ro', busy, p('owner')])
    expect(readFileSync(p('owner', 'canary'), 'utf8')).toBe('the owner wrote this')
    execFileSync('umount', [p('owner')])
    execFileSync('losetup', ['-d', busy])
  })
})
