/**
 * A fileDisk volume whose handle is not a disk image file (issue: a block device mounted elsewhere
 * was attached again, checked and mounted a second time, and both ext4 mounts corrupted it). The
 * whole manager with the built-in plugins on the real kernel: a device handle and a symlink to the
 * device are refused with a clear error and the filesystem is left as it was; a regular file works.
 */
import { execFileSync, spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { FILE_DISK_DRIVER, type VolumeEvent, createBuiltinPlugins, createVolumeManager } from '@kubevol/core'
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
})
