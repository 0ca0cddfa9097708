/**
 * The CSI plugin through the whole manager on the in-memory host, with the in-memory CSI driver:
 * the order of node calls, the capabilities and CSIDriver options that change it, gRPC failures
 * classified as uncertain or final, and restart reconstruction from vol_data.json.
 */
import { createMemoryHost } from '@kubevol/adapter-mock'
import { type CSIDriver, NotFoundError, type Pod, type TokenSource, type VolumeAttachment } from '@kubevol/core'
import { createBuiltinPlugins } from '@kubevol/core/plugins'
import { buildClaim, buildPod, createFakeClock, createHarness, type FakeClock } from '@kubevol/core/testing'
import { afterEach, describe, expect, it } from 'vitest'
import {
  attachmentName,
  createCsiDriverRegistry,
  createCsiPlugin,
  csiError,
  type CsiDriverRegistry,
  type CsiNodeCapability,
  type CsiVolumePlugin,
  ephemeralVolumeHandle,
  sha256Hex,
} from '../../packages/core/src/plugins/csi/index.js'
import { createMemoryCsiDriver, type MemoryCsiDriver } from '../../packages/core/src/testing/csi/index.js'

const ROOT = '/var/lib/kubevol'
const DRIVER = 'memory.csi.kubevol.io'
const HANDLE = 'vol-0001'
const STAGING = `plugins/kubernetes.io/csi/${DRIVER}/${sha256Hex(HANDLE)}/globalmount`
const TARGET = (uid: string, pv = 'pv-data') => `pods/${uid}/volumes/kubernetes.io~csi/${pv}/mount`
const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes)

interface World {
  clock: FakeClock
  host: ReturnType<typeof createMemoryHost>
  driver: MemoryCsiDriver
  registry: CsiDriverRegistry
}

function world(capabilities?: readonly CsiNodeCapability[]): World {
  const clock = createFakeClock()
  const host = createMemoryHost({ clock })
  const driver = createMemoryCsiDriver({ host, name: DRIVER, ...(capabilities ? { capabilities } : {}) })
  const registry = createCsiDriverRegistry()
  registry.register({ name: DRIVER, driver })
  return { clock, host, driver, registry }
}

let running: { stop(): Promise<void> }[] = []
afterEach(async () => {
  for (const h of running) await h.stop()
  running = []
})

async function start(
  w: World,
  o: {
    csiDriver?: CSIDriver['spec']
    attachments?: Map<string, VolumeAttachment>
    pv?: Record<string, unknown>
    accessModes?: string[]
    tokens?: TokenSource
  } = {},
) {
  const plugin: CsiVolumePlugin = createCsiPlugin({
    drivers: w.registry,
    ...(o.attachments ? { getVolumeAttachment: (name: string) => readAttachment(o.attachments, name) } : {}),
  })
  const h = createHarness({ host: w.host, clock: w.clock, plugins: [...createBuiltinPlugins(), plugin], ...(o.tokens ? { manager: { tokens: o.tokens } } : {}) })
  if (o.csiDriver) h.objects.put('CSIDriver', { metadata: { name: DRIVER }, spec: o.csiDriver })
  const { pvc, pv } = buildClaim({
    claim: 'data',
    pv: 'pv-data',
    ...(o.accessModes ? { accessModes: o.accessModes } : {}),
    pvSource: { csi: { driver: DRIVER, volumeHandle: HANDLE, fsType: 'ext4', volumeAttributes: { tier: 'gold' }, ...o.pv } },
  })
  h.objects.put('PersistentVolumeClaim', pvc)
  h.objects.put('PersistentVolume', pv)
  await plugin.syncDriverObjects()
  h.start()
  running.push(h)
  return h
}

async function readAttachment(attachments: Map<string, VolumeAttachment> | undefined, name: string): Promise<VolumeAttachment> {
  const va = attachments?.get(name)
  if (!va) throw new NotFoundError('volumeattachments.storage.k8s.io', name)
  return va
}

/** Holds the host's calls that `match` until `release()`, which also ends the hold (released whatever a test's assertions did). */
function holdHostCalls(w: World, match: (call: { readonly method: string; readonly path?: string }) => boolean): { release(): void } {
  let release = (): void => {}
  const released = new Promise<void>((resolve) => {
    release = resolve
  })
  const stop = w.host.intercept(async (call, next) => {
    if (match(call)) await released
    return next()
  })
  return {
    release() {
      stop()
      release()
    },
  }
}

const claimPod = (uid: string): Pod => buildPod({ uid, volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'data' } }] })
const relative = (w: World) => w.host.mountTargets().map((t) => t.replace(`${ROOT}/`, '')).sort()
const methods = (w: World) => w.driver.calls.map((c) => c.method).filter((m) => m !== 'NodeGetCapabilities')

