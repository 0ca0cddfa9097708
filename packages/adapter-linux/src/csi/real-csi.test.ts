/**
 * The volume manager on the real kernel with the real CSI hostpath driver (csi-driver-host-path's
 * `hostpathplugin`) registered through the real `csi-node-driver-registrar`, as a kubelet node runs
 * them: the registrar's socket in `<root>/plugins_registry`, kubevol's plugin watcher, the gRPC
 * client. Volumes are created through the driver's controller service (CreateVolume, as an
 * external-provisioner would), then staged, published, expanded, unpublished and unstaged by
 * kubevol; the driver is restarted and SIGKILLed in the middle of NodePublishVolume. csi-sanity
 * checks the reference driver (and so this harness), and the Identity service of kubevol's own
 * example driver. The binaries come from `KUBEVOL_ENVTEST_ASSETS` (test/real-csi.ts).
 */
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, readlinkSync, readSync, rmSync, statSync, writeFileSync, writeSync } from 'node:fs'
import { execFileSync } from 'node:child_process'
import { delimiter, join } from 'node:path'
import { createMemoryObjectReader, createMemoryPodSource, createVolumeManager, type Pod, type VolumeEvent } from '@kubevol/core'
import { createCsiDriverRegistry, createCsiPlugin } from '@kubevol/core/plugins'
import { buildClaim, buildPod, sha256Hex } from '@kubevol/core/testing'
import { afterEach, expect, it } from 'vitest'
import { useLinuxHost } from '../../test/harness.js'
import {
  type ControllerClient,
  createControllerClient,
  describeWithRealCsi,
  grpcCalls,
  type RealProcess,
  startHostpathPlugin,
  startProcess,
  startRegistrar,
} from '../../test/real-csi.js'
import { parseMountInfo } from '../mountinfo.js'
import { startPluginWatcher } from './plugin-watcher.js'
// The reference driver of examples/csi-hostpath-driver: a workspace package, not a declared dependency, since it depends on this one.
import { startHostpathCsiDriver } from '@kubevol/example-csi-hostpath-driver'

const DRIVER = 'hostpath.csi.k8s.io'
const MiB = 1 << 20
const CSI_DIR = 'kubernetes.io~csi'

const mountsUnder = (prefix: string): string[] =>
  parseMountInfo(readFileSync('/proc/self/mountinfo', 'utf8'))
    .map((e) => e.target)
    .filter((t) => t.startsWith(`${prefix}/`))
    .sort()

