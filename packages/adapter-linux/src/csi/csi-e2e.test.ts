/**
 * The whole volume manager with the CSI plugin on the real kernel, talking gRPC to the hostpath
 * reference driver over a unix socket: a claim's volume staged, published, written through, torn
 * down; a raw block volume on a loop device mapped into a pod and unmapped; and kubevol killed in
 * the middle of NodeStageVolume, then started again, for both.
 */
import { closeSync, openSync, readFileSync, readSync, renameSync, rmSync, statSync, symlinkSync, writeSync } from 'node:fs'
import { createVolumeManager, type Pod } from '@kubevol/core'
import { createCsiDriverRegistry, createCsiPlugin } from '@kubevol/core/plugins'
import { sha256Hex } from '@kubevol/core/testing'
import { buildClaim, buildPod, createMemoryObjectReader, createMemoryPodSource } from '@kubevol/core/testing'
import { afterEach, expect, it } from 'vitest'
import { describeAsRoot } from '../../test/as-root.js'
import { useLinuxHost } from '../../test/harness.js'
import { parseMountInfo } from '../mountinfo.js'
import { createGrpcCsiDriver } from './grpc-csi-driver.js'
// The reference driver (examples/csi-hostpath-driver): a workspace package, not a declared dependency, since it depends on this one.
import { type HostpathCsiDriverServer, startHostpathCsiDriver } from '@kubevol/example-csi-hostpath-driver'

const DRIVER = 'hostpath.csi.kubevol.io'
const kernelMounts = (prefix: string) =>
  parseMountInfo(readFileSync('/proc/self/mountinfo', 'utf8'))
    .map((e) => e.target)
    .filter((t) => t.startsWith(prefix))
    .sort()

async function until(check: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not reached in time')
    await new Promise((r) => setTimeout(r, 25))
  }
}

/**
 * The reference driver on a socket under the test root (`launch`), and a manager talking to it
 * through the gRPC client (`manager`, which can be killed and started again).
 */
function driverAndManager(
  w: {
    host: ReturnType<ReturnType<typeof useLinuxHost>>['host']
    p: (name: string) => string
    root: string
    pods: ReturnType<typeof createMemoryPodSource>
    objects: ReturnType<typeof createMemoryObjectReader>
    intercept?: ((method: string) => Promise<void> | void) | undefined
  },
  onStarted: (server: HostpathCsiDriverServer) => void,
) {
  const { host, p, root, pods, objects, intercept } = w
  const launch = async () => {
    await host.mkdir(p('data'), { recursive: true })
    onStarted(await startHostpathCsiDriver({ host, endpoint: p('csi.sock'), dataDir: p('data'), ...(intercept ? { intercept } : {}) }))
  }
  const manager = () => {
    const registry = createCsiDriverRegistry()
    registry.register({ name: DRIVER, driver: createGrpcCsiDriver({ endpoint: p('csi.sock') }), endpoint: p('csi.sock') })
    const plugin = createCsiPlugin({ drivers: registry })
    const m = createVolumeManager({ host, plugins: [plugin], podSource: pods, objects, nodeName: 'node-1', rootDir: root, controllerAttachDetach: false })
    const stop = new AbortController()
    const running = m.run(stop.signal)
    return {
      m,
      plugin,
      async kill() {
        stop.abort()
        await running
        for (const d of registry.list()) registry.unregister(d.name)
      },
    }
  }
  return { launch, manager }
}