describe('CSI persistent volumes', () => {
  it('stages once, publishes per pod, unstages only after the last unpublish', async () => {
    const w = world()
    const h = await start(w, { csiDriver: { attachRequired: false } })
    await h.addPodAndWait(claimPod('a'))
    await h.addPodAndWait(claimPod('b'))
    expect(relative(w)).toEqual([STAGING, TARGET('a'), TARGET('b')].sort())
    const volData = JSON.parse(text(await w.host.readFile(`${ROOT}/pods/a/volumes/kubernetes.io~csi/pv-data/vol_data.json`)))
    expect(volData).toEqual({
      specVolID: 'pv-data',
      volumeHandle: HANDLE,
      driverName: DRIVER,
      nodeName: 'node-1',
      attachmentID: '',
      volumeLifecycleMode: 'Persistent',
    })
    expect(JSON.parse(text(await w.host.readFile(`${ROOT}/${STAGING.replace('/globalmount', '')}/vol_data.json`)))).toEqual({ driverName: DRIVER, volumeHandle: HANDLE })

    h.pods.deletePod('a')
    await h.manager.waitForIdle()
    expect(relative(w)).toEqual([STAGING, TARGET('b')].sort())
    h.pods.deletePod('b')
    await h.manager.waitForIdle()
    expect(relative(w)).toEqual([])
    expect(methods(w)).toEqual(['NodeStageVolume', 'NodePublishVolume', 'NodePublishVolume', 'NodeUnpublishVolume', 'NodeUnpublishVolume', 'NodeUnstageVolume'])
    expect(w.host.exists(`${ROOT}/plugins/kubernetes.io/csi/${DRIVER}/${sha256Hex(HANDLE)}`)).toBe(false)
    expect(w.host.exists(`${ROOT}/pods/a/volumes/kubernetes.io~csi/pv-data`)).toBe(false)
  })

  it('passes the access mode, fs type, mount options, volume context and publish-only staging path', async () => {
    const w = world()
    const h = await start(w, { csiDriver: { attachRequired: false }, accessModes: ['ReadWriteMany'] })
    await h.addPodAndWait(claimPod('a'))
    const stage = w.driver.calls.find((c) => c.method === 'NodeStageVolume')?.request
    const publish = w.driver.calls.find((c) => c.method === 'NodePublishVolume')?.request
    expect(stage).toMatchObject({
      volumeId: HANDLE,
      stagingTargetPath: `${ROOT}/${STAGING}`,
      volumeCapability: { mount: { fsType: 'ext4', mountFlags: [] }, accessMode: 'MULTI_NODE_MULTI_WRITER' },
      volumeContext: { tier: 'gold' },
      publishContext: {},
      secrets: {},
    })
    expect(publish).toMatchObject({ stagingTargetPath: `${ROOT}/${STAGING}`, targetPath: `${ROOT}/${TARGET('a')}`, readonly: false, volumeContext: { tier: 'gold' } })
  })

  it('does not stage when the driver lacks STAGE_UNSTAGE_VOLUME, but keeps vol_data.json for unmount', async () => {
    const w = world(['GET_VOLUME_STATS'])
    const h = await start(w, { csiDriver: { attachRequired: false } })
    await h.addPodAndWait(claimPod('a'))
    expect(relative(w)).toEqual([TARGET('a')])
    expect(w.driver.calls.find((c) => c.method === 'NodePublishVolume')?.request.stagingTargetPath).toBe('')
    h.pods.deletePod('a')
    await h.manager.waitForIdle()
    expect(relative(w)).toEqual([])
    expect(methods(w)).toEqual(['NodePublishVolume', 'NodeUnpublishVolume'])
  })

  it('republishes on every pod resync when the CSIDriver requiresRepublish', async () => {
    const w = world()
    const h = await start(w, { csiDriver: { attachRequired: false, requiresRepublish: true } })
    await h.addPodAndWait(claimPod('a'))
    // No event is about the volume: the pod sync period (60 s) republishes it.
    h.objects.put('ConfigMap', { metadata: { name: 'unrelated', namespace: 'default' }, data: {} })
    await h.clock.advance(59_000)
    expect(methods(w).filter((m) => m === 'NodePublishVolume')).toHaveLength(1)
    await h.advanceUntil(() => methods(w).filter((m) => m === 'NodePublishVolume').length >= 2, { maxMs: 2_000 })
    await h.manager.waitForIdle()
    expect(methods(w).filter((m) => m === 'NodePublishVolume').length).toBeGreaterThanOrEqual(2)
    expect(methods(w).filter((m) => m === 'NodeStageVolume')).toHaveLength(1)
    expect(relative(w)).toEqual([STAGING, TARGET('a')].sort())
  })

  it('a DeadlineExceeded publish leaves the volume uncertain; deleting the pod unpublishes it', async () => {
    const w = world()
    const h = await start(w, { csiDriver: { attachRequired: false } })
    // The driver mounts, then never answers: the 2-minute deadline passes.
    const remove = w.driver.intercept(async (call, next) => {
      const result = await next()
      if (call.method === 'NodePublishVolume') await new Promise(() => {})
      return result
    })
    h.pods.setPod(claimPod('a'))
    await h.advanceUntil(() => h.events.some((e) => e.reason === 'FailedMount'), { maxMs: 130_000, step: 1_000 })
    expect(h.events.find((e) => e.reason === 'FailedMount')?.message).toContain('code = DeadlineExceeded')
    expect(h.manager.actualState.getAllMountedVolumes().find((v) => v.podName.includes('a'))?.mountState).toBe('uncertain')
    remove()
    h.pods.deletePod('a')
    await h.advanceUntil(() => relative(w).length === 0, { maxMs: 10_000 })
    expect(relative(w)).toEqual([])
    expect(methods(w)).toContain('NodeUnpublishVolume')
    expect(methods(w).at(-1)).toBe('NodeUnstageVolume')
  })

  // An attempt that timed out may have staged or published; a final error of the next one removes
  // the directories only if nothing is mounted there, as the kubelet's removeMountDir, so the
  // vol_data.json the tear-down reads stays beside a mount.
  it.each([
    { call: 'NodeStageVolume', data: () => `${ROOT}/${STAGING.replace('/globalmount', '')}/vol_data.json`, left: () => [STAGING] },
    { call: 'NodePublishVolume', data: () => `${ROOT}/pods/a/volumes/kubernetes.io~csi/pv-data/vol_data.json`, left: () => [STAGING, TARGET('a')].sort() },
  ])('$call: a final error after a timed-out attempt that mounted keeps vol_data.json, and deleting the pod still tears down', async ({ call, data, left }) => {
    const w = world()
    const h = await start(w, { csiDriver: { attachRequired: false } })
    let attempts = 0
    const remove = w.driver.intercept(async (c, next) => {
      if (c.method !== call) return next()
      if (++attempts === 1) {
        await next()
        throw csiError('DeadlineExceeded', 'the disk is slow')
      }
      throw csiError('InvalidArgument', 'bad fs type')
    })
    h.pods.setPod(claimPod('a'))
    await h.advanceUntil(() => attempts >= 2 && h.operations.filter((o) => o.error?.includes('bad fs type')).length > 0, { maxMs: 60_000 })
    expect(relative(w)).toEqual(left())
    expect(w.host.exists(data())).toBe(true)
    h.pods.deletePod('a')
    remove()
    await h.advanceUntil(() => relative(w).length === 0, { maxMs: 60_000 })
    expect(relative(w)).toEqual([])
    expect(methods(w).at(-1)).toBe('NodeUnstageVolume')
  })

  it('a driver that answers NodeUnpublish and NodeUnstage but leaves the mounts: nothing under them is removed, the unmount fails', async () => {
    const w = world()
    const h = await start(w, { csiDriver: { attachRequired: false } })
    await h.addPodAndWait(claimPod('a'))
    const target = `${ROOT}/${TARGET('a')}`
    const staging = `${ROOT}/${STAGING}`
    await w.host.writeFile(`${target}/data.txt`, 'kept')
    await w.host.writeFile(`${staging}/data.txt`, 'kept')
    // Success without the work: the driver never unmounts.
    const lying = w.driver.intercept(async (call, next) => (call.method === 'NodeUnpublishVolume' || call.method === 'NodeUnstageVolume' ? {} : next()))
    h.pods.deletePod('a')
    const failed = (name: string) => h.operations.find((o) => o.name === name && o.error !== undefined)
    await h.advanceUntil(() => failed('volume_unmount') !== undefined, { maxMs: 10_000 })
    expect(failed('volume_unmount')?.error).toContain(`${target} is still mounted`)
    expect(relative(w)).toEqual([STAGING, TARGET('a')].sort())
    expect(text(await w.host.readFile(`${target}/data.txt`))).toBe('kept')
    expect(w.host.exists(`${ROOT}/pods/a/volumes/kubernetes.io~csi/pv-data/vol_data.json`)).toBe(true)

    // The pod's mount goes away by other means; the same lie at unstage keeps the staging mount.
    await w.host.unmount(target)
    await h.advanceUntil(() => failed('unmount_device') !== undefined, { maxMs: 20_000 })
    expect(failed('unmount_device')?.error).toContain(`${staging} is still mounted`)
    expect(text(await w.host.readFile(`${staging}/data.txt`))).toBe('kept')
    expect(w.host.exists(`${ROOT}/${STAGING.replace('/globalmount', '')}/vol_data.json`)).toBe(true)
    // Refused by a check: no remove was tried on either mount point.
    expect(w.host.violations).toEqual([])

    lying()
    await h.advanceUntil(() => relative(w).length === 0, { maxMs: 20_000 })
    expect(relative(w)).toEqual([])
    expect(w.host.exists(`${ROOT}/plugins/kubernetes.io/csi/${DRIVER}/${sha256Hex(HANDLE)}`)).toBe(false)
  })

  it('a final error (InvalidArgument) on stage removes the staging directory and its vol_data.json', async () => {
    const w = world()
    const h = await start(w, { csiDriver: { attachRequired: false } })
    const remove = w.driver.intercept(async (call, next) => {
      if (call.method === 'NodeStageVolume') throw csiError('InvalidArgument', 'bad fs type')
      return next()
    })
    h.pods.setPod(claimPod('a'))
    await h.advanceUntil(() => h.events.some((e) => e.reason === 'FailedMount'))
    expect(h.events.find((e) => e.reason === 'FailedMount')?.message).toContain('code = InvalidArgument desc = bad fs type')
    expect(w.host.exists(`${ROOT}/plugins/kubernetes.io/csi/${DRIVER}/${sha256Hex(HANDLE)}`)).toBe(false)
    remove()
    await h.advanceUntil(() => relative(w).length === 2, { maxMs: 20_000 })
    expect(relative(w)).toEqual([STAGING, TARGET('a')].sort())
  })

  // The kubelet's MountDevice makes the staging directory and vol_data.json, then asks
  // NodeGetCapabilities before NodeStage; kubevol does both while the device's intent is made
  // durable (the disk scan finds the directory and file without the journal). NodeStage waits for it.
  it('makes the staging directory and asks NodeGetCapabilities while the device intent is synced; stages only once it is durable', async () => {
    const w = world()
    const h = await start(w, { csiDriver: { attachRequired: false } })
    let durable = (): void => {}
    const synced = new Promise<void>((resolve) => {
      durable = resolve
    })
    const hold = w.host.intercept(async (call, next) => {
      // The journal writes into room made in its file where the host can (writeFileAt), else appends.
      const options = call.args[call.method === 'writeFileAt' ? 3 : 2] as { sync?: boolean } | undefined
      if ((call.method === 'writeFileAt' || call.method === 'appendFile') && call.path === `${ROOT}/journal/volumes.log` && options?.sync) await synced
      return next()
    })
    h.pods.setPod(claimPod('a'))
    try {
      // A sync that does not finish: the capabilities query only, however long it takes.
      await h.advanceUntil(() => false, { maxMs: 150_000, step: 1_000 })
      expect(w.driver.calls.map((c) => c.method)).toEqual(['NodeGetCapabilities'])
      expect(w.host.exists(`${ROOT}/${STAGING}`)).toBe(true)
      expect(JSON.parse(text(await w.host.readFile(`${ROOT}/${STAGING.replace('/globalmount', '')}/vol_data.json`)))).toEqual({ driverName: DRIVER, volumeHandle: HANDLE })
      expect(relative(w)).toEqual([])
    } finally {
      // Released whatever happens, so a failing test can stop its manager.
      hold()
      durable()
    }
    await h.advanceUntil(() => relative(w).length === 2, { maxMs: 20_000 })
    expect(relative(w)).toEqual([STAGING, TARGET('a')].sort())
    // The driver sees the kubelet's sequence: capabilities before the stage and before the publish.
    expect(w.driver.calls.map((c) => c.method)).toEqual(['NodeGetCapabilities', 'NodeStageVolume', 'NodeGetCapabilities', 'NodePublishVolume'])
  })

  // The kubelet reads the pod's vol_data.json when it makes the unmounter, before the operation
  // runs; kubevol reads it while it checks the pod's directories, and acts on it only after them.
  it("a pod directory swapped for a symlink stops the tear-down at the vol_data.json read, before NodeUnpublishVolume hands the path to the driver", async () => {
    const w = world()
    const h = await start(w, { csiDriver: { attachRequired: false } })
    h.pods.setPod(claimPod('a'))
    await h.advanceUntil(() => relative(w).length === 2, { maxMs: 20_000 })
    const calls: string[] = []
    w.host.intercept(async (call, next) => {
      if (call.path?.startsWith(`${ROOT}/pods/a`)) calls.push(`${call.method} ${call.path.replace(`${ROOT}/pods/a`, '')}`)
      return next()
    })
    // The pod's volumes directory becomes a symlink to a tree outside the root. The driver acts on
    // the names it is given, so nothing may reach it through the link: the host refuses the read of
    // vol_data.json through it, and the tear-down stops there.
    const outside = '/srv/elsewhere'
    await w.host.mkdir(`${outside}/kubernetes.io~csi/pv-data/mount`, { recursive: true })
    await w.host.writeFile(`${outside}/kubernetes.io~csi/canary`, 'canary')
    await w.host.rename(`${ROOT}/pods/a/volumes`, `${ROOT}/pods/a/volumes-moved`)
    await w.host.symlink(outside, `${ROOT}/pods/a/volumes`)
    h.pods.deletePod('a')
    await h.advanceUntil(() => h.events.some((e) => e.message?.includes('symlink')), { maxMs: 20_000 })
    expect(calls).toContain('readFile /volumes/kubernetes.io~csi/pv-data/vol_data.json')
    expect(methods(w)).toEqual(['NodeStageVolume', 'NodePublishVolume'])
    expect(text(await w.host.readFile(`${outside}/kubernetes.io~csi/canary`))).toBe('canary')
    // Put back, the tear-down goes on.
    await w.host.remove(`${ROOT}/pods/a/volumes`)
    await w.host.rename(`${ROOT}/pods/a/volumes-moved`, `${ROOT}/pods/a/volumes`)
    await h.advanceUntil(() => relative(w).length === 0, { maxMs: 60_000 })
    expect(methods(w)).toEqual(['NodeStageVolume', 'NodePublishVolume', 'NodeUnpublishVolume', 'NodeUnstageVolume'])
  })

  it('a device intent that cannot be written removes the staging directory made meanwhile, and nothing is staged', async () => {
    const w = world()
    const h = await start(w, { csiDriver: { attachRequired: false } })
    let failing = true
    const remove = w.host.intercept(async (call, next) => {
      const options = call.args[call.method === 'writeFileAt' ? 3 : 2] as { sync?: boolean } | undefined
      if (failing && (call.method === 'writeFileAt' || call.method === 'appendFile') && call.path === `${ROOT}/journal/volumes.log` && options?.sync) {
        throw new Error('EIO: the journal’s disk failed')
      }
      return next()
    })
    h.pods.setPod(claimPod('a'))
    await h.advanceUntil(() => h.events.some((e) => e.reason === 'FailedMount'))
    expect(w.host.exists(`${ROOT}/plugins/kubernetes.io/csi/${DRIVER}/${sha256Hex(HANDLE)}`)).toBe(false)
    expect(methods(w)).toEqual([])
    failing = false
    remove()
    await h.advanceUntil(() => relative(w).length === 2, { maxMs: 20_000 })
    expect(relative(w)).toEqual([STAGING, TARGET('a')].sort())
  })

  it('a capabilities query that fails is reported after the staging directory and vol_data.json are made, as before', async () => {
    const w = world()
    const h = await start(w, { csiDriver: { attachRequired: false } })
    const remove = w.driver.intercept(async (call, next) => {
      if (call.method === 'NodeGetCapabilities') throw csiError('Unavailable', 'driver restarting')
      return next()
    })
    h.pods.setPod(claimPod('a'))
    await h.advanceUntil(() => h.events.some((e) => e.reason === 'FailedMount'))
    expect(h.events.find((e) => e.reason === 'FailedMount')?.message).toContain('MountVolume.MountDevice failed')
    expect(h.events.find((e) => e.reason === 'FailedMount')?.message).toContain('code = Unavailable desc = driver restarting')
    expect(JSON.parse(text(await w.host.readFile(`${ROOT}/${STAGING.replace('/globalmount', '')}/vol_data.json`)))).toEqual({ driverName: DRIVER, volumeHandle: HANDLE })
    expect(methods(w)).toEqual([])
    remove()
    await h.advanceUntil(() => relative(w).length === 2, { maxMs: 20_000 })
    expect(relative(w)).toEqual([STAGING, TARGET('a')].sort())
  })

  it('the publish asks its capabilities while the pod\'s directory and vol_data.json are made; a failure is reported after them', async () => {
    const w = world()
    const h = await start(w, { csiDriver: { attachRequired: false } })
    let asked = 0
    const remove = w.driver.intercept(async (call, next) => {
      if (call.method === 'NodeGetCapabilities' && ++asked === 2) throw csiError('Unavailable', 'driver restarting')
      return next()
    })
    h.pods.setPod(claimPod('a'))
    await h.advanceUntil(() => h.events.some((e) => e.reason === 'FailedMount'))
    expect(h.events.find((e) => e.reason === 'FailedMount')?.message).toContain('MountVolume.SetUp failed')
    expect(JSON.parse(text(await w.host.readFile(`${ROOT}/pods/a/volumes/kubernetes.io~csi/pv-data/vol_data.json`)))).toMatchObject({ driverName: DRIVER, volumeHandle: HANDLE })
    expect(methods(w)).toEqual(['NodeStageVolume'])
    remove()
    await h.advanceUntil(() => relative(w).length === 2, { maxMs: 20_000 })
    expect(w.driver.calls.map((c) => c.method)).toEqual(['NodeGetCapabilities', 'NodeStageVolume', 'NodeGetCapabilities', 'NodeGetCapabilities', 'NodePublishVolume'])
  })

  // The kubelet's UnmountDevice checks the device's mount references, then reads vol_data.json and
  // asks NodeGetCapabilities; kubevol starts both reads alongside the check. NodeUnstage, and every
  // removal, wait for the check.
  it('the unstage reads vol_data.json and asks its capabilities while the mount references are checked; it unstages only once the check passed', async () => {
    const w = world()
    const h = await start(w, { csiDriver: { attachRequired: false } })
    await h.addPodAndWait(claimPod('a'))
    const check = holdHostCalls(w, (call) => call.method === 'mountReferences' && call.path === `${ROOT}/${STAGING}`)
    h.pods.deletePod('a')
    try {
      // A check that does not finish: the capabilities query only, however long it takes.
      await h.advanceUntil(() => false, { maxMs: 150_000, step: 1_000 })
      expect(w.driver.calls.map((c) => c.method).slice(4)).toEqual(['NodeUnpublishVolume', 'NodeGetCapabilities'])
      expect(relative(w)).toEqual([STAGING])
      expect(w.host.exists(`${ROOT}/${STAGING.replace('/globalmount', '')}/vol_data.json`)).toBe(true)
    } finally {
      check.release()
    }
    await h.advanceUntil(() => relative(w).length === 0, { maxMs: 20_000 })
    // The driver sees the kubelet's sequence.
    expect(w.driver.calls.map((c) => c.method).slice(4)).toEqual(['NodeUnpublishVolume', 'NodeGetCapabilities', 'NodeUnstageVolume'])
    expect(w.host.exists(`${ROOT}/plugins/kubernetes.io/csi/${DRIVER}/${sha256Hex(HANDLE)}`)).toBe(false)
  })

  // The driver's name is in the volume's spec as well: its capabilities are asked without waiting
  // for vol_data.json, whose answer is used once the file (which decides, as in the kubelet) names it.
  it('the unstage asks the capabilities of the driver the spec names before vol_data.json is read, once', async () => {
    const w = world()
    const h = await start(w, { csiDriver: { attachRequired: false } })
    await h.addPodAndWait(claimPod('a'))
    const read = holdHostCalls(w, (call) => call.method === 'readFile' && call.path === `${ROOT}/${STAGING.replace('/globalmount', '')}/vol_data.json`)
    h.pods.deletePod('a')
    try {
      await h.advanceUntil(() => false, { maxMs: 10_000, step: 1_000 })
      expect(w.driver.calls.map((c) => c.method).slice(4)).toEqual(['NodeUnpublishVolume', 'NodeGetCapabilities'])
      expect(relative(w)).toEqual([STAGING])
    } finally {
      read.release()
    }
    await h.advanceUntil(() => relative(w).length === 0, { maxMs: 20_000 })
    expect(w.driver.calls.map((c) => c.method).slice(4)).toEqual(['NodeUnpublishVolume', 'NodeGetCapabilities', 'NodeUnstageVolume'])
  })

  it('a staging path still mounted elsewhere is not unstaged: the reference check refuses, finally, and nothing is removed', async () => {
    const w = world()
    const h = await start(w, { csiDriver: { attachRequired: false } })
    await h.addPodAndWait(claimPod('a'))
    await w.host.mkdir('/mnt/elsewhere', { recursive: true })
    await w.host.mount({ source: `${ROOT}/${STAGING}`, target: '/mnt/elsewhere', bind: true })
    h.pods.deletePod('a')
    const refused = () => h.operations.find((o) => o.name === 'unmount_device' && o.error !== undefined)
    await h.advanceUntil(() => refused() !== undefined, { maxMs: 20_000 })
    expect(refused()?.error).toContain(`GetDeviceMountRefs check failed for volume "pv-data"`)
    expect(refused()?.error).toContain(`the device mount path "${ROOT}/${STAGING}" is still mounted by other references [/mnt/elsewhere]`)
    // Its capabilities were asked alongside the check (a read); no NodeUnstage, nothing removed.
    expect(methods(w)).toEqual(['NodeStageVolume', 'NodePublishVolume', 'NodeUnpublishVolume'])
    expect(relative(w)).toEqual(['/mnt/elsewhere', STAGING].sort())
    expect(w.host.exists(`${ROOT}/${STAGING.replace('/globalmount', '')}/vol_data.json`)).toBe(true)
  })

  it('waits for the VolumeAttachment and passes its metadata as the publish context', async () => {
    const w = world()
    const attachments = new Map<string, VolumeAttachment>()
    const h = await start(w, { csiDriver: { attachRequired: true }, attachments })
    h.pods.setPod(claimPod('a'))
    await h.advanceUntil(() => false, { maxMs: 3_000 })
    expect(relative(w)).toEqual([])
    const name = attachmentName(HANDLE, DRIVER, 'node-1')
    attachments.set(name, { metadata: { name }, status: { attached: true, attachmentMetadata: { devicePath: '/dev/xvdf' } } })
    await h.advanceUntil(() => relative(w).length === 2, { maxMs: 10_000 })
    expect(w.driver.calls.find((c) => c.method === 'NodeStageVolume')?.request.publishContext).toEqual({ devicePath: '/dev/xvdf' })
    expect(w.driver.calls.find((c) => c.method === 'NodePublishVolume')?.request.publishContext).toEqual({ devicePath: '/dev/xvdf' })
  })

  it('reads stage and publish secrets from the referenced Secrets', async () => {
    const w = world()
    const h = await start(w, {
      csiDriver: { attachRequired: false },
      pv: { nodeStageSecretRef: { name: 'stage', namespace: 'kube-system' }, nodePublishSecretRef: { name: 'pub', namespace: 'kube-system' } },
    })
    h.objects.put('Secret', { metadata: { name: 'stage', namespace: 'kube-system' }, data: { key: btoa('s3cret') } })
    h.objects.put('Secret', { metadata: { name: 'pub', namespace: 'kube-system' }, stringData: { token: 'p' } })
    await h.addPodAndWait(claimPod('a'))
    expect(w.driver.calls.find((c) => c.method === 'NodeStageVolume')?.request.secrets).toEqual({ key: 's3cret' })
    expect(w.driver.calls.find((c) => c.method === 'NodePublishVolume')?.request.secrets).toEqual({ token: 'p' })
  })

  it('passes service account tokens for the audiences the CSIDriver requests', async () => {
    const w = world()
    const tokens: TokenSource = { getToken: async (r) => ({ token: `token-for-${r.audience}`, expiresAt: Date.UTC(2030, 0, 1), issuedAt: 0 }) }
    const h = await start(w, { csiDriver: { attachRequired: false, tokenRequests: [{ audience: 'vault' }] }, tokens })
    await h.addPodAndWait(claimPod('a'))
    const context = w.driver.calls.find((c) => c.method === 'NodePublishVolume')?.request.volumeContext as Record<string, string>
    expect(JSON.parse(context['csi.storage.k8s.io/serviceAccount.tokens'] ?? '')).toEqual({
      vault: { token: 'token-for-vault', expirationTimestamp: '2030-01-01T00:00:00.000Z' },
    })
  })

  it('waits, without failing finally, for a driver that is not registered yet', async () => {
    const w = world()
    w.registry.unregister(DRIVER)
    const h = await start(w, { csiDriver: { attachRequired: false } })
    h.pods.setPod(claimPod('a'))
    await h.advanceUntil(() => false, { maxMs: 2_000 })
    expect(relative(w)).toEqual([])
    w.registry.register({ name: DRIVER, driver: w.driver })
    await h.advanceUntil(() => relative(w).length === 2, { maxMs: 20_000 })
    expect(relative(w)).toEqual([STAGING, TARGET('a')].sort())
  })
})

