/**
 * fileDisk when its CSIDriver object says `attachRequired: false`, on the real kernel: no attach
 * step; the mount device step attaches the image to a loop device (block mode: the device set-up
 * step), and undoing that step detaches it, once, leaving no loop device behind. Filesystem and
 * block volumes, each shared by two pods.
 */
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { type OperationRecord, createVolumeManager } from '@kubevol/core'
import { FILE_DISK_DRIVER, createBuiltinPlugins } from '@kubevol/core/plugins'
import { buildClaim, buildPod, createMemoryObjectReader, createMemoryPodSource } from '@kubevol/core/testing'
import { expect, it } from 'vitest'
import { describeAsRoot } from '../test/as-root.js'
import { useLinuxHost } from '../test/harness.js'
import { parseMountInfo } from './mountinfo.js'

const MiB = 2 ** 20
async function until(check: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out')
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}
const mountTable = () => parseMountInfo(readFileSync('/proc/self/mountinfo', 'utf8'))
/** Every loop device backed by `file`, as the kernel lists them. */
const kernelLoops = (file: string) =>
  execFileSync('losetup', ['-j', file], { encoding: 'utf8' })
    .split('\n')
    .filter(Boolean)
    .map((line) => line.split(':')[0])

describeAsRoot('fileDisk with attachRequired: false on the real kernel', () => {
  const h = useLinuxHost()

  it.each(['Filesystem', 'Block'] as const)('%s: the device step attaches the loop device and its undoing releases it', async (mode) => {
    const { host, p } = h()
    const image = p('disk.img')
    await host.writeFile(image, '')
    await host.truncate(image, 32 * MiB)
    const root = p('kubevol')
    const objects = createMemoryObjectReader()
    const { pvc, pv } = buildClaim({ claim: 'disk', pv: 'pv-disk', volumeMode: mode, pvSource: { csi: { driver: FILE_DISK_DRIVER, volumeHandle: image, fsType: 'ext4' } } })
    objects.put('PersistentVolumeClaim', pvc)
    objects.put('PersistentVolume', pv)
    objects.put('CSIDriver', { metadata: { name: FILE_DISK_DRIVER }, spec: { attachRequired: false } })
    const pods = createMemoryPodSource()
    const manager = createVolumeManager({ host, plugins: createBuiltinPlugins(), podSource: pods, objects, nodeName: 'node-1', rootDir: root, controllerAttachDetach: false })
    const operations: OperationRecord[] = []
    manager.subscribe((e) => {
      if (e.type === 'operation' && e.operation.endedAt !== undefined && !e.operation.error) operations.push(e.operation)
    })
    const stop = new AbortController()
    const running = manager.run(stop.signal)
    const podOf = (uid: string) =>
      buildPod({ name: uid, uid, volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'disk' } }], ...(mode === 'Block' ? { devices: ['data'] } : {}) })
    try {
      for (const uid of ['a', 'b']) {
        pods.setPod(podOf(uid))
        await manager.waitForAttachAndMount(podOf(uid), { timeoutMs: 30_000 })
      }
      const [loop, ...more] = kernelLoops(image)
      expect(more).toEqual([])
      expect(loop).toMatch(/^\/dev\/loop\d+$/)
      if (mode === 'Block') {
        expect(await host.readlink(`${root}/pods/a/volumeDevices/kubevol.io~file-disk/pv-disk`)).toBe(loop)
      } else {
        const device = execFileSync('lsblk', ['-dno', 'MAJ:MIN', loop as string], { encoding: 'utf8' }).trim()
        expect(mountTable().filter((m) => m.device === device).map((m) => m.target.slice(root.length + 1)).sort()).toEqual([
          'plugins/kubevol.io/file-disk/mounts/pv-disk',
          'pods/a/volumes/kubevol.io~file-disk/pv-disk',
          'pods/b/volumes/kubevol.io~file-disk/pv-disk',
        ])
      }
      expect(operations.map((o) => o.name)).not.toContain('volume_attach')

      pods.deletePod('a')
      pods.deletePod('b')
      await until(async () => kernelLoops(image).length === 0 && !manager.hasPossiblyMountedVolumesForPod('b'))
      await manager.waitForIdle()
      const device = mode === 'Block' ? ['unmap_volume', 'unmap_device'] : ['volume_unmount', 'unmount_device']
      expect(operations.filter((o) => device.includes(o.name)).map((o) => o.name)).toEqual([device[0], device[0], device[1]])
      expect(operations.map((o) => o.name)).not.toContain('volume_detach')
      expect(mountTable().filter((m) => m.target.startsWith(`${root}/`))).toEqual([])
      expect(await host.readdir(`${root}/plugins/kubevol.io/file-disk/staged`)).toEqual([])
    } finally {
      stop.abort()
      await running
      for (const m of mountTable().filter((e) => e.target.startsWith(`${root}/`)).reverse()) await host.unmount(m.target, { lazy: true })
      for (const device of kernelLoops(image)) execFileSync('losetup', ['-d', device as string])
    }
  })
})
