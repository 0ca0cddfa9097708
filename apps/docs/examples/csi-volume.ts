// CSI: the kubernetes.io/csi plugin speaks to a registered driver's node service. Here the driver is
// the in-memory one from @kubevol/core/testing; on a node it is a gRPC client on the driver's socket.
import { createMemoryHost } from '@kubevol/adapter-mock'
import { createMemoryObjectReader, createMemoryPodSource, createVolumeManager } from '@kubevol/core'
import { createCsiDriverRegistry, createCsiPlugin } from '@kubevol/core/plugins'
import { buildPod, createMemoryCsiDriver } from '@kubevol/core/testing'

export async function run() {
  const host = createMemoryHost()
  const driver = createMemoryCsiDriver({ host, name: 'hostpath.csi.example.com' })
  const drivers = createCsiDriverRegistry([{ name: driver.name, driver }])
  const objects = createMemoryObjectReader()
  // The CSIDriver object says the driver needs no attach; a PV and its claim name the volume.
  objects.put('CSIDriver', { metadata: { name: driver.name }, spec: { attachRequired: false } })
  objects.put('PersistentVolume', {
    metadata: { name: 'pv-data' },
    spec: { capacity: { storage: '1Gi' }, accessModes: ['ReadWriteOnce'], csi: { driver: driver.name, volumeHandle: 'vol-1' }, claimRef: { namespace: 'default', name: 'data' } },
  })
  objects.put('PersistentVolumeClaim', {
    metadata: { name: 'data', namespace: 'default' },
    spec: { volumeName: 'pv-data', accessModes: ['ReadWriteOnce'] },
    status: { phase: 'Bound', capacity: { storage: '1Gi' } },
  })

  const pods = createMemoryPodSource()
  const manager = createVolumeManager({ host, plugins: [createCsiPlugin({ drivers })], podSource: pods, objects, nodeName: 'node-1' })
  const stop = new AbortController()
  const running = manager.run(stop.signal)
  const pod = buildPod({ name: 'app', volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'data' } }] })
  pods.setPod(pod)
  await manager.waitForAttachAndMount(pod, { timeoutMs: 5_000 })
  const mountCalls = driver.calls.map((c) => c.method)

  pods.deletePod(pod.metadata.uid!)
  await manager.waitForUnmount(pod, { timeoutMs: 5_000 })
  await manager.waitForIdle()
  stop.abort()
  await running
  const calls = driver.calls.map((c) => c.method)
  const lines = ['driver calls while the pod starts:', ...mountCalls.map((m) => `  ${m}`), 'and after it is deleted:', ...calls.slice(mountCalls.length).map((m) => `  ${m}`)]
  return { lines, calls }
}