describe('CSI inline ephemeral volumes', () => {
  const inlinePod = (uid: string) =>
    buildPod({ uid, name: `p-${uid}`, volumes: [{ name: 'scratch', csi: { driver: DRIVER, volumeAttributes: { size: '1Gi' } } }] })

  it('publishes per pod with pod info and a per-pod handle, never staged', async () => {
    const w = world()
    const h = await start(w, { csiDriver: { attachRequired: false, podInfoOnMount: true, volumeLifecycleModes: ['Ephemeral'] } })
    await h.addPodAndWait(inlinePod('a'))
    expect(relative(w)).toEqual([TARGET('a', 'scratch')])
    const publish = w.driver.calls.find((c) => c.method === 'NodePublishVolume')?.request
    expect(publish).toMatchObject({
      volumeId: ephemeralVolumeHandle('a', 'scratch'),
      stagingTargetPath: '',
      volumeContext: {
        size: '1Gi',
        'csi.storage.k8s.io/pod.name': 'p-a',
        'csi.storage.k8s.io/pod.namespace': 'default',
        'csi.storage.k8s.io/pod.uid': 'a',
        'csi.storage.k8s.io/serviceAccount.name': 'default',
        'csi.storage.k8s.io/ephemeral': 'true',
      },
    })
    h.pods.deletePod('a')
    await h.manager.waitForIdle()
    expect(relative(w)).toEqual([])
  })

  it('refuses an inline volume of a driver that only supports Persistent', async () => {
    const w = world()
    const h = await start(w, { csiDriver: { attachRequired: false } })
    h.pods.setPod(inlinePod('a'))
    await h.advanceUntil(() => h.events.some((e) => e.reason === 'FailedMount'))
    expect(h.events.find((e) => e.reason === 'FailedMount')?.message).toContain(`volume mode "Ephemeral" not supported by driver ${DRIVER}`)
  })
})