describeAsRoot('the volume manager with a gRPC CSI driver on the Linux host', () => {
  const h = useLinuxHost()
  let server: HostpathCsiDriverServer | undefined
  afterEach(async () => {
    await server?.stop()
    server = undefined
  })

  function world(intercept?: (method: string) => Promise<void> | void) {
    const { host, p } = h()
    const root = p('kubevol')
    const objects = createMemoryObjectReader()
    objects.put('CSIDriver', { metadata: { name: DRIVER }, spec: { attachRequired: false, podInfoOnMount: true, volumeLifecycleModes: ['Persistent', 'Ephemeral'] } })
    const { pvc, pv } = buildClaim({ claim: 'data', pv: 'pv-data', pvSource: { csi: { driver: DRIVER, volumeHandle: 'vol-1' } } })
    objects.put('PersistentVolumeClaim', pvc)
    objects.put('PersistentVolume', pv)
    const pods = createMemoryPodSource()
    const pod: Pod = buildPod({ uid: 'e2e', volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'data' } }] })
    const { launch, manager } = driverAndManager({ host, p, root, pods, objects, intercept }, (started) => {
      server = started
    })
    const staging = `${root}/plugins/kubernetes.io/csi/${DRIVER}/${sha256Hex('vol-1')}/globalmount`
    const target = `${root}/pods/e2e/volumes/kubernetes.io~csi/pv-data/mount`
    return { host, p, root, pods, pod, launch, manager, staging, target }
  }

  it('stages, publishes, and tears down through gRPC with real bind mounts', async () => {
    const w = world()
    await w.launch()
    const k = w.manager()
    await k.plugin.syncDriverObjects()
    w.pods.setPod(w.pod)
    await k.m.waitForAttachAndMount(w.pod, { timeoutMs: 30_000 })
    expect(kernelMounts(w.root)).toEqual([w.staging, w.target].sort())
    await w.host.writeFile(`${w.target}/db`, 'rows')
    expect(readFileSync(w.p('data/vol-1/db'), 'utf8')).toBe('rows')
    const volData = JSON.parse(readFileSync(`${w.root}/pods/e2e/volumes/kubernetes.io~csi/pv-data/vol_data.json`, 'utf8'))
    expect(volData).toMatchObject({ driverName: DRIVER, volumeHandle: 'vol-1', volumeLifecycleMode: 'Persistent' })
    w.pods.deletePod('e2e')
    await k.m.waitForUnmount(w.pod, { timeoutMs: 30_000 })
    await until(() => kernelMounts(w.root).length === 0)
    // The directories go right after the unmount, in the same operation.
    await until(async () => (await w.host.lstat(`${w.root}/plugins/kubernetes.io/csi/${DRIVER}/${sha256Hex('vol-1')}`)) === null)
    expect(readFileSync(w.p('data/vol-1/db'), 'utf8')).toBe('rows')
    await k.kill()
  })

  // vol_data.json is read while the pod's directories are checked; a level swapped for a symlink
  // stops the tear-down before NodeUnpublishVolume, on the kernel, and nothing outside the root moves.
  it('the pod directory level a target goes through swapped for a symlink: no NodeUnpublishVolume, nothing unmounted, the canary kept; the tear-down goes on once it is put back', async () => {
    const calls: string[] = []
    const w = world((method) => {
      calls.push(method)
    })
    await w.launch()
    const k = w.manager()
    await k.plugin.syncDriverObjects()
    w.pods.setPod(w.pod)
    await k.m.waitForAttachAndMount(w.pod, { timeoutMs: 30_000 })
    await w.host.mkdir(w.p('outside/kubernetes.io~csi/pv-data'), { recursive: true })
    await w.host.writeFile(w.p('outside/kubernetes.io~csi/pv-data/vol_data.json'), JSON.stringify({ driverName: DRIVER, volumeHandle: 'victim' }))
    await w.host.writeFile(w.p('outside/canary'), 'canary')
    // The level the target's path goes through: moved aside (its mount moves with it), a link to
    // the outside tree in its place. The driver acts on the names it is given: the host's refusal to
    // read vol_data.json through the link stops the tear-down before the driver is called.
    const volumes = `${w.root}/pods/e2e/volumes`
    renameSync(volumes, `${volumes}-moved`)
    symlinkSync(w.p('outside'), volumes)
    w.pods.deletePod('e2e')
    await new Promise((r) => setTimeout(r, 1_000))
    expect(calls).not.toContain('NodeUnpublishVolume')
    expect(kernelMounts(w.root)).toEqual([w.staging, w.target.replace(volumes, `${volumes}-moved`)].sort())
    expect(readFileSync(w.p('outside/canary'), 'utf8')).toBe('canary')
    expect(readFileSync(w.p('outside/kubernetes.io~csi/pv-data/vol_data.json'), 'utf8')).toContain('victim')
    rmSync(volumes)
    renameSync(`${volumes}-moved`, volumes)
    await k.m.waitForUnmount(w.pod, { timeoutMs: 30_000 })
    await until(() => kernelMounts(w.root).length === 0)
    expect(calls.filter((m) => m === 'NodeUnpublishVolume')).toHaveLength(1)
    expect(readFileSync(w.p('outside/canary'), 'utf8')).toBe('canary')
    await k.kill()
  })

  // An attempt that timed out may have staged; a final error of the next one removes the
  // directories only while nothing is mounted there (the kubelet's removeMountDir), on the kernel.
  it('a final NodeStageVolume error keeps the staging directory and its vol_data.json while something is mounted there', async () => {
    let failing = true
    const w = world((method) => {
      if (failing && method === 'NodeStageVolume') throw { code: 3, details: 'bad fs type' }
    })
    await w.launch()
    const k = w.manager()
    await k.plugin.syncDriverObjects()
    await w.host.mkdir(w.p('earlier'), { recursive: true })
    await w.host.writeFile(w.p('earlier/canary'), 'canary')
    await w.host.mkdir(w.staging, { recursive: true })
    await w.host.mount({ source: w.p('earlier'), target: w.staging, bind: true })
    w.pods.setPod(w.pod)
    const volData = `${w.staging.replace(/\/globalmount$/, '')}/vol_data.json`
    await until(async () => (await w.host.lstat(volData)) !== null)
    await expect(k.m.waitForAttachAndMount(w.pod, { timeoutMs: 2_000 })).rejects.toThrow()
    expect(kernelMounts(w.root)).toEqual([w.staging])
    expect(JSON.parse(readFileSync(volData, 'utf8'))).toEqual({ driverName: DRIVER, volumeHandle: 'vol-1' })
    expect(readFileSync(`${w.staging}/canary`, 'utf8')).toBe('canary')
    failing = false
    await w.host.unmount(w.staging)
    await k.m.waitForAttachAndMount(w.pod, { timeoutMs: 30_000 })
    w.pods.deletePod('e2e')
    await k.m.waitForUnmount(w.pod, { timeoutMs: 30_000 })
    await until(() => kernelMounts(w.root).length === 0)
    expect(readFileSync(w.p('earlier/canary'), 'utf8')).toBe('canary')
    await k.kill()
  })

  it('publishes an inline ephemeral volume as a tmpfs and removes it with the pod', async () => {
    const w = world()
    await w.launch()
    const k = w.manager()
    await k.plugin.syncDriverObjects()
    const pod = buildPod({ uid: 'eph', volumes: [{ name: 'scratch', csi: { driver: DRIVER } }] })
    w.pods.setPod(pod)
    await k.m.waitForAttachAndMount(pod, { timeoutMs: 30_000 })
    const target = `${w.root}/pods/eph/volumes/kubernetes.io~csi/scratch/mount`
    expect(kernelMounts(w.root)).toEqual([target])
    const entry = parseMountInfo(readFileSync('/proc/self/mountinfo', 'utf8')).find((e) => e.target === target)
    expect(entry?.fstype).toBe('tmpfs')
    w.pods.deletePod('eph')
    await k.m.waitForUnmount(pod, { timeoutMs: 30_000 })
    await until(() => kernelMounts(w.root).length === 0)
    expect(await w.host.lstat(`${w.root}/pods/eph/volumes/kubernetes.io~csi/scratch`)).toBeNull()
    await k.kill()
  })

  it.each([
    { name: 'the pod is still there: staging is re-driven (idempotent), then published', podStays: true },
    { name: 'the pod went away meanwhile: the staged volume is unstaged', podStays: false },
  ])('killed in the middle of NodeStageVolume and restarted; $name', async ({ podStays }) => {
    // The driver stages, then kubevol dies before the answer arrives.
    let hang = true
    let staged = false
    const w = world(async (method) => {
      if (method !== 'NodeStageVolume' || !hang) return
      await new Promise((r) => setTimeout(r, 0))
      staged = true
      await new Promise((r) => setTimeout(r, 3_000))
    })
    await w.launch()
    const first = w.manager()
    await first.plugin.syncDriverObjects()
    w.pods.setPod(w.pod)
    await until(() => staged)
    await first.kill()
    hang = false
    // The driver finished staging after kubevol died: the mount is there, nobody recorded it.
    await until(() => kernelMounts(w.root).includes(w.staging), 10_000)
    if (!podStays) w.pods.deletePod('e2e')

    const second = w.manager()
    await second.plugin.syncDriverObjects()
    if (podStays) {
      await second.m.waitForAttachAndMount(w.pod, { timeoutMs: 30_000 })
      expect(kernelMounts(w.root)).toEqual([w.staging, w.target].sort())
      w.pods.deletePod('e2e')
      await second.m.waitForUnmount(w.pod, { timeoutMs: 30_000 })
    }
    await until(() => kernelMounts(w.root).length === 0)
    expect(kernelMounts(w.root)).toEqual([])
    await second.kill()
  })
})

