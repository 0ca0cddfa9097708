import type { WaitError } from '@kubevol/core'
import { buildClaim, buildPod, createFakePlugin, createHarness, fakeVolume } from '@kubevol/core/testing'
import { afterEach, describe, expect, it } from 'vitest'
import { podMounts, scenario } from './setup.js'

let current: ReturnType<typeof scenario> | undefined
function start(options: Parameters<typeof scenario>[0] = {}) {
  current = scenario(options)
  current.start()
  return current
}
afterEach(async () => {
  await current?.stop()
  current?.host.assertNoViolations()
  current = undefined
})

describe('the volume manager on the in-memory host', () => {
  it('mounts a pod volume and resolves the wait', async () => {
    const h = start()
    const pod = buildPod({ uid: 'a', volumes: [fakeVolume('data'), fakeVolume('cache')] })
    await h.addPodAndWait(pod)
    expect(podMounts(h.host).sort()).toEqual(['pods/a/volumes/kubevol.io~fake/cache', 'pods/a/volumes/kubevol.io~fake/data'])
    expect([...h.manager.getMountedVolumesForPod('a').keys()].sort()).toEqual(['cache', 'data'])
  })

  it('attaches, mounts the device and binds it into the pod; removal runs in reverse', async () => {
    const h = start({ fake: { attachable: true } })
    const pod = buildPod({ uid: 'a', volumes: [fakeVolume('data', 'disk1')] })
    await h.addPodAndWait(pod)
    expect(h.plugin.attached.get('disk1')).toBe('/dev/fake/disk1')
    expect(podMounts(h.host).sort()).toEqual(['plugins/kubevol.io/fake/mounts/disk1', 'pods/a/volumes/kubevol.io~fake/data'])
    expect(h.manager.getVolumesInUse()).toEqual(['kubevol.io/fake/disk1'])

    h.pods.deletePod('a')
    await h.advanceUntil(() => !h.manager.volumeIsAttached('kubevol.io/fake/disk1'))
    const order = h.operations.filter((o) => o.endedAt !== undefined && !o.error).map((o) => o.name)
    expect(order).toEqual(['volume_attach', 'volume_mount', 'volume_unmount', 'unmount_device', 'volume_detach'])
    expect(h.plugin.attached.size).toBe(0)
    expect(podMounts(h.host)).toEqual([])
    expect(h.host.exists('/var/lib/kubevol/pods/a/volumes/kubevol.io~fake/data')).toBe(false)
    expect(h.manager.getVolumesInUse()).toEqual([])
  })

  it('waitForIdle waits through unmount, unmount device and detach', async () => {
    const h = start({ fake: { attachable: true } })
    await h.addPodAndWait(buildPod({ uid: 'a', volumes: [fakeVolume('data', 'disk1')] }))
    h.pods.deletePod('a')
    await h.manager.waitForIdle()
    expect(h.plugin.attached.size).toBe(0)
    expect(podMounts(h.host)).toEqual([])
  })

  it('serves volumes of two plugins side by side', async () => {
    const other = createFakePlugin({ name: 'example.com/other' })
    const h = start({ plugins: [other] })
    await h.addPodAndWait(buildPod({ uid: 'a', volumes: [fakeVolume('mine'), fakeVolume('theirs', 'theirs', 'example.com/other')] }))
    expect(podMounts(h.host).sort()).toEqual(['pods/a/volumes/example.com~other/theirs', 'pods/a/volumes/kubevol.io~fake/mine'])
  })

  it('keeps a shared device until the last pod using it is gone', async () => {
    const h = start({ fake: { attachable: true } })
    await h.addPodAndWait(buildPod({ uid: 'a', volumes: [fakeVolume('data', 'disk1')] }))
    await h.addPodAndWait(buildPod({ uid: 'b', volumes: [fakeVolume('data', 'disk1')] }))
    h.pods.deletePod('a')
    await h.advanceUntil(() => !h.manager.hasPossiblyMountedVolumesForPod('a'))
    await h.clock.advance(5_000)
    expect(podMounts(h.host).sort()).toEqual(['plugins/kubevol.io/fake/mounts/disk1', 'pods/b/volumes/kubevol.io~fake/data'])
    expect(h.plugin.attached.has('disk1')).toBe(true)
    h.pods.deletePod('b')
    await h.advanceUntil(() => h.plugin.attached.size === 0)
    expect(podMounts(h.host)).toEqual([])
  })

  it('moves a volume from one pod to another without detaching it', async () => {
    const h = start({ fake: { attachable: true } })
    await h.addPodAndWait(buildPod({ uid: 'a', volumes: [fakeVolume('data', 'disk1')] }))
    await h.host.writeFile('/var/lib/kubevol/pods/a/volumes/kubevol.io~fake/data/file', 'kept')
    h.pods.deletePod('a')
    await h.addPodAndWait(buildPod({ uid: 'b', volumes: [fakeVolume('data', 'disk1')] }))
    await h.advanceUntil(() => !h.manager.hasPossiblyMountedVolumesForPod('a'))
    expect(h.operations.some((o) => o.name === 'volume_detach' || o.name === 'unmount_device')).toBe(false)
    expect(new TextDecoder().decode(await h.host.readFile('/var/lib/kubevol/pods/b/volumes/kubevol.io~fake/data/file'))).toBe('kept')
  })

  it('backs off 0.5 s, 1 s, 2 s after failed mounts and then succeeds', async () => {
    const h = start()
    h.plugin.fail('setUp', { times: 3, message: 'disk not ready' })
    const pod = buildPod({ uid: 'a', volumes: [fakeVolume('data')] })
    await h.addPodAndWait(pod)
    const starts = h.operations.filter((o) => o.name === 'volume_mount' && o.endedAt === undefined).map((o) => o.startedAt)
    expect(starts).toHaveLength(4)
    const gaps = starts.slice(1).map((t, i) => t - (starts[i] as number))
    // Each retry starts right when its backoff ends (the timer fires 1 ms after the window).
    expect(gaps.map((g) => Math.round(g / 100) * 100)).toEqual([500, 1000, 2000])
    const failures = h.events.filter((e) => e.reason === 'FailedMount')
    expect(failures).toHaveLength(3)
    expect(failures[0]?.message).toBe('MountVolume.SetUp failed for volume "data" : disk not ready')
  })

  it('unmounts an uncertain mount when its pod is deleted', async () => {
    const h = start()
    h.plugin.fail('setUp', { kind: 'uncertain', message: 'timed out' })
    const pod = buildPod({ uid: 'a', volumes: [fakeVolume('data')] })
    h.pods.setPod(pod)
    await h.advanceUntil(() => h.manager.hasPossiblyMountedVolumesForPod('a'))
    expect(h.manager.actualState.getVolumeMountState('kubevol.io/fake/a-data', 'a')).toBe('uncertain')
    expect(h.manager.getMountedVolumesForPod('a').size).toBe(0)
    h.pods.deletePod('a')
    await h.advanceUntil(() => !h.manager.hasPossiblyMountedVolumesForPod('a'))
    expect(h.operations.some((o) => o.name === 'volume_unmount' && o.endedAt !== undefined && !o.error)).toBe(true)
  })

  it('waits in controller-attach mode until the volume is reported in use and attached in node status', async () => {
    const h = start({ fake: { attachable: true }, controllerAttachDetach: true })
    h.objects.put('Node', { metadata: { name: 'node-1' }, status: { volumesAttached: [] } })
    const pod = buildPod({ uid: 'a', volumes: [fakeVolume('data', 'disk1')] })
    h.pods.setPod(pod)
    const waiting = h.manager.waitForAttachAndMount(pod)
    await h.clock.advance(2_000)
    expect(h.operations.filter((o) => o.name === 'verify_controller_attached_volume')).toHaveLength(0)
    expect(h.manager.getVolumesInUse()).toEqual(['kubevol.io/fake/disk1'])

    h.manager.markVolumesAsReportedInUse(h.manager.getVolumesInUse())
    await h.clock.advance(100)
    expect(h.operations.some((o) => o.name === 'verify_controller_attached_volume' && o.error?.includes('Volume not attached according to node status'))).toBe(true)

    h.objects.put('Node', { metadata: { name: 'node-1' }, status: { volumesAttached: [{ name: 'kubevol.io/fake/disk1', devicePath: '/dev/fake/disk1' }] } })
    await h.advanceUntil(() => h.manager.getMountedVolumesForPod('a').size === 1)
    await expect(waiting).resolves.toBeUndefined()
    expect(h.plugin.attached.size).toBe(0)
    expect(h.manager.actualState.getAttachedVolume('kubevol.io/fake/disk1')?.devicePath).toBe('/dev/fake/disk1')
  })

  it('in controller-attach mode still unmounts what a deleted pod used (no pass before reconstruction)', async () => {
    const h = start({ controllerAttachDetach: true })
    await h.addPodAndWait(buildPod({ uid: 'a', volumes: [fakeVolume('data')] }))
    h.pods.deletePod('a')
    await h.advanceUntil(() => !h.manager.hasPossiblyMountedVolumesForPod('a'))
    expect(podMounts(h.host)).toEqual([])
    expect(h.manager.reconcilerStatesHaveBeenSynced()).toBe(true)
  })

  it('fails the wait at once with the pod errors and names what is missing', async () => {
    const h = start()
    const pod = buildPod({ uid: 'a', volumes: [{ name: 'claim', persistentVolumeClaim: { claimName: 'missing' } }, fakeVolume('data')] })
    h.pods.setPod(pod)
    const waiting = h.manager.waitForAttachAndMount(pod)
    const outcome = waiting.then(() => 'resolved', (err: WaitError) => err)
    await h.clock.advance(1_000)
    expect(await outcome).toMatchObject({
      message:
        'unmounted volumes=[claim data], unattached volumes=[], failed to process volumes=[claim]: error processing PVC default/missing: failed to fetch PVC from API server: persistentvolumeclaims "missing" not found',
      interrupted: false,
    })
    // The other volume of the pod is not held back by the broken one.
    await h.advanceUntil(() => h.manager.getMountedVolumesForPod('a').has('data'))
    expect(h.manager.getMountedVolumesForPod('a').has('data')).toBe(true)
  })

  it('picks up a claim that becomes bound later', async () => {
    const h = start()
    const { pvc, pv } = buildClaim({ claim: 'data', pv: 'pv1', gid: '777' })
    h.objects.put('PersistentVolumeClaim', { ...pvc, status: { phase: 'Pending' } })
    h.objects.put('PersistentVolume', pv)
    const pod = buildPod({ uid: 'a', volumes: [{ name: 'v', persistentVolumeClaim: { claimName: 'data' } }], supplementalGroups: [1000] })
    h.pods.setPod(pod)
    await h.clock.advance(1_000)
    expect(h.manager.getMountedVolumesForPod('a').size).toBe(0)
    h.objects.put('PersistentVolumeClaim', pvc)
    await h.advanceUntil(() => h.manager.getMountedVolumesForPod('a').has('v'))
    expect(h.manager.getMountedVolumesForPod('a').get('v')?.innerVolumeSpecName).toBe('pv1')
    expect(h.manager.getExtraSupplementalGroupsForPod(pod)).toEqual([777])
  })

  it('times out with the kubelet text when a volume never mounts', async () => {
    const h = start()
    h.plugin.fail('setUp')
    const pod = buildPod({ uid: 'a', volumes: [fakeVolume('data')] })
    h.pods.setPod(pod)
    const outcome = h.manager.waitForAttachAndMount(pod).then(() => 'resolved', (err: WaitError) => err)
    await h.clock.advance(124_000)
    // As kubelet 1.32: the poll's context deadline, and an interrupted wait (no FailedMount event for it).
    expect(await outcome).toMatchObject({
      message: 'unmounted volumes=[data], unattached volumes=[], failed to process volumes=[]: context deadline exceeded',
      interrupted: true,
    })
  })

  it('does not unmount anything before every source has been read once', async () => {
    const h = start({ ready: false })
    await h.addPodAndWait(buildPod({ uid: 'a', volumes: [fakeVolume('data')] }))
    h.pods.deletePod('a')
    await h.clock.advance(5_000)
    expect(h.manager.hasPossiblyMountedVolumesForPod('a')).toBe(true)
    expect(podMounts(h.host)).toEqual(['pods/a/volumes/kubevol.io~fake/data'])
    h.pods.setReady(true)
    await h.advanceUntil(() => !h.manager.hasPossiblyMountedVolumesForPod('a'))
    expect(podMounts(h.host)).toEqual([])
  })

  it('waitForUnmount resolves once the pod volumes are unmounted', async () => {
    const h = start()
    const pod = buildPod({ uid: 'a', volumes: [fakeVolume('data')] })
    await h.addPodAndWait(pod)
    h.pods.deletePod('a')
    const outcome = h.manager.waitForUnmount(pod).then(() => 'resolved', (err: Error) => err.message)
    await h.clock.advance(1_000)
    expect(await outcome).toBe('resolved')
  })

  it('waitForUnmount reports the volumes still mounted on timeout', async () => {
    const h = start()
    const pod = buildPod({ uid: 'a', volumes: [fakeVolume('data')] })
    await h.addPodAndWait(pod)
    h.plugin.fail('tearDown', { message: 'target is busy' })
    h.pods.deletePod('a')
    const outcome = h.manager.waitForUnmount(pod).then(() => 'resolved', (err: Error) => err.message)
    await h.clock.advance(124_000)
    // A failed tear-down leaves the mount uncertain, which does not hold waitForUnmount (as in the kubelet)…
    expect(await outcome).toBe('resolved')
    // …but the volume is still possibly mounted, so its directories are kept.
    expect(h.manager.hasPossiblyMountedVolumesForPod('a')).toBe(true)
    expect(podMounts(h.host)).toEqual(['pods/a/volumes/kubevol.io~fake/data'])
  })

  it('maps a block volume into the pod and unmaps it in reverse', async () => {
    const h = start({ fake: { attachable: true, block: true } })
    const { pvc, pv } = buildClaim({ claim: 'raw', pv: 'pv-raw', volumeMode: 'Block' })
    h.objects.put('PersistentVolumeClaim', pvc)
    h.objects.put('PersistentVolume', pv)
    h.host.addBlockDevice('/dev/fake/pv-raw', 1 << 20)
    const pod = buildPod({ uid: 'a', volumes: [{ name: 'raw', persistentVolumeClaim: { claimName: 'raw' } }], devices: ['raw'] })
    await h.addPodAndWait(pod)
    const link = '/var/lib/kubevol/pods/a/volumeDevices/kubevol.io~fake/pv-raw'
    expect(await h.host.readlink(link)).toBe('/dev/fake/pv-raw')
    expect(podMounts(h.host)).toEqual(['plugins/kubevol.io/fake/volumeDevices/pv-raw/a'])
    h.pods.deletePod('a')
    await h.advanceUntil(() => h.plugin.attached.size === 0)
    expect(h.host.exists(link)).toBe(false)
    expect(podMounts(h.host)).toEqual([])
    const done = h.operations.filter((o) => o.endedAt !== undefined && !o.error).map((o) => o.name)
    expect(done).toEqual(['volume_attach', 'map_volume', 'unmap_volume', 'unmap_device', 'volume_detach'])
  })

  it('expands a mounted volume whose PV grew', async () => {
    const h = start({ fake: { attachable: true, expandable: true } })
    const { pvc, pv } = buildClaim({ claim: 'data', pv: 'pv1', capacity: '1Gi' })
    h.objects.put('PersistentVolumeClaim', pvc)
    h.objects.put('PersistentVolume', pv)
    const pod = buildPod({ uid: 'a', volumes: [{ name: 'v', persistentVolumeClaim: { claimName: 'data' } }] })
    await h.addPodAndWait(pod)
    h.objects.put('PersistentVolume', { ...pv, spec: { ...pv.spec, capacity: { storage: '2Gi' } } })
    await h.addPodAndWait(pod)
    await h.advanceUntil(() => h.plugin.expandedTo.has('pv1'))
    expect(h.plugin.expandedTo.get('pv1')).toBe(2 * 2 ** 30)
    expect(h.events.some((e) => e.reason === 'FileSystemResizeSuccessful')).toBe(true)
  })

  it('refuses mount options a plugin does not support', async () => {
    const h = start({ fake: { supportsMountOption: false } })
    const { pvc, pv } = buildClaim({ claim: 'data', pv: 'pv1' })
    h.objects.put('PersistentVolumeClaim', pvc)
    h.objects.put('PersistentVolume', { ...pv, spec: { ...pv.spec, mountOptions: ['noatime'] } })
    h.pods.setPod(buildPod({ uid: 'a', volumes: [{ name: 'v', persistentVolumeClaim: { claimName: 'data' } }] }))
    await h.advanceUntil(() => h.events.some((e) => e.reason === 'FailedMount'))
    expect(h.events.find((e) => e.reason === 'FailedMount')?.message).toBe(
      'MountVolume.MountOptionSupport check failed for volume "pv1" : mount options are not supported for this volume type',
    )
  })

  it('a failing volume never stalls the others', async () => {
    const h = start()
    const hang = h.plugin.hang('setUp', { volume: 'stuck' })
    const pod = buildPod({ uid: 'a', volumes: [fakeVolume('stuck'), fakeVolume('fine')] })
    const other = buildPod({ uid: 'b', volumes: [fakeVolume('data')] })
    h.pods.setPod(pod)
    await hang.reached
    await h.addPodAndWait(other)
    await h.advanceUntil(() => h.manager.getMountedVolumesForPod('a').has('fine'))
    expect([...h.manager.getMountedVolumesForPod('a').keys()]).toEqual(['fine'])
    hang.release()
    await h.advanceUntil(() => h.manager.getMountedVolumesForPod('a').size === 2)
    expect(h.manager.getMountedVolumesForPod('a').size).toBe(2)
  })
})

