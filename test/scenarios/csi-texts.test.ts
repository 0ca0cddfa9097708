/**
 * CSI failures worded as kubelet 1.32's pkg/volume/csi words them: its messages start with
 * `kubernetes.io/csi: <step>`, and a driver's gRPC error is passed on as the driver said it.
 */
import { createMemoryHost } from '@kubevol/adapter-mock'
import type { Pod } from '@kubevol/core'
import { createBuiltinPlugins } from '@kubevol/core/plugins'
import { buildClaim, buildPod, createFakeClock, createHarness } from '@kubevol/core/testing'
import { afterEach, describe, expect, it } from 'vitest'
import { createCsiDriverRegistry, createCsiPlugin, csiError } from '../../packages/core/src/plugins/csi/index.js'
import { createMemoryCsiDriver } from '../../packages/core/src/testing/csi/index.js'

const DRIVER = 'memory.csi.kubevol.io'
const NOT_REGISTERED = `driver name ${DRIVER} not found in the list of registered CSI drivers`

let running: { stop(): Promise<void> }[] = []
afterEach(async () => {
  for (const h of running) await h.stop()
  running = []
})

async function start(options: { registered: boolean; block?: boolean }) {
  const clock = createFakeClock()
  const host = createMemoryHost({ clock })
  const driver = createMemoryCsiDriver({ host, name: DRIVER })
  const registry = createCsiDriverRegistry()
  if (options.registered) registry.register({ name: DRIVER, driver })
  const plugin = createCsiPlugin({ drivers: registry })
  const h = createHarness({ host, clock, plugins: [...createBuiltinPlugins(), plugin] })
  h.objects.put('CSIDriver', { metadata: { name: DRIVER }, spec: { attachRequired: false, volumeLifecycleModes: ['Persistent', 'Ephemeral'] } })
  const { pvc, pv } = buildClaim({ claim: 'data', pv: 'pv-data', volumeMode: options.block ? 'Block' : 'Filesystem', pvSource: { csi: { driver: DRIVER, volumeHandle: 'vol-1', fsType: 'ext4' } } })
  h.objects.put('PersistentVolumeClaim', pvc)
  h.objects.put('PersistentVolume', pv)
  await plugin.syncDriverObjects()
  h.start()
  running.push(h)
  return { h, driver }
}

const claimPod = (uid: string, block = false): Pod =>
  buildPod({ uid, volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'data' } }], ...(block ? { devices: ['data'] } : {}) })
const inlinePod = (uid: string): Pod => buildPod({ uid, volumes: [{ name: 'scratch', csi: { driver: DRIVER } }] })

describe('CSI failure texts', () => {
  it.each([
    ['a persistent volume: attacher.MountDevice', claimPod('a'), 'FailedMount', `MountVolume.MountDevice failed for volume "pv-data" : kubernetes.io/csi: attacher.MountDevice failed to create newCsiDriverClient: ${NOT_REGISTERED}`],
    ['an inline volume: mounter.SetUpAt', inlinePod('a'), 'FailedMount', `MountVolume.SetUp failed for volume "scratch" : kubernetes.io/csi: mounter.SetUpAt failed to get CSI client: ${NOT_REGISTERED}`],
    ['a block volume: blockMapper.SetUpDevice', claimPod('a', true), 'FailedMapVolume', `MapVolume.SetUpDevice failed for volume "pv-data" : kubernetes.io/csi: blockMapper.SetUpDevice failed to get CSI client: ${NOT_REGISTERED}`],
  ])('a driver not registered, %s', async (_name, pod, reason, message) => {
    const { h } = await start({ registered: false, block: reason === 'FailedMapVolume' })
    h.pods.setPod(pod)
    await h.advanceUntil(() => h.events.some((e) => e.reason === reason))
    expect(h.events.find((e) => e.reason === reason)?.message).toBe(message)
  })

  it.each([
    ['NodeUnpublishVolume', 'volume_unmount', 'kubernetes.io/csi: Unmounter.TearDownAt failed: rpc error: code = Internal desc = target busy'],
    ['NodeUnstageVolume', 'unmount_device', 'kubernetes.io/csi: attacher.UnmountDevice failed: rpc error: code = Internal desc = target busy'],
  ])('a driver failing %s: the tear-down step prefixes its gRPC error', async (method, operation, text) => {
    const { h, driver } = await start({ registered: true })
    await h.addPodAndWait(claimPod('a'))
    driver.intercept(async (call, next) => (call.method === method ? Promise.reject(csiError('Internal', 'target busy')) : next()))
    h.pods.deletePod('a')
    await h.advanceUntil(() => h.operations.some((o) => o.name === operation && o.error !== undefined))
    expect(h.operations.find((o) => o.name === operation && o.error !== undefined)?.error).toContain(text)
  })

  it('a gRPC error that leaves the call uncertain keeps the driver’s text', async () => {
    const { h, driver } = await start({ registered: true })
    driver.intercept(async (call, next) => (call.method === 'NodeStageVolume' ? Promise.reject(csiError('DeadlineExceeded', 'context deadline exceeded')) : next()))
    h.pods.setPod(claimPod('a'))
    await h.advanceUntil(() => h.events.some((e) => e.reason === 'FailedMount'))
    expect(h.events.find((e) => e.reason === 'FailedMount')?.message).toBe(
      'MountVolume.MountDevice failed for volume "pv-data" : rpc error: code = DeadlineExceeded desc = context deadline exceeded',
    )
  })
})
