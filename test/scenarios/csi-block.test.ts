/**
 * Raw block CSI volumes through the whole manager on the in-memory host, with the in-memory CSI
 * driver backing each volume with a loop device: NodeStage and NodePublish with the `block` access
 * type to the kubelet's volumeDevices paths, the published device linked into each pod, unmapping in
 * reverse, final and uncertain failures, and reconstruction after a restart with and without the
 * journal (from vol_data.json alone).
 */
import { createMemoryHost } from '@kubevol/adapter-mock'
import type { Pod, VolumeManagerOptions } from '@kubevol/core'
import { createBuiltinPlugins } from '@kubevol/core/plugins'
import { buildClaim, buildPod, createFakeClock, createHarness } from '@kubevol/core/testing'
import { afterEach, describe, expect, it } from 'vitest'
import { createCsiDriverRegistry, createCsiPlugin, type CsiNodeCapability, csiError } from '../../packages/core/src/plugins/csi/index.js'
import { createMemoryCsiDriver } from '../../packages/core/src/testing/csi/index.js'

const ROOT = '/var/lib/kubevol'
const DRIVER = 'memory.csi.kubevol.io'
const HANDLE = 'blk-0001'
const DEVICES = `${ROOT}/plugins/kubernetes.io/csi/volumeDevices`
const STAGING = `${DEVICES}/staging/pv-raw`
const PUBLISH = (uid: string) => `${DEVICES}/publish/pv-raw/${uid}`
const LINK = (uid: string) => `${ROOT}/pods/${uid}/volumeDevices/kubernetes.io~csi/pv-raw`
const IMAGE = `/var/lib/memory-csi/${HANDLE}.img`
const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes)

function world(capabilities?: readonly CsiNodeCapability[]) {
  const clock = createFakeClock()
  const host = createMemoryHost({ clock })
  const driver = createMemoryCsiDriver({ host, name: DRIVER, ...(capabilities ? { capabilities } : {}) })
  return { clock, host, driver }
}
type World = ReturnType<typeof world>

let running: { stop(): Promise<void> }[] = []
afterEach(async () => {
  for (const h of running) await h.stop()
  running = []
})

async function start(w: World, manager: Partial<VolumeManagerOptions> = {}) {
  const registry = createCsiDriverRegistry([{ name: DRIVER, driver: w.driver }])
  const plugin = createCsiPlugin({ drivers: registry })
  const h = createHarness({ host: w.host, clock: w.clock, plugins: [...createBuiltinPlugins(), plugin], manager })
  h.objects.put('CSIDriver', { metadata: { name: DRIVER }, spec: { attachRequired: false, podInfoOnMount: true } })
  const { pvc, pv } = buildClaim({ claim: 'raw', pv: 'pv-raw', volumeMode: 'Block', pvSource: { csi: { driver: DRIVER, volumeHandle: HANDLE, volumeAttributes: { tier: 'gold' } } } })
  h.objects.put('PersistentVolumeClaim', pvc)
  h.objects.put('PersistentVolume', pv)
  await plugin.syncDriverObjects()
  h.start()
  running.push(h)
  return h
}

const blockPod = (uid: string): Pod => buildPod({ uid, volumes: [{ name: 'raw', persistentVolumeClaim: { claimName: 'raw' } }], devices: ['raw'] })
const mounts = (w: World) => w.host.mountTargets().filter((t) => t.startsWith(ROOT)).sort()
const methods = (w: World) => w.driver.calls.map((c) => c.method).filter((m) => m.startsWith('Node') && m !== 'NodeGetCapabilities')