describe('restart', () => {
  it('a new manager on the same host keeps every mount and data', async () => {
    const first = scenario({ fake: { attachable: true } })
    first.start()
    const pod = buildPod({ uid: 'a', volumes: [fakeVolume('data', 'disk1'), fakeVolume('tmp')] })
    await first.addPodAndWait(pod)
    await first.host.writeFile('/var/lib/kubevol/pods/a/volumes/kubevol.io~fake/data/db', 'rows')
    const before = first.host.mountTargets()
    await first.stop()

    // The same machine and pods: a new manager on the first one's host.
    const restarted = createHarness({ host: first.host, clock: first.clock, fake: { attachable: true } })
    restarted.start()
    await restarted.addPodAndWait(pod)
    expect(first.host.mountTargets()).toEqual(before)
    expect(new TextDecoder().decode(await first.host.readFile('/var/lib/kubevol/pods/a/volumes/kubevol.io~fake/data/db'))).toBe('rows')
    await restarted.stop()
    first.host.assertNoViolations()
  })
})

describe('restart in controller-attach mode', () => {
  it('marks every reconstructed volume reported in use once the desired state is populated (SPEC §5.4)', async () => {
    const node = { metadata: { name: 'node-1' }, status: { volumesAttached: [{ name: 'kubevol.io/fake/disk1', devicePath: '/dev/fake/disk1' }] } }
    const first = scenario({ fake: { attachable: true }, controllerAttachDetach: true })
    first.objects.put('Node', node)
    first.start()
    const pod = buildPod({ uid: 'a', volumes: [fakeVolume('data', 'disk1')] })
    first.pods.setPod(pod)
    await first.advanceUntil(() => first.manager.getVolumesInUse().length === 1)
    first.manager.markVolumesAsReportedInUse(first.manager.getVolumesInUse())
    await first.addPodAndWait(pod)
    await first.stop()

    // Restarted, the pod still there, and no node status report yet: nothing marks the volume.
    const restarted = createHarness({ host: first.host, clock: first.clock, fake: { attachable: true }, controllerAttachDetach: true, ready: false })
    restarted.objects.put('Node', node)
    restarted.pods.setPod(pod)
    restarted.start()
    const reported = () => restarted.manager.snapshot().desired.map((v) => [v.volumeName, v.reportedInUse])
    // Before every source was read once, the desired state is not populated: not yet.
    await restarted.advanceUntil(() => reported().length === 1)
    expect(reported()).toEqual([['kubevol.io/fake/disk1', false]])
    restarted.pods.setReady(true)
    await restarted.advanceUntil(() => reported()[0]?.[1] === true, { maxMs: 1_000 })
    expect(reported()).toEqual([['kubevol.io/fake/disk1', true]])
    await restarted.addPodAndWait(pod)
    expect(restarted.manager.getMountedVolumesForPod('a').has('data')).toBe(true)
    await restarted.stop()
    first.host.assertNoViolations()
  })
})

describe('pollingCompat', () => {
  it('reaches the same state on the kubelet timing', async () => {
    const h = start({ pollingCompat: true, fake: { attachable: true } })
    const pod = buildPod({ uid: 'a', volumes: [fakeVolume('data', 'disk1')] })
    await h.addPodAndWait(pod)
    expect(podMounts(h.host).sort()).toEqual(['plugins/kubevol.io/fake/mounts/disk1', 'pods/a/volumes/kubevol.io~fake/data'])
    h.pods.deletePod('a')
    await h.advanceUntil(() => h.plugin.attached.size === 0)
    expect(podMounts(h.host)).toEqual([])
  })
})
