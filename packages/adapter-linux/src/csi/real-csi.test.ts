/**
 * The volume manager on the real kernel with the real CSI hostpath driver (csi-driver-host-path's
 * `hostpathplugin`) registered through the real `csi-node-driver-registrar`, as a kubelet node runs
 * them: the registrar's socket in `<root>/plugins_registry`, kubevol's plugin watcher, the gRPC
 * client. Volumes are created through the driver's Controller service (as an external-provisioner
 * would), then staged, published, expanded, unpublished and unstaged by kubevol; each step is checked
 * against the kernel's mount table and the driver's own state. The binaries come from
 * `KUBEVOL_ENVTEST_ASSETS` (test/real-csi.ts); restarts and kills are in real-csi-failures.test.ts.
 */
import { closeSync, existsSync, openSync, readFileSync, readlinkSync, readSync, statSync, writeFileSync, writeSync } from 'node:fs'
import { execFileSync } from 'node:child_process'
import type { Pod } from '@kubevol/core'
import { buildPod, sha256Hex } from '@kubevol/core/testing'
import { expect, it } from 'vitest'
import { describeWithRealCsi } from '../../test/real-csi.js'
import { CSI_DIR, DRIVER, MiB, mountsUnder, until, useRealCsiNode } from '../../test/real-csi-node.js'

/** The loop devices backed by `file` (`losetup -j`, as the driver finds them). */
const loopsOf = (file: string): string[] =>
  execFileSync('losetup', ['-j', file], { encoding: 'utf8' })
    .split('\n')
    .filter(Boolean)
    .map((line) => line.split(':')[0] as string)

describeWithRealCsi('the volume manager with the real CSI hostpath driver and node-driver-registrar', (assets) => {
  const node = useRealCsiNode(assets)

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

  it('a registration kubevol refuses (NodeGetInfo fails: the driver died after its registrar started) is told to the registrar, which exits 1 as with the kubelet; its socket left behind is retried, and the restarted pair registers', async () => {
    const n = await node({ registered: false })
    await n.stopKubevol()
    await n.startRegistrar()
    await n.driver().stop('SIGKILL')
    await n.startKubevol({ registered: false })
    await until('the registrar exited', () => !n.registrar().running())
    expect(n.registrar().exit()).toEqual({ code: 1, signal: null })
    const log = readFileSync(n.registrar().logFile, 'utf8')
    expect(log).toMatch(/Received NotifyRegistrationStatus call.*PluginRegistered:false/)
    expect(log).toContain('NodeGetInfo of driver hostpath.csi.k8s.io failed')
    expect(log).toContain('Registration process failed with error, restarting registration container')
    expect(n.registry.get(DRIVER)).toBeUndefined()
    // os.Exit leaves its socket; the watcher keeps trying it and registers the restarted pair.
    expect(existsSync(`${n.registrationDir}/${DRIVER}-reg.sock`)).toBe(true)
    await n.startDriver()
    await n.startRegistrar()
    await until('registered', () => n.registry.get(DRIVER) !== undefined)
    const { volume } = await n.claim('after', 8 * MiB, 'Filesystem')
    const pod: Pod = buildPod({ uid: 'after-pod', volumes: [{ name: 'after', persistentVolumeClaim: { claimName: 'after' } }] })
    n.pods.setPod(pod)
    await n.manager.waitForAttachAndMount(pod, { timeoutMs: 30_000 })
    await n.removePod(pod, volume.volumeId)
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
    await n.removePod(pod, volume.volumeId)
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

  it('a ReadWriteOncePod claim: published SINGLE_NODE_SINGLE_WRITER; a second pod is refused before the driver is asked, with the kubelet text, and set up once the first is gone', async () => {
    const n = await node()
    const { volume } = await n.claim('solo', 8 * MiB, 'Filesystem', ['ReadWriteOncePod'])
    const first: Pod = buildPod({ uid: 'solo-1', volumes: [{ name: 'solo', persistentVolumeClaim: { claimName: 'solo' } }] })
    const second: Pod = buildPod({ uid: 'solo-2', volumes: [{ name: 'solo', persistentVolumeClaim: { claimName: 'solo' } }] })
    n.pods.setPod(first)
    await n.manager.waitForAttachAndMount(first, { timeoutMs: 30_000 })
    expect(n.requests('NodePublishVolume').at(-1)?.volume_capability).toEqual({ mount: {}, access_mode: { mode: 'SINGLE_NODE_SINGLE_WRITER' } })
    n.pods.setPod(second)
    const refused = 'MountVolume.SetUp failed for volume "pv-solo" : volume uses the ReadWriteOncePod access mode and is already in use by another pod'
    await until('the second pod refused', () => n.events.some((e) => e.reason === 'FailedMount' && e.message === refused))
    // The driver would refuse too (FailedPrecondition: mounted at a different target path); it is not asked.
    expect(n.calls().filter((c) => c === 'NodePublishVolume')).toHaveLength(1)
    expect(mountsUnder(n.root)).toEqual([n.target('solo-1', 'pv-solo')])

    n.pods.deletePod('solo-1')
    await n.manager.waitForUnmount(first, { timeoutMs: 30_000 })
    await n.manager.waitForAttachAndMount(second, { timeoutMs: 30_000 })
    expect(mountsUnder(n.root)).toEqual([n.target('solo-2', 'pv-solo')])
    expect(n.driverVolume(volume.volumeId)?.Published).toEqual([n.target('solo-2', 'pv-solo')])
    await n.removePod(second, volume.volumeId)
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
    await n.removePod(pod, volume.volumeId)
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
    await n.removePod(pod, volume.volumeId)
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
    const { volume } = await n.claim('grow', 8 * MiB, 'Filesystem')
    const pod: Pod = buildPod({ uid: 'grow-pod', volumes: [{ name: 'grow', persistentVolumeClaim: { claimName: 'grow' } }] })
    n.pods.setPod(pod)
    await n.manager.waitForAttachAndMount(pod, { timeoutMs: 30_000 })
    expect(n.calls()).not.toContain('NodeExpandVolume')

    expect(await n.expandClaim('grow', 16 * MiB)).toEqual({ capacityBytes: 16 * MiB, nodeExpansionRequired: true })
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

    await n.removePod(pod, volume.volumeId)
  })

  it('a raw block volume grown in use: NodeExpandVolume on the published device, the claim records the new capacity', async () => {
    const n = await node()
    const { volume } = await n.claim('rawgrow', 8 * MiB, 'Block')
    const pod: Pod = buildPod({ uid: 'rawgrow-pod', volumes: [{ name: 'rawgrow', persistentVolumeClaim: { claimName: 'rawgrow' } }], devices: ['rawgrow'] })
    n.pods.setPod(pod)
    await n.manager.waitForAttachAndMount(pod, { timeoutMs: 30_000 })
    expect(await n.expandClaim('rawgrow', 16 * MiB)).toEqual({ capacityBytes: 16 * MiB, nodeExpansionRequired: true })
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

    await n.removePod(pod, volume.volumeId)
  })
})