describe('CSI raw block volumes', () => {
  it('stages once and publishes per pod with the block access type, links the device into each pod, unstages after the last pod', async () => {
    const w = world()
    const h = await start(w)
    await h.addPodAndWait(blockPod('a'))
    await h.addPodAndWait(blockPod('b'))
    const [loop] = (await w.host.loopDevices?.find(IMAGE)) ?? []
    expect(loop).toMatch(/^\/dev\/loop\d+$/)
    const stage = w.driver.calls.find((c) => c.method === 'NodeStageVolume')?.request
    expect(stage).toMatchObject({ volumeId: HANDLE, stagingTargetPath: STAGING, volumeCapability: { block: {}, accessMode: 'SINGLE_NODE_WRITER' }, volumeContext: { tier: 'gold' } })
    expect(stage?.volumeCapability).not.toHaveProperty('mount')
    const publish = w.driver.calls.find((c) => c.method === 'NodePublishVolume')?.request
    expect(publish).toMatchObject({ volumeId: HANDLE, stagingTargetPath: STAGING, targetPath: PUBLISH('a'), volumeCapability: { block: {} }, readonly: false })
    expect(publish?.volumeContext).toMatchObject({ tier: 'gold', 'csi.storage.k8s.io/pod.uid': 'a', 'csi.storage.k8s.io/ephemeral': 'false' })
    expect(await w.host.readlink(LINK('a'))).toBe(PUBLISH('a'))
    expect(await w.host.readlink(LINK('b'))).toBe(PUBLISH('b'))
    expect(mounts(w)).toEqual([`${DEVICES}/pv-raw/dev/a`, `${DEVICES}/pv-raw/dev/b`, PUBLISH('a'), PUBLISH('b')].sort())
    expect(JSON.parse(text(await w.host.readFile(`${DEVICES}/pv-raw/data/vol_data.json`)))).toEqual({
      specVolID: 'pv-raw',
      volumeHandle: HANDLE,
      driverName: DRIVER,
      nodeName: 'node-1',
      attachmentID: '',
    })

    h.pods.deletePod('a')
    await h.manager.waitForIdle()
    expect(mounts(w)).toEqual([`${DEVICES}/pv-raw/dev/b`, PUBLISH('b')].sort())
    expect(w.host.exists(LINK('a'))).toBe(false)
    h.pods.deletePod('b')
    await h.manager.waitForIdle()
    expect(mounts(w)).toEqual([])
    expect(methods(w)).toEqual(['NodeStageVolume', 'NodePublishVolume', 'NodePublishVolume', 'NodeUnpublishVolume', 'NodeUnpublishVolume', 'NodeUnstageVolume'])
    expect(await w.host.loopDevices?.find(IMAGE)).toEqual([])
    for (const gone of [STAGING, `${DEVICES}/publish/pv-raw`, `${DEVICES}/pv-raw`]) expect(w.host.exists(gone)).toBe(false)
  })

  it('publishes without staging (and with an empty staging path) when the driver lacks STAGE_UNSTAGE_VOLUME', async () => {
    const w = world(['GET_VOLUME_STATS'])
    const h = await start(w)
    await h.addPodAndWait(blockPod('a'))
    expect(methods(w)).toEqual(['NodePublishVolume'])
    expect(w.driver.calls.find((c) => c.method === 'NodePublishVolume')?.request).toMatchObject({ stagingTargetPath: '', targetPath: PUBLISH('a'), volumeCapability: { block: {} } })
    expect(w.host.exists(STAGING)).toBe(false)
    h.pods.deletePod('a')
    await h.manager.waitForIdle()
    expect(methods(w)).toEqual(['NodePublishVolume', 'NodeUnpublishVolume'])
    expect(mounts(w)).toEqual([])
    expect(w.host.exists(`${DEVICES}/pv-raw`)).toBe(false)
  })

  it.each([
    { name: 'a final error (InvalidArgument) on stage removes the staging directory and vol_data.json', method: 'NodeStageVolume', code: 'InvalidArgument' as const, gone: [STAGING, `${DEVICES}/pv-raw`] },
    { name: 'an uncertain error (DeadlineExceeded) on stage keeps them for the tear-down', method: 'NodeStageVolume', code: 'DeadlineExceeded' as const, kept: [STAGING, `${DEVICES}/pv-raw/data/vol_data.json`] },
    { name: 'a final error (NotFound) on publish removes the publish file', method: 'NodePublishVolume', code: 'NotFound' as const, gone: [PUBLISH('a')], kept: [STAGING] },
  ])('$name', async ({ method, code, gone = [], kept = [] }) => {
    const w = world()
    let failures = 1
    w.driver.intercept(async (call, next) => {
      if (call.method === method && failures-- > 0) {
        // An uncertain outcome may have done the work: the driver did it, the answer was lost.
        if (code === 'DeadlineExceeded') await next()
        throw csiError(code, 'injected')
      }
      return next()
    })
    const h = await start(w)
    h.pods.setPod(blockPod('a'))
    await h.advanceUntil(() => h.events.some((e) => e.reason === 'FailedMapVolume'))
    for (const path of gone) expect(w.host.exists(path), path).toBe(false)
    for (const path of kept) expect(w.host.exists(path), path).toBe(true)
    // Then the retry maps it, and the pod's deletion leaves nothing behind.
    await h.addPodAndWait(blockPod('a'))
    h.pods.deletePod('a')
    await h.manager.waitForIdle()
    expect(mounts(w)).toEqual([])
    expect(await w.host.loopDevices?.find(IMAGE)).toEqual([])
    expect(w.host.exists(`${DEVICES}/pv-raw`)).toBe(false)
  })

  it('grows a mapped volume with NodeExpandVolume (block access type) when its PV grows', async () => {
    const w = world()
    const h = await start(w)
    await h.addPodAndWait(blockPod('a'))
    const pv = await h.objects.getPersistentVolume('pv-raw')
    h.objects.put('PersistentVolume', { ...pv, spec: { ...pv.spec, capacity: { storage: '2Gi' } } })
    await h.addPodAndWait(blockPod('a'))
    await h.advanceUntil(() => w.driver.calls.some((c) => c.method === 'NodeExpandVolume'), { maxMs: 20_000 })
    const expand = w.driver.calls.find((c) => c.method === 'NodeExpandVolume')?.request
    expect(expand).toMatchObject({ volumeId: HANDLE, volumePath: PUBLISH('a'), stagingTargetPath: STAGING, requiredBytes: 2 ** 31, volumeCapability: { block: {} } })
    const [loop] = (await w.host.loopDevices?.find(IMAGE)) ?? []
    expect(await w.host.blockDevices?.size(loop as string)).toBe(2 ** 31)
    // NodeGetVolumeStats of the published device.
    const stats = await h.manager.collectVolumeStats()
    expect(stats.find((v) => v.pod.metadata.uid === 'a')?.stats.capacityBytes).toBe(2 ** 31)
    expect(w.driver.calls.find((c) => c.method === 'NodeGetVolumeStats')?.request).toMatchObject({ volumeId: HANDLE, volumePath: PUBLISH('a'), stagingTargetPath: STAGING })
  })

  it.each([
    { name: 'with the journal', journal: true },
    { name: 'without the journal (from vol_data.json alone)', journal: false },
  ])('after a restart $name: unmaps what no pod wants, keeps what one does, unstages after the last', async ({ journal }) => {
    const w = world()
    const first = await start(w, { journal })
    await first.addPodAndWait(blockPod('a'))
    await first.addPodAndWait(blockPod('b'))
    await first.stop()
    running = []
    const second = await start(w, { journal })
    second.pods.setPod(blockPod('b'))
    await second.advanceUntil(() => mounts(w).length === 2, { maxMs: 20_000 })
    await second.manager.waitForIdle()
    expect(mounts(w)).toEqual([`${DEVICES}/pv-raw/dev/b`, PUBLISH('b')].sort())
    expect(await w.host.readlink(LINK('b'))).toBe(PUBLISH('b'))
    second.pods.deletePod('b')
    await second.advanceUntil(() => mounts(w).length === 0, { maxMs: 20_000 })
    await second.manager.waitForIdle()
    expect(methods(w).at(-1)).toBe('NodeUnstageVolume')
    expect(await w.host.loopDevices?.find(IMAGE)).toEqual([])
    expect(w.host.exists(`${DEVICES}/pv-raw`)).toBe(false)
  })
})
