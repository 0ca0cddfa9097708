/**
 * Local PVs on the real kernel, as the kubelet's local plugin has them (SPEC §7.5): two pods share
 * one PV; a directory is bound into each pod where it is, a device (a loop device here) is formatted
 * once, mounted once at plugins/kubernetes.io/local-volume/mounts/<pv> and bound into each pod; the
 * global mount goes only after the last pod, and the node's data stays.
 */
import { execFileSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { createVolumeManager, type VolumeManager } from '@kubevol/core'
import { createBuiltinPlugins } from '@kubevol/core/plugins'
import { buildClaim, buildPod, createMemoryObjectReader, createMemoryPodSource } from '@kubevol/core/testing'
import { expect, it } from 'vitest'
import { describeAsRoot } from '../test/as-root.js'
import { useLinuxHost } from '../test/harness.js'
import { parseMountInfo } from './mountinfo.js'

const kernelMounts = (prefix: string) =>
  parseMountInfo(readFileSync('/proc/self/mountinfo', 'utf8'))
    .map((e) => e.target)
    .filter((t) => t.startsWith(prefix))
    .map((t) => t.slice(prefix.length + 1))
    .sort()

async function until(what: string, check: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 20_000
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

describeAsRoot('local PVs on the Linux host', () => {
  const h = useLinuxHost()
  const pod = (uid: string) => buildPod({ uid, volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'local' } }] })
  const bind = (uid: string) => `pods/${uid}/volumes/kubernetes.io~local-volume/pv-local`

  async function run(local: { path: string; fsType?: string }, check: (manager: VolumeManager, root: string) => Promise<void>) {
    const { host, p } = h()
    const root = p('kubevol')
    const objects = createMemoryObjectReader()
    const { pvc, pv } = buildClaim({ claim: 'local', pv: 'pv-local', pvSource: { local } })
    objects.put('PersistentVolumeClaim', pvc)
    objects.put('PersistentVolume', pv)
    const pods = createMemoryPodSource()
    const manager = createVolumeManager({ host, plugins: createBuiltinPlugins(), podSource: pods, objects, nodeName: 'node-1', rootDir: root })
    const stop = new AbortController()
    const running = manager.run(stop.signal)
    try {
      for (const uid of ['a', 'b']) {
        pods.setPod(pod(uid))
        await manager.waitForAttachAndMount(pod(uid), { timeoutMs: 30_000 })
      }
      expect([...new Set(manager.snapshot().desired.map((v) => v.volumeName))]).toEqual(['kubernetes.io/local-volume/pv-local'])
      writeFileSync(`${root}/${bind('a')}/shared`, 'from a')
      expect(readFileSync(`${root}/${bind('b')}/shared`, 'utf8')).toBe('from a')
      pods.deletePod('a')
      await manager.waitForUnmount(pod('a'), { timeoutMs: 30_000 })
      await until('pod a unmounted', () => !kernelMounts(root).includes(bind('a')))
      await check(manager, root)
      pods.deletePod('b')
      await until('every mount gone', () => kernelMounts(root).length === 0 && manager.actualState.getAttachedVolumes().length === 0)
    } finally {
      stop.abort()
      await running
    }
  }

  it('a directory: each pod binds it where it is, nothing else is mounted, the data stays', async () => {
    const { host, p } = h()
    const dir = p('disks/ssd0')
    await host.mkdir(dir, { recursive: true })
    await host.writeFile(`${dir}/kept`, 'node data')
    await run({ path: dir }, async (_manager, root) => {
      expect(kernelMounts(root)).toEqual([bind('b')])
    })
    expect(readFileSync(`${dir}/kept`, 'utf8')).toBe('node data')
    expect(readFileSync(`${dir}/shared`, 'utf8')).toBe('from a')
  })

  it('a device: formatted once, mounted once globally, released only after the last pod', async () => {
    const { host, p } = h()
    const image = p('images/local.img')
    await host.mkdir(p('images'), { recursive: true })
    await host.writeFile(image, '')
    await host.truncate(image, 64 << 20)
    const loop = await host.loopDevices?.attach(image)
    expect(loop).toMatch(/^\/dev\/loop\d+$/)
    try {
      await run({ path: loop as string, fsType: 'ext4' }, async (manager, root) => {
        // Pod b still uses the device: its global mount stays.
        expect(kernelMounts(root)).toEqual(['plugins/kubernetes.io/local-volume/mounts/pv-local', bind('b')])
        expect(manager.actualState.getAttachedVolumes().map((v) => v.deviceMountState)).toEqual(['mounted'])
      })
      expect(execFileSync('blkid', ['-o', 'value', '-s', 'TYPE', loop as string], { encoding: 'utf8' }).trim()).toBe('ext4')
    } finally {
      await host.loopDevices?.detach(loop as string)
    }
  })
})
