/**
 * The whole volume manager with the built-in plugins on the real kernel: one pod with a volume of
 * every type that runs here, checked against the kernel's own mount table, then torn down, then a
 * restart through the journal with nothing leaked.
 */
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { type Pod, createVolumeManager } from '@kubevol/core'
import { FILE_DISK_DRIVER, createBuiltinPlugins } from '@kubevol/core/plugins'
import { buildClaim, buildPod, createMemoryObjectReader, createMemoryPodSource } from '@kubevol/core/testing'
import { expect, it } from 'vitest'
import { describeAsRoot } from '../test/as-root.js'
import { useLinuxHost } from '../test/harness.js'
import { parseMountInfo } from './mountinfo.js'

const kernelMounts = (prefix: string) =>
  parseMountInfo(readFileSync('/proc/self/mountinfo', 'utf8'))
    .map((e) => e.target)
    .filter((t) => t.startsWith(prefix))

describeAsRoot('the volume manager on the Linux host', () => {
  const h = useLinuxHost()

  it('mounts a pod with every volume type, serves a subPath, and tears it all down; a restart finds nothing left', async () => {
    const { host, p } = h()
    const root = p('kubevol')
    const image = p('images/data.img')
    const raw = p('images/raw.img')
    await host.mkdir(p('images'), { recursive: true })
    await host.writeFile(image, '')
    await host.truncate(image, 64 << 20)
    await host.writeFile(raw, '')
    await host.truncate(raw, 8 << 20)
    await host.mkdir(p('shared/logs'), { recursive: true })
    await host.writeFile(p('shared/hello'), 'host data')

    const objects = createMemoryObjectReader()
    objects.put('ConfigMap', { metadata: { name: 'cfg', namespace: 'default' }, data: { mode: 'fast' } })
    objects.put('Secret', { metadata: { name: 'creds', namespace: 'default' }, data: { key: Buffer.from('s3cr3t').toString('base64') } })
    for (const [claim, handle, volumeMode] of [['data', image, 'Filesystem'], ['raw', raw, 'Block']] as const) {
      const { pvc, pv } = buildClaim({ claim, pv: `pv-${claim}`, volumeMode, pvSource: { csi: { driver: FILE_DISK_DRIVER, volumeHandle: handle, fsType: 'ext4' } } })
      objects.put('PersistentVolumeClaim', pvc)
      objects.put('PersistentVolume', pv)
    }
    const base = buildPod({
      uid: 'e2e',
      volumes: [
        { name: 'shm', emptyDir: { medium: 'Memory', sizeLimit: '16Mi' } },
        { name: 'scratch', emptyDir: {} },
        { name: 'host', hostPath: { path: p('shared'), type: 'Directory' } },
        { name: 'cfg', configMap: { name: 'cfg' } },
        { name: 'secret', secret: { secretName: 'creds' } },
        { name: 'data', persistentVolumeClaim: { claimName: 'data' } },
        { name: 'raw', persistentVolumeClaim: { claimName: 'raw' } },
      ],
      devices: ['raw'],
    })
    const main = base.spec?.containers?.[0]
    const pod: Pod = {
      ...base,
      spec: {
        ...base.spec,
        containers: [{ ...main, name: 'main', volumeMounts: [...(main?.volumeMounts ?? []), { name: 'host', mountPath: '/logs', subPath: 'logs' }] }],
      },
    }
    const pods = createMemoryPodSource()
    const options = { host, plugins: createBuiltinPlugins(), podSource: pods, objects, nodeName: 'node-1', rootDir: root, controllerAttachDetach: false }
    let manager = createVolumeManager(options)
    let stop = new AbortController()
    let running = manager.run(stop.signal)
    pods.setPod(pod)
    await manager.waitForAttachAndMount(pod, { timeoutMs: 30_000 })

    const mounts = kernelMounts(root)
    const vol = (plugin: string, name: string) => `${root}/pods/e2e/volumes/${plugin}/${name}`
    for (const target of [
      vol('kubernetes.io~empty-dir', 'shm'),
      vol('kubernetes.io~secret', 'secret'),
      vol('kubevol.io~file-disk', 'pv-data'),
      `${root}/plugins/kubevol.io/file-disk/mounts/pv-data`,
      `${root}/plugins/kubevol.io/file-disk/volumeDevices/pv-raw/e2e`,
      `${root}/pods/e2e/volume-subpaths/host/main/6`,
    ]) {
      expect(mounts).toContain(target)
    }
    expect(readFileSync(`${vol('kubernetes.io~configmap', 'cfg')}/mode`, 'utf8')).toBe('fast')
    expect(readFileSync(`${vol('kubernetes.io~secret', 'secret')}/key`, 'utf8')).toBe('s3cr3t')
    const [loop] = await host.loopDevices?.find(image) ?? []
    expect(execFileSync('blkid', ['-o', 'value', '-s', 'TYPE', loop as string], { encoding: 'utf8' }).trim()).toBe('ext4')
    expect(await host.readlink(`${root}/pods/e2e/volumeDevices/kubevol.io~file-disk/pv-raw`)).toMatch(/^\/dev\/loop\d+$/)
    await host.writeFile(`${vol('kubevol.io~file-disk', 'pv-data')}/db`, 'rows')

    // Stop with everything mounted, start again: the journal and the disk give it all back.
    stop.abort()
    await running
    manager = createVolumeManager(options)
    stop = new AbortController()
    running = manager.run(stop.signal)
    await manager.waitForAttachAndMount(pod, { timeoutMs: 30_000 })
    expect(kernelMounts(root).sort()).toEqual(mounts.sort())

    pods.deletePod('e2e')
    await manager.waitForUnmount(pod, { timeoutMs: 30_000 })
    const deadline = Date.now() + 20_000
    while ((kernelMounts(root).length > 0 || ((await host.loopDevices?.find(image)) ?? []).length > 0) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50))
    }
    expect(kernelMounts(root)).toEqual([])
    expect(await host.loopDevices?.find(image)).toEqual([])
    expect(await host.loopDevices?.find(raw)).toEqual([])
    expect(readFileSync(p('shared/hello'), 'utf8')).toBe('host data')
    stop.abort()
    await running
  })
})
