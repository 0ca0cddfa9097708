/**
 * A container's mounts from the manager's mounted volumes: every host path `containerMounts` gives
 * is what the manager set up (a volume directory, a subPath bind, the pod's device link), for the
 * volume types a runtime meets.
 */
import { type Pod, containerMounts, ociMounts } from '@kubevol/core'
import { FILE_DISK_DRIVER, createBuiltinPlugins } from '@kubevol/core/plugins'
import { buildClaim } from '@kubevol/core/testing'
import { afterEach, describe, expect, it } from 'vitest'
import { scenario } from './setup.js'

const ROOT = '/var/lib/kubevol'
let current: ReturnType<typeof scenario> | undefined
afterEach(async () => {
  await current?.stop()
  current?.host.assertNoViolations()
  current = undefined
})

function start() {
  current = scenario({ plugins: createBuiltinPlugins() })
  current.start()
  const h = current
  h.objects.put('ConfigMap', { metadata: { namespace: 'default', name: 'settings' }, data: { 'app.conf': 'v1' } })
  const image = '/var/lib/images/raw.img'
  h.host.allocateFile(image, 16 << 20)
  const { pvc, pv } = buildClaim({ claim: 'raw', pv: 'pv-raw', volumeMode: 'Block', pvSource: { csi: { driver: FILE_DISK_DRIVER, volumeHandle: image } } })
  h.objects.put('PersistentVolumeClaim', pvc)
  h.objects.put('PersistentVolume', pv)
  return h
}

const pod: Pod = {
  metadata: { namespace: 'default', name: 'web', uid: 'a' },
  spec: {
    nodeName: 'node-1',
    volumes: [
      { name: 'cache', emptyDir: {} },
      { name: 'config', configMap: { name: 'settings' } },
      { name: 'raw', persistentVolumeClaim: { claimName: 'raw' } },
    ],
    initContainers: [{ name: 'init', volumeMounts: [{ name: 'cache', mountPath: '/cache' }] }],
    containers: [
      {
        name: 'app',
        volumeMounts: [
          { name: 'cache', mountPath: '/cache' },
          { name: 'config', mountPath: '/etc/app.conf', subPath: 'app.conf' },
          { name: 'config', mountPath: '/etc/config' },
        ],
        volumeDevices: [{ name: 'raw', devicePath: '/dev/xvda' }],
      },
      { name: 'sidecar', volumeMounts: [{ name: 'cache', mountPath: '/shared', readOnly: true }] },
    ],
  },
}

describe('containerMounts from a running manager', () => {
  it('gives each container the volume directories, the subPath bind and the device link the manager made', async () => {
    const h = start()
    await h.addPodAndWait(pod)
    const volumes = h.manager.getMountedVolumesForPod(pod)
    const app = containerMounts(pod, 'app', volumes)
    expect(app.mounts.map((m) => [m.containerPath, m.hostPath, m.readonly])).toEqual([
      ['/cache', `${ROOT}/pods/a/volumes/kubernetes.io~empty-dir/cache`, false],
      ['/etc/app.conf', `${ROOT}/pods/a/volume-subpaths/config/app/1`, true],
      ['/etc/config', `${ROOT}/pods/a/volumes/kubernetes.io~configmap/config`, true],
    ])
    // The subPath bind is a mount of the key's file, made when the volume was mounted.
    const mounts = await h.host.mounts()
    expect(mounts.some((m) => m.target === `${ROOT}/pods/a/volume-subpaths/config/app/1`)).toBe(true)
    expect((await h.host.stat(`${ROOT}/pods/a/volumes/kubernetes.io~empty-dir/cache`))?.type).toBe('directory')
    const loop = await h.host.readlink(app.devices[0]?.hostPath as string)
    expect(app.devices).toEqual([{ containerPath: '/dev/xvda', hostPath: `${ROOT}/pods/a/volumeDevices/kubevol.io~file-disk/pv-raw`, permissions: 'mrw' }])
    expect(loop).toMatch(/^\/dev\/loop\d+$/)

    expect(containerMounts(pod, 'sidecar', volumes).mounts).toEqual([
      { name: 'cache', containerPath: '/shared', hostPath: `${ROOT}/pods/a/volumes/kubernetes.io~empty-dir/cache`, readonly: true, selinuxRelabel: true, propagation: 'PROPAGATION_PRIVATE', recursiveReadOnly: false },
    ])
    expect(ociMounts(containerMounts(pod, 'init', volumes).mounts)).toEqual([
      { destination: '/cache', type: 'bind', source: `${ROOT}/pods/a/volumes/kubernetes.io~empty-dir/cache`, options: ['rbind', 'rprivate', 'rw'] },
    ])
  })

  it("a claim's subPath is bound under the PV's name, as the kubelet names it (InnerVolumeSpecName)", async () => {
    const h = start()
    const image = '/var/lib/images/data.img'
    h.host.allocateFile(image, 64 << 20)
    const { pvc, pv } = buildClaim({ claim: 'data', pv: 'pv-data', pvSource: { csi: { driver: FILE_DISK_DRIVER, volumeHandle: image, fsType: 'ext4' } } })
    h.objects.put('PersistentVolumeClaim', pvc)
    h.objects.put('PersistentVolume', pv)
    const db: Pod = {
      metadata: { namespace: 'default', name: 'db', uid: 'b' },
      spec: {
        nodeName: 'node-1',
        volumes: [{ name: 'store', persistentVolumeClaim: { claimName: 'data' } }],
        containers: [{ name: 'db', volumeMounts: [{ name: 'store', mountPath: '/var/lib/db', subPath: 'db' }] }],
      },
    }
    await h.addPodAndWait(db)
    const [mount] = containerMounts(db, 'db', h.manager.getMountedVolumesForPod(db)).mounts
    expect(mount?.hostPath).toBe(`${ROOT}/pods/b/volume-subpaths/pv-data/db/0`)
    expect((await h.host.mounts()).some((m) => m.target === mount?.hostPath)).toBe(true)
  })

  it('refuses with the kubelet text while a volume is not mounted', async () => {
    const h = start()
    h.objects.delete('ConfigMap', 'default', 'settings')
    h.pods.setPod(pod)
    await h.advanceUntil(() => h.manager.getMountedVolumesForPod(pod).has('cache'))
    expect(() => containerMounts(pod, 'app', h.manager.getMountedVolumesForPod(pod))).toThrow('cannot find volume "config" to mount into container "app"')
    expect(containerMounts(pod, 'init', h.manager.getMountedVolumesForPod(pod)).mounts).toHaveLength(1)
  })
})