async function until(what: string, check: () => boolean | Promise<boolean>, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not reached in ${ms} ms: ${what}`)
    await new Promise((r) => setTimeout(r, 25))
  }
}

/** The loop devices backed by `file` (`losetup -j`, as the driver finds them). */
const loopsOf = (file: string): string[] =>
  execFileSync('losetup', ['-j', file], { encoding: 'utf8' })
    .split('\n')
    .filter(Boolean)
    .map((line) => line.split(':')[0] as string)

/** The first `name` on PATH. */
function onPath(name: string): string {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) if (dir && existsSync(join(dir, name))) return join(dir, name)
  throw new Error(`${name} is not on PATH`)
}

/** One volume of the driver's state.json (Go field names). */
interface DriverVolume {
  VolID: string
  VolName: string
  VolSize: number
  VolPath: string
  Ephemeral: boolean
  Staged: string[] | null
  Published: string[] | null
}

describeWithRealCsi('the volume manager with the real CSI hostpath driver and node-driver-registrar', (assets) => {
  const h = useLinuxHost()
  const stops: (() => Promise<void> | void)[] = []
  afterEach(async () => {
    for (const stop of stops.splice(0).reverse()) await stop()
  })

  /** `registered: false`: the registrar is not started (the test starts it with `startRegistrar`). */
  async function node(o: { registered?: boolean } = {}) {
    const { host, p } = h()
    const root = p('kubevol')
    const socket = `${root}/plugins/${DRIVER}/csi.sock`
    const registrationDir = `${root}/plugins_registry`
    const stateDir = p('csi-data-dir')
    mkdirSync(`${root}/plugins/${DRIVER}`, { recursive: true })
    // `mount` as the driver runs it: a bind onto a pod's directory waits while the hold file exists,
    // so that a test can kill the driver in the middle of NodePublishVolume.
    const bin = p('bin')
    const hold = p('hold-publish')
    mkdirSync(bin)
    writeFileSync(
      `${bin}/mount`,
      [
        '#!/bin/sh',
        // hold: wait before mounting; hold-after: mount, then wait (the driver has not recorded it yet).
        `case "$*" in */pods/*) if [ -e '${hold}' ]; then : > '${hold}.reached'; while [ -e '${hold}' ]; do sleep 0.05; done; fi ;; esac`,
        `case "$*" in */pods/*) if [ -e '${hold}-after' ]; then '${onPath('mount')}' "$@" || exit; : > '${hold}-after.reached'; while [ -e '${hold}-after' ]; do sleep 0.05; done; exit 0; fi ;; esac`,
        `exec '${onPath('mount')}' "$@"`,
        '',
      ].join('\n'),
      { mode: 0o755 },
    )
    let driver: RealProcess | undefined
    let registrar: RealProcess | undefined
    const startDriver = async () => {
      driver = await startHostpathPlugin({ assets, socket, stateDir, driverName: DRIVER, nodeId: 'node-1', logFile: p('hostpathplugin.log'), pathPrefix: bin })
    }
    const startRegistrarProcess = async () => {
      registrar = await startRegistrar({ assets, driverSocket: socket, driverName: DRIVER, registrationDir, logFile: p('registrar.log') })
    }
    stops.push(async () => {
      await registrar?.stop()
      await driver?.stop()
    })
    await startDriver()
    const objects = createMemoryObjectReader()
    // The CSIDriver object csi-driver-host-path deploys (attachRequired: there is no attacher here).
    objects.put('CSIDriver', { metadata: { name: DRIVER }, spec: { attachRequired: false, podInfoOnMount: true, volumeLifecycleModes: ['Persistent', 'Ephemeral'], fsGroupPolicy: 'File' } })
    const pods = createMemoryPodSource()
    const events: VolumeEvent[] = []
    const failures: { name: string; error: string }[] = []

    /** kubevol as an agent runs it: the plugin watcher on plugins_registry and the volume manager. */
    const startKubevol = async () => {
      const registry = createCsiDriverRegistry()
      // The watcher makes plugins_registry (as the kubelet does at start); a registrar binds its socket there.
      const watcher = await startPluginWatcher({ rootDir: root, registry, host, rescanIntervalMs: 500 })
      const plugin = createCsiPlugin({ drivers: registry })
      const manager = createVolumeManager({
        host,
        plugins: [plugin],
        podSource: pods,
        objects,
        nodeName: 'node-1',
        rootDir: root,
        controllerAttachDetach: false,
        recorder: { event: (e) => events.push(e) },
        backoff: { initialMs: 200, maxMs: 2_000 },
        expansionCheckPeriodMs: 200,
      })
      manager.subscribe((e) => {
        if (e.type === 'operation' && e.operation.error) failures.push({ name: e.operation.name, error: e.operation.error })
      })
      const stop = new AbortController()
      const running = manager.run(stop.signal)
      let stopped = false
      const kill = async () => {
        if (stopped) return
        stopped = true
        stop.abort()
        await running
        watcher.stop()
        for (const d of registry.list()) registry.unregister(d.name)
      }
      stops.push(kill)
      return { registry, plugin, manager, kill }
    }
    let kubevol = await startKubevol()
    await kubevol.plugin.syncDriverObjects()
    if (o.registered !== false) {
      await startRegistrarProcess()
      await until('the driver registered through plugins_registry', () => kubevol.registry.get(DRIVER) !== undefined)
    }
    const controller: ControllerClient = createControllerClient(socket)
    stops.push(() => controller.close())

    /** A PV and bound claim for a volume the controller service created. */
    const claim = async (name: string, bytes: number, mode: 'Filesystem' | 'Block') => {
      const volume = await controller.createVolume(`pvc-${name}`, bytes, mode === 'Block' ? 'block' : 'mount')
      const { pvc, pv } = buildClaim({
        claim: name,
        pv: `pv-${name}`,
        capacity: `${bytes / MiB}Mi`,
        volumeMode: mode,
        pvSource: { csi: { driver: DRIVER, volumeHandle: volume.volumeId, volumeAttributes: volume.volumeContext } },
      })
      objects.put('PersistentVolumeClaim', pvc)
      objects.put('PersistentVolume', pv)
      return { volume, pvc, pv }
    }
    // The driver rewrites state.json in place: a read in the middle of a write is read again.
    let lastVolumes: DriverVolume[] = []
    const driverVolumes = (): DriverVolume[] => {
      for (let attempt = 0; attempt < 20; attempt++) {
        try {
          lastVolumes = (JSON.parse(readFileSync(`${stateDir}/state.json`, 'utf8')) as { Volumes: DriverVolume[] | null }).Volumes ?? []
          return lastVolumes
        } catch {}
      }
      return lastVolumes
    }
    const driverVolume = (id: string) => driverVolumes().find((v) => v.VolID === id)
    return {
      host,
      p,
      root,
      socket,
      registrationDir,
      stateDir,
      hold,
      get registry() {
        return kubevol.registry
      },
      get manager() {
        return kubevol.manager
      },
      /** Stops kubevol (mounts stay) and starts it again on the same root: registration and reconstruction anew. */
      async restartKubevol() {
        await kubevol.kill()
        kubevol = await startKubevol()
        await until('the driver registered again', () => kubevol.registry.get(DRIVER) !== undefined)
        await kubevol.plugin.syncDriverObjects()
      },
      objects,
      pods,
      events,
      failures,
      controller,
      claim,
      driverVolume,
      driverVolumes,
      calls: () => grpcCalls(p('hostpathplugin.log')).map((c) => c.method),
      requests: (method: string) => grpcCalls(p('hostpathplugin.log')).filter((c) => c.method === method).map((c) => c.request),
      driver: () => driver as RealProcess,
      registrar: () => registrar as RealProcess,
      startDriver,
      startRegistrar: startRegistrarProcess,
      staging: (volumeHandle: string) => `${root}/plugins/kubernetes.io/csi/${DRIVER}/${sha256Hex(volumeHandle)}/globalmount`,
      target: (uid: string, volume: string) => `${root}/pods/${uid}/volumes/${CSI_DIR}/${volume}/mount`,
    }
  }

  it('registers through node-driver-registrar: GetInfo, NodeGetInfo, NotifyRegistrationStatus; unregisters when the registrar stops', async () => {
    const n = await node()
    expect(n.registry.get(DRIVER)?.endpoint).toBe(n.socket)
    expect(n.registry.get(DRIVER)?.versions).toEqual(['1.0.0'])
    await until('the registrar told of the outcome', () => /PluginRegistered:true/.test(readFileSync(n.registrar().logFile, 'utf8')))
    expect(n.calls()).toContain('NodeGetInfo')
    // SIGTERM: the registrar removes its socket, and the watcher the driver.
    await n.registrar().stop()
    expect(existsSync(`${n.registrationDir}/${DRIVER}-reg.sock`)).toBe(false)
    await until('the driver unregistered', () => n.registry.get(DRIVER) === undefined)
  })

  it('a pod whose driver registers after it: the mount fails with the kubelet text meanwhile, and succeeds once node-driver-registrar registers the driver', async () => {
    const n = await node({ registered: false })
    const { volume } = await n.claim('late', 8 * MiB, 'Filesystem')
    const pod: Pod = buildPod({ uid: 'late-pod', volumes: [{ name: 'late', persistentVolumeClaim: { claimName: 'late' } }] })
    n.pods.setPod(pod)
    const notRegistered = `driver name ${DRIVER} not found in the list of registered CSI drivers`
    await until('FailedMount for want of the driver', () => n.events.some((e) => e.reason === 'FailedMount' && e.message.endsWith(notRegistered)))
    expect(n.events.find((e) => e.reason === 'FailedMount')?.message).toBe(
      `MountVolume.MountDevice failed for volume "pv-late" : kubernetes.io/csi: attacher.MountDevice failed to create newCsiDriverClient: ${notRegistered}`,
    )
    expect(mountsUnder(n.root)).toEqual([])
    await n.startRegistrar()
    await n.manager.waitForAttachAndMount(pod, { timeoutMs: 30_000 })
    expect(mountsUnder(n.root)).toEqual([n.target('late-pod', 'pv-late')])
    expect(n.driverVolume(volume.volumeId)).toMatchObject({ Staged: [n.staging(volume.volumeId)], Published: [n.target('late-pod', 'pv-late')] })
    n.pods.deletePod('late-pod')
    await n.manager.waitForUnmount(pod, { timeoutMs: 30_000 })
    await until('unstaged', () => mountsUnder(n.root).length === 0 && n.driverVolume(volume.volumeId)?.Staged?.length === 0)
  })

  it('a filesystem volume: NodeStageVolume, NodePublishVolume of the driver directory into the pod, written through; NodeUnpublishVolume and NodeUnstageVolume when the pod goes', async () => {
    const n = await node()
    const { volume } = await n.claim('data', 8 * MiB, 'Filesystem')
    const pod: Pod = buildPod({ uid: 'fs-pod', volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'data' } }] })
    n.pods.setPod(pod)
    await n.manager.waitForAttachAndMount(pod, { timeoutMs: 30_000 })
    const target = n.target('fs-pod', 'pv-data')
    const staging = n.staging(volume.volumeId)
    // hostpathplugin stages by recording the path (no mount there) and publishes by bind mount.
    expect(mountsUnder(n.root)).toEqual([target])
    expect(n.driverVolume(volume.volumeId)).toMatchObject({ Staged: [staging], Published: [target] })
    const calls = n.calls()
    expect(calls.indexOf('NodeStageVolume')).toBeGreaterThan(-1)
    expect(calls.indexOf('NodeStageVolume')).toBeLessThan(calls.indexOf('NodePublishVolume'))
    writeFileSync(`${target}/rows`, 'rows')
    expect(readFileSync(`${n.stateDir}/${volume.volumeId}/rows`, 'utf8')).toBe('rows')

    n.pods.deletePod('fs-pod')
    await n.manager.waitForUnmount(pod, { timeoutMs: 30_000 })
    await until('unstaged and the directories removed', async () => (await n.host.lstat(staging.replace(/\/globalmount$/, ''))) === null)
    expect(mountsUnder(n.root)).toEqual([])
    expect(n.driverVolume(volume.volumeId)).toMatchObject({ Staged: [], Published: [] })
    expect(n.calls().filter((c) => /^Node(Stage|Unstage|Publish|Unpublish)Volume$/.test(c))).toEqual(['NodeStageVolume', 'NodePublishVolume', 'NodeUnpublishVolume', 'NodeUnstageVolume'])
    expect(await n.host.lstat(`${n.root}/pods/fs-pod/volumes/${CSI_DIR}/pv-data`)).toBeNull()
    expect(readFileSync(`${n.stateDir}/${volume.volumeId}/rows`, 'utf8')).toBe('rows')
    await n.controller.deleteVolume(volume.volumeId)
    expect(existsSync(`${n.stateDir}/${volume.volumeId}`)).toBe(false)
  })

  it("fsGroupPolicy File on a driver without VOLUME_MOUNT_GROUP: the pod's fsGroup is applied to the published volume after NodePublishVolume, as the kubelet's SetVolumeOwnership", async () => {
    const n = await node()
    const { volume } = await n.claim('owned', 8 * MiB, 'Filesystem')
    writeFileSync(`${n.stateDir}/${volume.volumeId}/old`, 'old', { mode: 0o600 })
    const pod: Pod = buildPod({ uid: 'owned-pod', fsGroup: 4321, volumes: [{ name: 'owned', persistentVolumeClaim: { claimName: 'owned' } }] })
    n.pods.setPod(pod)
    await n.manager.waitForAttachAndMount(pod, { timeoutMs: 30_000 })
    const target = n.target('owned-pod', 'pv-owned')
    const publish = n.requests('NodePublishVolume').at(-1)
    // Not delegated to the driver: no volume_mount_group in the request.
    expect(publish?.volume_capability).toEqual({ mount: {}, access_mode: { mode: 'SINGLE_NODE_MULTI_WRITER' } })
    const dir = statSync(target)
    expect(dir.gid).toBe(4321)
    expect(dir.mode & 0o2000).toBe(0o2000)
    const file = statSync(`${target}/old`)
    expect(file.gid).toBe(4321)
    expect(file.mode & 0o060).toBe(0o060)
    n.pods.deletePod('owned-pod')
    await n.manager.waitForUnmount(pod, { timeoutMs: 30_000 })
    await until('unstaged', () => mountsUnder(n.root).length === 0 && n.driverVolume(volume.volumeId)?.Staged?.length === 0)
  })

  it('a claim mounted read-only with mount options on its PV: NodePublishVolume with readonly and the mount flags, and the driver read-only bind refuses writes', async () => {
    const n = await node()
    const { volume, pv } = await n.claim('ro', 8 * MiB, 'Filesystem')
    n.objects.put('PersistentVolume', { ...pv, spec: { ...pv.spec, mountOptions: ['noatime'] } })
    writeFileSync(`${n.stateDir}/${volume.volumeId}/seed`, 'seed')
    const pod: Pod = buildPod({ uid: 'ro-pod', volumes: [{ name: 'ro', persistentVolumeClaim: { claimName: 'ro', readOnly: true } }] })
    n.pods.setPod(pod)
    await n.manager.waitForAttachAndMount(pod, { timeoutMs: 30_000 })
    const target = n.target('ro-pod', 'pv-ro')
    expect(n.requests('NodeStageVolume').at(-1)?.volume_capability).toEqual({ mount: { mount_flags: ['noatime'] }, access_mode: { mode: 'SINGLE_NODE_MULTI_WRITER' } })
    expect(n.requests('NodePublishVolume').at(-1)).toMatchObject({ readonly: true, volume_capability: { mount: { mount_flags: ['noatime'] } } })
    expect(readFileSync(`${target}/seed`, 'utf8')).toBe('seed')
    expect(() => writeFileSync(`${target}/new`, 'x')).toThrow(/EROFS/)
    n.pods.deletePod('ro-pod')
    await n.manager.waitForUnmount(pod, { timeoutMs: 30_000 })
    await until('unstaged', () => mountsUnder(n.root).length === 0 && n.driverVolume(volume.volumeId)?.Staged?.length === 0)
  })

  it('a raw block volume: the driver loop device staged, published onto a file, linked into the pod and written through; unmapped in reverse', async () => {
    const n = await node()
    const { volume } = await n.claim('raw', 16 * MiB, 'Block')
    const image = `${n.stateDir}/${volume.volumeId}`
    // CreateVolume attached the image to a loop device; DeleteVolume detaches it.
    expect(loopsOf(image)).toHaveLength(1)
    const pod: Pod = buildPod({ uid: 'blk-pod', volumes: [{ name: 'raw', persistentVolumeClaim: { claimName: 'raw' } }], devices: ['raw'] })
    n.pods.setPod(pod)
    await n.manager.waitForAttachAndMount(pod, { timeoutMs: 30_000 })
    const devices = `${n.root}/plugins/kubernetes.io/csi/volumeDevices`
    const publish = `${devices}/publish/pv-raw/blk-pod`
    const link = `${n.root}/pods/blk-pod/volumeDevices/${CSI_DIR}/pv-raw`
    expect(mountsUnder(n.root)).toEqual([publish, `${devices}/pv-raw/dev/blk-pod`].sort())
    expect(n.driverVolume(volume.volumeId)).toMatchObject({ Staged: [`${devices}/staging/pv-raw`], Published: [publish] })
    expect(readlinkSync(link)).toBe(publish)
    expect(statSync(link).isBlockDevice()).toBe(true)
    const fd = openSync(link, 'r+')
    writeSync(fd, Buffer.from('raw bytes'), 0, 9, 8192)
    closeSync(fd)

    n.pods.deletePod('blk-pod')
    await n.manager.waitForUnmount(pod, { timeoutMs: 30_000 })
    await until('unmapped and unstaged', async () => mountsUnder(n.root).length === 0 && (await n.host.lstat(`${devices}/pv-raw`)) === null)
    expect(n.driverVolume(volume.volumeId)).toMatchObject({ Staged: [], Published: [] })
    expect(await n.host.lstat(link)).toBeNull()
    expect(await n.host.lstat(`${devices}/staging/pv-raw`)).toBeNull()
    execFileSync('sync')
    const check = Buffer.alloc(9)
    const img = openSync(image, 'r')
    readSync(img, check, 0, 9, 8192)
    closeSync(img)
    expect(check.toString()).toBe('raw bytes')
    await n.controller.deleteVolume(volume.volumeId)
    expect(loopsOf(image)).toEqual([])
  })

  it('an inline ephemeral volume: published with csi.storage.k8s.io/ephemeral=true, so the driver creates it, and deleted by NodeUnpublishVolume with the pod', async () => {
    const n = await node()
    const pod: Pod = buildPod({ uid: 'eph-pod', volumes: [{ name: 'scratch', csi: { driver: DRIVER } }] })
    n.pods.setPod(pod)
    await n.manager.waitForAttachAndMount(pod, { timeoutMs: 30_000 })
    const handle = `csi-${sha256Hex('eph-podscratch')}`
    const target = n.target('eph-pod', 'scratch')
    expect(mountsUnder(n.root)).toEqual([target])
    expect(n.driverVolume(handle)).toMatchObject({ VolName: `ephemeral-${handle}`, Ephemeral: true, Published: [target] })
    // Never staged: an inline volume is published directly.
    expect(n.calls()).not.toContain('NodeStageVolume')
    writeFileSync(`${target}/tmp`, 'scratch')
    expect(readFileSync(`${n.stateDir}/${handle}/tmp`, 'utf8')).toBe('scratch')

    n.pods.deletePod('eph-pod')
    await n.manager.waitForUnmount(pod, { timeoutMs: 30_000 })
    await until('the pod volume directory removed', async () => (await n.host.lstat(`${n.root}/pods/eph-pod/volumes/${CSI_DIR}/scratch`)) === null)
    expect(mountsUnder(n.root)).toEqual([])
    expect(n.driverVolume(handle)).toBeUndefined()
    expect(existsSync(`${n.stateDir}/${handle}`)).toBe(false)
  })

  it('a volume grown by ControllerExpandVolume is expanded on the node in use (NodeExpandVolume on the pod path) and the claim records the new capacity', async () => {
    const n = await node()
    const { volume, pvc, pv } = await n.claim('grow', 8 * MiB, 'Filesystem')
    const pod: Pod = buildPod({ uid: 'grow-pod', volumes: [{ name: 'grow', persistentVolumeClaim: { claimName: 'grow' } }] })
    n.pods.setPod(pod)
    await n.manager.waitForAttachAndMount(pod, { timeoutMs: 30_000 })
    expect(n.calls()).not.toContain('NodeExpandVolume')

    // What external-resizer does: ControllerExpandVolume, then the PV's capacity and the claim's status.
    const grown = await n.controller.expandVolume(volume.volumeId, 16 * MiB, 'mount')
    expect(grown).toEqual({ capacityBytes: 16 * MiB, nodeExpansionRequired: true })
    n.objects.put('PersistentVolume', { ...pv, spec: { ...pv.spec, capacity: { storage: '16Mi' } } })
    n.objects.put('PersistentVolumeClaim', {
      ...pvc,
      spec: { ...pvc.spec, resources: { requests: { storage: '16Mi' } } },
      status: { ...pvc.status, allocatedResources: { storage: '16Mi' }, allocatedResourceStatuses: { storage: 'NodeResizePending' } },
    })
    await until('NodeExpandVolume called', () => n.calls().includes('NodeExpandVolume'))
    const [request] = n.requests('NodeExpandVolume')
    expect(request).toMatchObject({
      volume_id: volume.volumeId,
      volume_path: n.target('grow-pod', 'pv-grow'),
      staging_target_path: n.staging(volume.volumeId),
      capacity_range: { required_bytes: 16 * MiB },
    })
    await until('the claim records 16Mi', async () => (await n.objects.getPersistentVolumeClaim('default', 'grow')).status?.capacity?.storage === '16Mi')
    const status = (await n.objects.getPersistentVolumeClaim('default', 'grow')).status
    expect(status?.allocatedResourceStatuses?.storage).toBeUndefined()
    expect(n.calls().filter((c) => c === 'NodeExpandVolume')).toHaveLength(1)
    expect(n.events.filter((e) => e.type === 'Warning')).toEqual([])

    n.pods.deletePod('grow-pod')
    await n.manager.waitForUnmount(pod, { timeoutMs: 30_000 })
    await until('nothing mounted', () => mountsUnder(n.root).length === 0)
    await until('unstaged', () => n.driverVolume(volume.volumeId)?.Staged?.length === 0)
  })

  it('a raw block volume grown in use: NodeExpandVolume on the published device, the claim records the new capacity', async () => {
    const n = await node()
    const { volume, pvc, pv } = await n.claim('rawgrow', 8 * MiB, 'Block')
    const pod: Pod = buildPod({ uid: 'rawgrow-pod', volumes: [{ name: 'rawgrow', persistentVolumeClaim: { claimName: 'rawgrow' } }], devices: ['rawgrow'] })
    n.pods.setPod(pod)
    await n.manager.waitForAttachAndMount(pod, { timeoutMs: 30_000 })
    await n.controller.expandVolume(volume.volumeId, 16 * MiB, 'block')
    n.objects.put('PersistentVolume', { ...pv, spec: { ...pv.spec, capacity: { storage: '16Mi' } } })
    n.objects.put('PersistentVolumeClaim', {
      ...pvc,
      spec: { ...pvc.spec, resources: { requests: { storage: '16Mi' } } },
      status: { ...pvc.status, allocatedResources: { storage: '16Mi' }, allocatedResourceStatuses: { storage: 'NodeResizePending' } },
    })
    await until('NodeExpandVolume called', () => n.calls().includes('NodeExpandVolume'))
    const devices = `${n.root}/plugins/kubernetes.io/csi/volumeDevices`
    // The kubelet's volume_path of a block volume is its device path: the published device file.
    expect(n.requests('NodeExpandVolume')).toEqual([
      {
        volume_id: volume.volumeId,
        volume_path: `${devices}/publish/pv-rawgrow/rawgrow-pod`,
        staging_target_path: `${devices}/staging/pv-rawgrow`,
        capacity_range: { required_bytes: 16 * MiB },
        volume_capability: { access_mode: { mode: 'SINGLE_NODE_MULTI_WRITER' }, block: {} },
      },
    ])
    await until('the claim records 16Mi', async () => (await n.objects.getPersistentVolumeClaim('default', 'rawgrow')).status?.capacity?.storage === '16Mi')
    expect(n.events.filter((e) => e.type === 'Warning')).toEqual([])
    expect(n.events.map((e) => e.message)).toContain('MountVolume.NodeExpandVolume succeeded for volume "pv-rawgrow" node-1')

    n.pods.deletePod('rawgrow-pod')
    await n.manager.waitForUnmount(pod, { timeoutMs: 30_000 })
    await until('unmapped and unstaged', () => mountsUnder(n.root).length === 0 && n.driverVolume(volume.volumeId)?.Staged?.length === 0)
  })

  it('kubevol restarted with a filesystem, a raw block and an inline volume set up: the driver registered again from its socket, the volumes reconstructed and kept, their statistics read, and all torn down with the pod', async () => {
    const n = await node()
    const fs = await n.claim('files', 8 * MiB, 'Filesystem')
    const blk = await n.claim('disk', 8 * MiB, 'Block')
    const pod: Pod = buildPod({
      uid: 'kept',
      volumes: [
        { name: 'files', persistentVolumeClaim: { claimName: 'files' } },
        { name: 'disk', persistentVolumeClaim: { claimName: 'disk' } },
        { name: 'scratch', csi: { driver: DRIVER } },
      ],
      devices: ['disk'],
    })
    n.pods.setPod(pod)
    await n.manager.waitForAttachAndMount(pod, { timeoutMs: 30_000 })
    const mounted = mountsUnder(n.root)
    expect(mounted).toHaveLength(4)
    writeFileSync(`${n.target('kept', 'pv-files')}/rows`, 'rows')
    const published = n.calls().filter((c) => c === 'NodePublishVolume').length

    await n.restartKubevol()
    await n.manager.waitForAttachAndMount(pod, { timeoutMs: 30_000 })
    // The same mounts, none doubled: a publish again is answered from what is mounted.
    expect(mountsUnder(n.root)).toEqual(mounted)
    expect(n.calls().filter((c) => c === 'NodePublishVolume').length).toBeGreaterThanOrEqual(published)
    expect(readFileSync(`${n.target('kept', 'pv-files')}/rows`, 'utf8')).toBe('rows')
    expect([...n.manager.getMountedVolumesForPod(pod).keys()].sort()).toEqual(['disk', 'files', 'scratch'])

    const stats = await n.manager.collectVolumeStats()
    expect(stats.length).toBeGreaterThan(0)
    const asked = n.requests('NodeGetVolumeStats')
    expect(asked.map((r) => r.volume_path)).toContain(n.target('kept', 'pv-files'))
    expect(asked.find((r) => r.volume_path === n.target('kept', 'pv-files'))).toMatchObject({ volume_id: fs.volume.volumeId, staging_target_path: n.staging(fs.volume.volumeId) })

    n.pods.deletePod('kept')
    await n.manager.waitForUnmount(pod, { timeoutMs: 30_000 })
    await until('all unpublished and unstaged', () => mountsUnder(n.root).length === 0 && n.driverVolume(fs.volume.volumeId)?.Staged?.length === 0 && n.driverVolume(blk.volume.volumeId)?.Staged?.length === 0)
    expect(n.driverVolume(`csi-${sha256Hex('keptscratch')}`)).toBeUndefined()
    for (const name of ['pv-files', 'scratch']) expect(await n.host.lstat(`${n.root}/pods/kept/volumes/${CSI_DIR}/${name}`)).toBeNull()
    expect(await n.host.lstat(`${n.root}/pods/kept/volumeDevices/${CSI_DIR}/pv-disk`)).toBeNull()
    // The pod's directory goes with the orphan clean-up (the kubelet's housekeeping), nothing mounted in it.
    await n.manager.cleanupOrphanedPods()
    expect(await n.host.lstat(`${n.root}/pods/kept`)).toBeNull()
    expect(readFileSync(`${n.stateDir}/${fs.volume.volumeId}/rows`, 'utf8')).toBe('rows')
  })

  it('the driver restarted with its registrar: the driver is unregistered meanwhile (a pod going away waits with a clear error), registered again, and both pods are served', async () => {
    const n = await node()
    const { volume } = await n.claim('keep', 8 * MiB, 'Filesystem')
    const first: Pod = buildPod({ uid: 'before', volumes: [{ name: 'keep', persistentVolumeClaim: { claimName: 'keep' } }] })
    n.pods.setPod(first)
    await n.manager.waitForAttachAndMount(first, { timeoutMs: 30_000 })

    await n.registrar().stop()
    await n.driver().stop()
    await until('the driver unregistered', () => n.registry.get(DRIVER) === undefined)
    n.pods.deletePod('before')
    await until('the unmount failed for want of the driver', () => n.failures.some((f) => /not found in the list of registered CSI drivers/.test(f.error)))
    const failed = n.failures.find((f) => /not found in the list of registered CSI drivers/.test(f.error))
    expect(failed?.error).toContain(`driver name ${DRIVER} not found in the list of registered CSI drivers`)
    // Nothing was unmounted or removed without the driver.
    expect(mountsUnder(n.root)).toEqual([n.target('before', 'pv-keep')])
    expect(n.manager.hasPossiblyMountedVolumesForPod('before')).toBe(true)

    await n.startDriver()
    await n.startRegistrar()
    await until('registered again', () => n.registry.get(DRIVER) !== undefined)
    await n.manager.waitForUnmount(first, { timeoutMs: 30_000 })
    await until('unstaged', () => n.driverVolume(volume.volumeId)?.Staged?.length === 0)
    expect(mountsUnder(n.root)).toEqual([])

    const second: Pod = buildPod({ uid: 'after', volumes: [{ name: 'keep', persistentVolumeClaim: { claimName: 'keep' } }] })
    n.pods.setPod(second)
    await n.manager.waitForAttachAndMount(second, { timeoutMs: 30_000 })
    expect(mountsUnder(n.root)).toEqual([n.target('after', 'pv-keep')])
    n.pods.deletePod('after')
    await n.manager.waitForUnmount(second, { timeoutMs: 30_000 })
    await until('unstaged again', () => n.driverVolume(volume.volumeId)?.Staged?.length === 0)
    expect(mountsUnder(n.root)).toEqual([])
  })

  it('the driver SIGKILLed in the middle of NodePublishVolume: the mount fails with Unavailable, is retried, and completes once the driver is back; nothing lost or left mounted after the pod goes', async () => {
    const n = await node()
    const { volume } = await n.claim('kill', 8 * MiB, 'Filesystem')
    writeFileSync(`${n.stateDir}/${volume.volumeId}/before`, 'kept')
    const pod: Pod = buildPod({ uid: 'kill-pod', volumes: [{ name: 'kill', persistentVolumeClaim: { claimName: 'kill' } }] })
    writeFileSync(n.hold, '')
    n.pods.setPod(pod)
    await until('NodePublishVolume reached mount(8)', () => existsSync(`${n.hold}.reached`))
    const killed = n.driver()
    await killed.stop('SIGKILL')
    rmSync(n.hold)
    const target = n.target('kill-pod', 'pv-kill')
    await until('the failure reported', () => n.events.some((e) => e.reason === 'FailedMount'))
    const failure = n.events.find((e) => e.reason === 'FailedMount')
    expect(failure?.message).toMatch(/Unavailable/)
    expect(mountsUnder(n.root)).toEqual([])
    // The registrar stayed: kubevol keeps the driver registered and reaches the new process on the same socket.
    expect(n.registry.get(DRIVER)).toBeDefined()

    await n.startDriver()
    await n.manager.waitForAttachAndMount(pod, { timeoutMs: 30_000 })
    expect(mountsUnder(n.root)).toEqual([target])
    expect(readFileSync(`${target}/before`, 'utf8')).toBe('kept')
    writeFileSync(`${target}/after`, 'written')
    expect(n.driverVolume(volume.volumeId)).toMatchObject({ Staged: [n.staging(volume.volumeId)], Published: [target] })

    n.pods.deletePod('kill-pod')
    await n.manager.waitForUnmount(pod, { timeoutMs: 30_000 })
    await until('unstaged', () => n.driverVolume(volume.volumeId)?.Staged?.length === 0)
    expect(mountsUnder(n.root)).toEqual([])
    expect(n.driverVolume(volume.volumeId)?.Published).toEqual([])
    expect(await n.host.lstat(`${n.root}/pods/kill-pod/volumes/${CSI_DIR}/pv-kill`)).toBeNull()
    expect(readFileSync(`${n.stateDir}/${volume.volumeId}/before`, 'utf8')).toBe('kept')
    expect(readFileSync(`${n.stateDir}/${volume.volumeId}/after`, 'utf8')).toBe('written')
  })

  it('the driver SIGKILLed in the middle of NodePublishVolume and the pod deleted while it is down: the uncertain mount is unpublished and unstaged once the driver is back', async () => {
    const n = await node()
    const { volume } = await n.claim('gone', 8 * MiB, 'Filesystem')
    writeFileSync(`${n.stateDir}/${volume.volumeId}/before`, 'kept')
    const pod: Pod = buildPod({ uid: 'gone-pod', volumes: [{ name: 'gone', persistentVolumeClaim: { claimName: 'gone' } }] })
    writeFileSync(n.hold, '')
    n.pods.setPod(pod)
    await until('NodePublishVolume reached mount(8)', () => existsSync(`${n.hold}.reached`))
    await n.driver().stop('SIGKILL')
    rmSync(n.hold)
    await until('the failure reported', () => n.events.some((e) => e.reason === 'FailedMount'))
    n.pods.deletePod('gone-pod')
    // The publish may have happened: the kubelet tears an uncertain mount down with NodeUnpublishVolume,
    // which fails while the driver is away; nothing is removed meanwhile.
    await until('NodeUnpublishVolume attempted without the driver', () => n.failures.some((f) => /TearDown|Unpublish/.test(f.error) && /Unavailable/.test(f.error)))
    const dir = `${n.root}/pods/gone-pod/volumes/${CSI_DIR}/pv-gone`
    expect(JSON.parse(readFileSync(`${dir}/vol_data.json`, 'utf8'))).toMatchObject({ driverName: DRIVER, volumeHandle: volume.volumeId })

    await n.startDriver()
    await until('unpublished and unstaged', async () => n.driverVolume(volume.volumeId)?.Staged?.length === 0 && (await n.host.lstat(dir)) === null)
    expect(mountsUnder(n.root)).toEqual([])
    expect(n.calls().filter((c) => /^Node(Stage|Unstage|Publish|Unpublish)Volume$/.test(c))).toEqual(['NodeStageVolume', 'NodePublishVolume', 'NodeUnpublishVolume', 'NodeUnstageVolume'])
    expect(n.manager.hasPossiblyMountedVolumesForPod('gone-pod')).toBe(false)
    expect(readFileSync(`${n.stateDir}/${volume.volumeId}/before`, 'utf8')).toBe('kept')
  })

  // hostpathplugin records a publish after its mount(8): killed in between, it answers the next
  // NodePublishVolume from the mount table without recording it, and NodeUnpublishVolume then says
  // "not published, nothing to do" and leaves the mount. The kubelet's removeMountDir skips a mounted
  // directory without an error and forgets the volume (the mount leaks, the pod directory stays);
  // kubevol removes nothing either but keeps the tear-down failing with the reason, and finishes it,
  // NodeUnstageVolume included, once the mount is gone.
  it('the driver SIGKILLed after its mount(8), before it recorded the publish: the tear-down it answers without unmounting fails with the reason, nothing is removed through the mount, and it completes once the mount is gone', async () => {
    const n = await node()
    const { volume } = await n.claim('win', 8 * MiB, 'Filesystem')
    const pod: Pod = buildPod({ uid: 'win-pod', volumes: [{ name: 'win', persistentVolumeClaim: { claimName: 'win' } }] })
    writeFileSync(`${n.hold}-after`, '')
    n.pods.setPod(pod)
    await until('mounted by the driver', () => existsSync(`${n.hold}-after.reached`))
    await n.driver().stop('SIGKILL')
    rmSync(`${n.hold}-after`)
    await n.startDriver()
    await n.manager.waitForAttachAndMount(pod, { timeoutMs: 30_000 })
    const target = n.target('win-pod', 'pv-win')
    expect(mountsUnder(n.root)).toEqual([target])
    expect(n.driverVolume(volume.volumeId)?.Published ?? []).toEqual([])
    writeFileSync(`${target}/rows`, 'rows')

    n.pods.deletePod('win-pod')
    const stillMounted = `${target} is still mounted`
    await until('the tear-down failed with the reason', () => n.failures.some((f) => f.name === 'volume_unmount' && f.error.endsWith(stillMounted)))
    expect(n.failures.find((f) => f.error.endsWith(stillMounted))?.error).toMatch(/^UnmountVolume\.TearDown failed for volume "win" \(UniqueName: "kubernetes\.io\/csi\/hostpath\.csi\.k8s\.io\^/)
    expect(mountsUnder(n.root)).toEqual([target])
    expect(readFileSync(`${target}/rows`, 'utf8')).toBe('rows')
    expect(existsSync(`${target}/../vol_data.json`)).toBe(true)
    expect(n.manager.hasPossiblyMountedVolumesForPod('win-pod')).toBe(true)
    expect(n.calls()).not.toContain('NodeUnstageVolume')

    // What an operator does about the driver's leak; kubevol's next attempt finishes the job.
    execFileSync('umount', [target])
    await n.manager.waitForUnmount(pod, { timeoutMs: 30_000 })
    await until('unstaged', () => n.driverVolume(volume.volumeId)?.Staged?.length === 0)
    expect(mountsUnder(n.root)).toEqual([])
    expect(await n.host.lstat(`${n.root}/pods/win-pod/volumes/${CSI_DIR}/pv-win`)).toBeNull()
    expect(readFileSync(`${n.stateDir}/${volume.volumeId}/rows`, 'utf8')).toBe('rows')
  })
})