describeAsRoot('raw block CSI volumes through gRPC on the Linux host', () => {
  const h = useLinuxHost()
  let server: HostpathCsiDriverServer | undefined
  afterEach(async () => {
    await server?.stop()
    server = undefined
  })

  function world(intercept?: (method: string) => Promise<void> | void) {
    const { host, p } = h()
    const root = p('kubevol')
    const objects = createMemoryObjectReader()
    objects.put('CSIDriver', { metadata: { name: DRIVER }, spec: { attachRequired: false } })
    const { pvc, pv } = buildClaim({ claim: 'raw', pv: 'pv-raw', volumeMode: 'Block', pvSource: { csi: { driver: DRIVER, volumeHandle: 'blk-1', volumeAttributes: { size: String(8 << 20) } } } })
    objects.put('PersistentVolumeClaim', pvc)
    objects.put('PersistentVolume', pv)
    const pods = createMemoryPodSource()
    const pod: Pod = buildPod({ uid: 'e2e', volumes: [{ name: 'raw', persistentVolumeClaim: { claimName: 'raw' } }], devices: ['raw'] })
    const { launch, manager } = driverAndManager({ host, p, root, pods, objects, intercept }, (started) => {
      server = started
    })
    const devices = `${root}/plugins/kubernetes.io/csi/volumeDevices`
    const image = p('data/blk-1.img')
    return {
      host,
      root,
      pods,
      pod,
      launch,
      manager,
      image,
      devices,
      publish: `${devices}/publish/pv-raw/e2e`,
      link: `${root}/pods/e2e/volumeDevices/kubernetes.io~csi/pv-raw`,
      mapped: () => [`${devices}/pv-raw/dev/e2e`, `${devices}/publish/pv-raw/e2e`].sort(),
      loops: async () => (await host.loopDevices?.find(image)) ?? [],
    }
  }

  it('stages a loop device, publishes it onto a file, links it into the pod, and unmaps it in reverse', async () => {
    const w = world()
    await w.launch()
    const k = w.manager()
    await k.plugin.syncDriverObjects()
    w.pods.setPod(w.pod)
    await k.m.waitForAttachAndMount(w.pod, { timeoutMs: 30_000 })
    expect(kernelMounts(w.root)).toEqual(w.mapped())
    const [loop] = await w.loops()
    expect(loop).toMatch(/^\/dev\/loop\d+$/)
    expect(await w.host.readlink(w.link)).toBe(w.publish)
    // What the pod sees through its link is the device itself: a write lands in the image.
    expect(statSync(w.link).isBlockDevice()).toBe(true)
    expect(statSync(w.image).size).toBe(8 << 20)
    const fd = openSync(w.link, 'r+')
    writeSync(fd, Buffer.from('raw bytes'), 0, 9, 4096)
    closeSync(fd)
    w.pods.deletePod('e2e')
    await k.m.waitForUnmount(w.pod, { timeoutMs: 30_000 })
    await until(async () => kernelMounts(w.root).length === 0 && (await w.loops()).length === 0)
    await until(async () => (await w.host.lstat(`${w.devices}/pv-raw`)) === null)
    expect(await w.host.lstat(`${w.devices}/staging/pv-raw`)).toBeNull()
    expect(await w.host.lstat(w.link)).toBeNull()
    const check = Buffer.alloc(9)
    const image = openSync(w.image, 'r')
    readSync(image, check, 0, 9, 4096)
    closeSync(image)
    expect(check.toString()).toBe('raw bytes')
    await k.kill()
  })

  it.each([
    { name: 'the pod is still there: staging is re-driven (idempotent), then published and mapped', podStays: true },
    { name: 'the pod went away meanwhile: the loop device is unstaged', podStays: false },
  ])('killed in the middle of NodeStageVolume and restarted; $name', async ({ podStays }) => {
    let hang = true
    let staging = false
    const w = world(async (method) => {
      if (method !== 'NodeStageVolume' || !hang) return
      staging = true
      await new Promise((r) => setTimeout(r, 3_000))
    })
    await w.launch()
    const first = w.manager()
    await first.plugin.syncDriverObjects()
    w.pods.setPod(w.pod)
    await until(() => staging)
    await first.kill()
    hang = false
    // The driver attached the loop device after kubevol died: nobody recorded it.
    await until(async () => (await w.loops()).length === 1, 10_000)
    if (!podStays) w.pods.deletePod('e2e')

    const second = w.manager()
    await second.plugin.syncDriverObjects()
    if (podStays) {
      await second.m.waitForAttachAndMount(w.pod, { timeoutMs: 30_000 })
      expect(kernelMounts(w.root)).toEqual(w.mapped())
      expect(await w.loops()).toHaveLength(1)
      w.pods.deletePod('e2e')
      await second.m.waitForUnmount(w.pod, { timeoutMs: 30_000 })
    }
    await until(async () => kernelMounts(w.root).length === 0 && (await w.loops()).length === 0)
    await until(async () => (await w.host.lstat(`${w.devices}/pv-raw`)) === null)
    expect(await w.host.lstat(`${w.devices}/staging/pv-raw`)).toBeNull()
    await second.kill()
  })
})
