import { createMemoryHost } from '@kubevol/adapter-mock'
import type { MetricLabels, Pod, Volume } from '@kubevol/core'
import { FILE_DISK_DRIVER, createBuiltinPlugins } from '@kubevol/core/plugins'
import { buildClaim, buildPod, createFakeClock, createHarness } from '@kubevol/core/testing'
import { describe, expect, it } from 'vitest'
import { realPath } from './setup.js'

describe('a pod with one volume of every type', () => {
  it('reaches mounted, refreshes what changes, and goes back to nothing', async () => {
    const clock = createFakeClock()
    const host = createMemoryHost({ clock })
    const observed: { name: string; labels: MetricLabels; seconds: number }[] = []
    const h = createHarness({
      host,
      clock,
      plugins: createBuiltinPlugins(),
      manager: {
        metrics: { inc() {}, observe: (name, labels, seconds) => observed.push({ name, labels, seconds }) },
        tokens: { getToken: async () => ({ token: 't', issuedAt: clock.now(), expiresAt: clock.now() + 3_600_000 }) },
      },
    })
    h.start()
    await host.mkdir('/srv/shared', { recursive: true })
    await host.mkdir('/mnt/disks/ssd0', { recursive: true })
    host.allocateFile('/var/lib/images/fs.img', 32 << 20)
    host.allocateFile('/var/lib/images/raw.img', 8 << 20)
    h.objects.put('ConfigMap', { metadata: { name: 'settings', namespace: 'default' }, data: { mode: 'fast' } })
    h.objects.put('Secret', { metadata: { name: 'creds', namespace: 'default' }, data: { key: 'czNjcjN0' } })
    const claims: [string, Record<string, unknown>, 'Block' | 'Filesystem'][] = [
      ['local', { local: { path: '/mnt/disks/ssd0' } }, 'Filesystem'],
      ['hostpath', { hostPath: { path: '/srv/shared' } }, 'Filesystem'],
      ['disk', { csi: { driver: FILE_DISK_DRIVER, volumeHandle: '/var/lib/images/fs.img', fsType: 'ext4' } }, 'Filesystem'],
      ['raw', { csi: { driver: FILE_DISK_DRIVER, volumeHandle: '/var/lib/images/raw.img' } }, 'Block'],
    ]
    for (const [claim, pvSource, volumeMode] of claims) {
      const { pvc, pv } = buildClaim({ claim, pv: `pv-${claim}`, pvSource, volumeMode })
      h.objects.put('PersistentVolumeClaim', pvc)
      h.objects.put('PersistentVolume', pv)
    }
    const volumes: Volume[] = [
      { name: 'scratch', emptyDir: {} },
      { name: 'shm', emptyDir: { medium: 'Memory' } },
      { name: 'host', hostPath: { path: '/srv/shared', type: 'Directory' } },
      { name: 'config', configMap: { name: 'settings' } },
      { name: 'secret', secret: { secretName: 'creds' } },
      { name: 'info', downwardAPI: { items: [{ path: 'name', fieldRef: { fieldPath: 'metadata.name' } }] } },
      { name: 'all', projected: { sources: [{ serviceAccountToken: { path: 'token' } }, { configMap: { name: 'settings' } }] } },
      { name: 'local', persistentVolumeClaim: { claimName: 'local' } },
      { name: 'hostpath', persistentVolumeClaim: { claimName: 'hostpath' } },
      { name: 'disk', persistentVolumeClaim: { claimName: 'disk' } },
      { name: 'raw', persistentVolumeClaim: { claimName: 'raw' } },
    ]
    const pod: Pod = buildPod({ uid: 'every', name: 'every', volumes, devices: ['raw'] })
    await h.addPodAndWait(pod)
    expect([...h.manager.getMountedVolumesForPod('every').keys()].sort()).toEqual(volumes.map((v) => v.name).sort())
    const read = async (path: string) => new TextDecoder().decode(await host.readFile(await realPath(host, path)))
    const configDir = '/var/lib/kubevol/pods/every/volumes/kubernetes.io~configmap/config'
    expect(await read(`${configDir}/mode`)).toBe('fast')

    h.objects.put('ConfigMap', { metadata: { name: 'settings', namespace: 'default' }, data: { mode: 'safe' } })
    await h.clock.advance(10)
    expect(await read(`${configDir}/mode`)).toBe('safe')
    const refresh = observed.filter((o) => o.name === 'volume_operation_total_seconds' && o.labels.operation_name === 'overall_volume_remount')
    expect(refresh.map((o) => o.labels.plugin_name).sort()).toContain('kubernetes.io/configmap')

    h.pods.deletePod('every')
    await h.manager.waitForIdle()
    expect(h.manager.hasPossiblyMountedVolumesForPod('every')).toBe(false)
    expect(host.mountTargets()).toEqual([])
    expect(await host.loopDevices?.find('/var/lib/images/fs.img')).toEqual([])
    expect(host.exists('/srv/shared')).toBe(true)
    await h.stop()
    host.assertNoViolations()
  })
})