describe('CSI after a restart', () => {
  it('reconstructs from vol_data.json: unpublishes and unstages what no pod wants, keeps what one does', async () => {
    const w = world()
    const first = await start(w, { csiDriver: { attachRequired: false } })
    await first.addPodAndWait(claimPod('a'))
    await first.addPodAndWait(claimPod('b'))
    await first.stop()
    running = []
    const second = await start(w, { csiDriver: { attachRequired: false } })
    second.pods.setPod(claimPod('b'))
    await second.advanceUntil(() => relative(w).length === 2, { maxMs: 20_000 })
    await second.manager.waitForIdle()
    expect(relative(w)).toEqual([STAGING, TARGET('b')].sort())
    second.pods.deletePod('b')
    await second.advanceUntil(() => relative(w).length === 0, { maxMs: 20_000 })
    expect(relative(w)).toEqual([])
    expect(methods(w).at(-1)).toBe('NodeUnstageVolume')
  })
})

describe('CSI after a restart with controller attach', () => {
  it.each([
    { name: 'the pod stays: it keeps its volume', podStays: true },
    { name: 'the pod is gone: unpublished and unstaged', podStays: false },
  ])('attachRequired: $name', async ({ podStays }) => {
    const w = world()
    const name = attachmentName(HANDLE, DRIVER, 'node-1')
    const attachments = new Map<string, VolumeAttachment>([[name, { metadata: { name }, status: { attached: true } }]])
    const first = await start(w, { csiDriver: { attachRequired: true }, attachments })
    await first.addPodAndWait(claimPod('a'))
    await first.stop()
    running = []
    const second = await start(w, { csiDriver: { attachRequired: true }, attachments })
    if (podStays) {
      await second.addPodAndWait(claimPod('a'))
      await second.manager.waitForIdle()
      expect(relative(w)).toEqual([STAGING, TARGET('a')].sort())
      second.pods.deletePod('a')
    }
    await second.advanceUntil(() => relative(w).length === 0, { maxMs: 20_000 })
    expect(relative(w)).toEqual([])
    expect(methods(w).at(-1)).toBe('NodeUnstageVolume')
  })
})

