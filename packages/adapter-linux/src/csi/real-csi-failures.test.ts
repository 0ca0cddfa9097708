/**
 * The real CSI hostpath driver and node-driver-registrar when things go wrong: kubevol restarted with
 * volumes set up (registration and reconstruction anew), the driver and its registrar restarted, and
 * the driver SIGKILLed in the middle of NodePublishVolume (before its mount(8), and after it but
 * before it recorded the publish). What the kubelet would do is the measure; where kubevol does
 * otherwise the test says why. The binaries come from `KUBEVOL_ENVTEST_ASSETS` (test/real-csi.ts).
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { execFileSync } from 'node:child_process'
import type { Pod } from '@kubevol/core'
import { buildPod, sha256Hex } from '@kubevol/core/testing'
import { expect, it } from 'vitest'
import { describeWithRealCsi } from '../../test/real-csi.js'
import { CSI_DIR, DRIVER, MiB, mountsUnder, until, useRealCsiNode } from '../../test/real-csi-node.js'

describeWithRealCsi('the real CSI hostpath driver restarted and killed', (assets) => {
  const node = useRealCsiNode(assets)

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

    await n.removePod(pod, fs.volume.volumeId, blk.volume.volumeId)
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
    await n.removePod(second, volume.volumeId)
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

    await n.removePod(pod, volume.volumeId)
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