describeWithRealCsi('csi-sanity', (assets) => {
  const h = useLinuxHost()
  const stops: (() => Promise<void> | void)[] = []
  afterEach(async () => {
    for (const stop of stops.splice(0).reverse()) await stop()
  })

  /** csi-sanity against `socket`; its summary line and output. */
  async function sanity(socket: string, extra: readonly string[] = []): Promise<{ summary: string; output: string; ok: boolean }> {
    const { p } = h()
    const logFile = p('csi-sanity.log')
    const proc = startProcess(
      'csi-sanity',
      join(assets, 'csi-sanity'),
      [
        `--csi.endpoint=${socket}`,
        `--csi.mountdir=${p('sanity-mount')}`,
        `--csi.stagingdir=${p('sanity-staging')}`,
        // Small volumes: hostpathplugin fallocates block volumes (the default is 10 GiB, copied again by each snapshot spec).
        `--csi.testvolumesize=${16 * MiB}`,
        `--csi.testvolumeexpandsize=${32 * MiB}`,
        '--ginkgo.no-color',
        ...extra,
      ],
      { logFile },
    )
    stops.push(() => proc.stop('SIGKILL'))
    await until('csi-sanity finished', () => !proc.running(), 170_000)
    const output = readFileSync(logFile, 'utf8')
    const summary = output.match(/^(SUCCESS|FAIL)! -- .*$/m)?.[0] ?? `no summary; output:\n${output.slice(-4000)}`
    return { summary, output, ok: summary.startsWith('SUCCESS!') }
  }

  it.each([
    { access: 'mount', extra: [] },
    // This ListVolumes spec creates a volume with no capacity; hostpathplugin v1.16.1 then runs
    // `fallocate -l 0M` for a block volume, which fails (a limit of the driver, not of the harness).
    { access: 'block', extra: ['--csi.testvolumeaccesstype=block', '--ginkgo.skip=check the presence of new volumes and absence of deleted ones in the volume list'] },
  ])('passes against the reference hostpath driver ($access volumes)', async ({ extra }) => {
    const { p } = h()
    const socket = p('csi.sock')
    const driver = await startHostpathPlugin({ assets, socket, stateDir: p('csi-data-dir'), driverName: DRIVER, nodeId: 'node-1', logFile: p('hostpathplugin.log') })
    stops.push(() => driver.stop())
    const { summary, ok } = await sanity(socket, extra)
    expect(summary).toMatch(/^SUCCESS! -- \d+ Passed \| 0 Failed/)
    expect(ok).toBe(true)
    expect(Number(summary.match(/(\d+) Passed/)?.[1])).toBeGreaterThanOrEqual(60)
  }, 180_000)

  // The example driver serves Identity and Node only; csi-sanity's Node specs create their volumes
  // through the Controller service first, so only the Identity specs apply to it.
  it('the Identity specs pass against kubevol\'s example driver', async () => {
    const { host, p } = h()
    mkdirSync(p('data'))
    const server = await startHostpathCsiDriver({ host, endpoint: p('csi.sock'), dataDir: p('data'), nodeId: 'node-1' })
    stops.push(() => server.stop())
    const { summary, output } = await sanity(p('csi.sock'), ['--ginkgo.focus=Identity Service'])
    expect(summary, output.slice(-4000)).toMatch(/^SUCCESS! -- [1-9]\d* Passed \| 0 Failed/)
  }, 180_000)
})