describe('CSI metrics and expansion', () => {
  it('grows the volume with NodeExpandVolume during mount when the PV is bigger than the claim says', async () => {
    const w = world()
    const h = await start(w, { csiDriver: { attachRequired: false } })
    const pv = await h.objects.getPersistentVolume('pv-data')
    h.objects.put('PersistentVolume', { ...pv, spec: { ...pv.spec, capacity: { storage: '2Gi' } } })
    await h.addPodAndWait(claimPod('a'))
    const expand = w.driver.calls.find((c) => c.method === 'NodeExpandVolume')?.request
    expect(expand).toMatchObject({ volumeId: HANDLE, volumePath: `${ROOT}/${TARGET('a')}`, stagingTargetPath: `${ROOT}/${STAGING}`, requiredBytes: 2 ** 31 })
    expect(w.driver.sizes.get(HANDLE)).toBe(2 ** 31)
  })

  it('reports NodeGetVolumeStats as the mounter metrics', async () => {
    const w = world()
    const h = await start(w, { csiDriver: { attachRequired: false } })
    const pod = claimPod('a')
    await h.addPodAndWait(pod)
    const plugin = h.manager.pluginManager.findPluginByName('kubernetes.io/csi')
    const spec = h.manager.actualState.getAllMountedVolumes()[0]?.spec
    if (!spec) throw new Error('no mounted volume')
    const stats = await plugin.newMounter(spec, pod).getMetrics?.()
    expect(stats).toMatchObject({ capacityBytes: 1 << 30, usedBytes: 0 })
  })
})
