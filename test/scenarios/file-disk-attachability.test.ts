/**
 * fileDisk against the control plane's protocol: the unique name the attach/detach controller
 * uses for a CSI volume, and the kubelet's CSI attachability rule (no CSIDriver object, or
 * `attachRequired: true`: attach; `attachRequired: false`: the loop device is attached in the device
 * step and detached when that step is undone). (The real-kernel side:
 * packages/adapter-linux/src/file-disk-attach-required.test.ts.)
 */
import { type Pod, type Volume, silentLogger } from '@kubevol/core'
import { createBuiltinPlugins, FILE_DISK_DRIVER } from '@kubevol/core/plugins'
import { VolumeJournal } from '@kubevol/core/engine'
import { buildClaim, buildPod, createHarness } from '@kubevol/core/testing'
import { afterEach, describe, expect, it } from 'vitest'
import { podMounts, scenario } from './setup.js'

const ROOT = '/var/lib/kubevol'
const IMAGE = '/var/lib/images/disk1.img'
const CSI_NAME = `kubernetes.io/csi/${FILE_DISK_DRIVER}^${IMAGE}`
const OLD_NAME = `kubevol.io/file-disk/${IMAGE}`
const STAGED = `${ROOT}/plugins/kubevol.io/file-disk/staged`

let current: ReturnType<typeof scenario> | undefined
function start(options: Parameters<typeof scenario>[0] = {}) {
  current = scenario({ plugins: createBuiltinPlugins(), ...options })
  current.host.allocateFile(IMAGE, 64 << 20)
  return current
}
afterEach(async () => {
  await current?.stop()
  current?.host.assertNoViolations()
  current = undefined
})

function claimed(h: ReturnType<typeof scenario>, volumeMode: 'Filesystem' | 'Block' = 'Filesystem') {
  const { pvc, pv } = buildClaim({ claim: 'disk', pv: 'pv-disk', volumeMode, pvSource: { csi: { driver: FILE_DISK_DRIVER, volumeHandle: IMAGE, fsType: 'ext4' } } })
  h.objects.put('PersistentVolumeClaim', pvc)
  h.objects.put('PersistentVolume', pv)
}
const claimVolume: Volume = { name: 'data', persistentVolumeClaim: { claimName: 'disk' } }
const podWith = (uid: string, block = false): Pod => buildPod({ uid, volumes: [claimVolume], ...(block ? { devices: ['data'] } : {}) })
const attachRequired = (h: ReturnType<typeof scenario>, value: boolean) =>
  h.objects.put('CSIDriver', { metadata: { name: FILE_DISK_DRIVER }, spec: { attachRequired: value } })
const succeeded = (h: ReturnType<typeof scenario>) => h.operations.filter((o) => o.endedAt !== undefined && !o.error).map((o) => o.name)

describe('fileDisk unique names', () => {
  it("is named as the kubelet names a CSI volume, while its directories keep the plugin's name", async () => {
    const h = start()
    claimed(h)
    h.start()
    await h.addPodAndWait(podWith('a'))
    expect(h.manager.getVolumesInUse()).toEqual([CSI_NAME])
    expect(h.manager.actualState.getAttachedVolume(CSI_NAME)?.pluginName).toBe('kubevol.io/file-disk')
    expect(h.manager.getMountedVolumesForPod('a').get('data')?.volumeName).toBe(CSI_NAME)
    expect(podMounts(h.host).sort()).toEqual(['plugins/kubevol.io/file-disk/mounts/pv-disk', 'pods/a/volumes/kubevol.io~file-disk/pv-disk'])
  })

  it('mounts in controller mode once node status lists the volume under the name the controller gives it', async () => {
    const h = start({ controllerAttachDetach: true })
    claimed(h)
    h.objects.put('Node', { metadata: { name: 'node-1' }, status: { volumesAttached: [] } })
    h.start()
    const pod = podWith('a')
    h.pods.setPod(pod)
    const waiting = h.manager.waitForAttachAndMount(pod)
    await h.advanceUntil(() => h.manager.getVolumesInUse().length === 1)
    h.manager.markVolumesAsReportedInUse(h.manager.getVolumesInUse())
    // The controller's part: it lists what is in use under the CSI name, with the device path.
    const loop = await h.host.loopDevices?.attach(IMAGE)
    h.objects.put('Node', { metadata: { name: 'node-1' }, status: { volumesAttached: [{ name: CSI_NAME, devicePath: loop as string }] } })
    await h.advanceUntil(() => h.manager.getMountedVolumesForPod('a').has('data'), { maxMs: 30_000 })
    await expect(waiting).resolves.toBeUndefined()
    expect(h.manager.actualState.getAttachedVolume(CSI_NAME)?.devicePath).toBe(loop)
  })

  it('reconstructs a volume journaled under the name kubevol gave it before, and keeps it mounted', async () => {
    const first = start()
    claimed(first)
    first.start()
    const pod = podWith('a')
    await first.addPodAndWait(pod)
    await first.stop()
    // Rewrite the journal as kubevol wrote it before: the same records under the old name.
    const path = `${ROOT}/journal/volumes.log`
    const journal = await VolumeJournal.open({ host: first.host, path, logger: silentLogger })
    const entry = journal.volumes().get(CSI_NAME)
    expect(entry?.attached).toBeDefined()
    if (!entry?.attached || !entry.device) throw new Error('journal without attach and device records')
    await journal.record({ kind: 'attached', volume: OLD_NAME, spec: entry.spec, devicePath: entry.attached.devicePath })
    await journal.record({ kind: 'device', volume: OLD_NAME, spec: entry.spec, ...entry.device })
    for (const [podName, p] of entry.pods) await journal.record({ kind: 'setup', volume: OLD_NAME, pod: podName, ...p })
    await journal.record({ kind: 'detached', volume: CSI_NAME })
    await journal.flush()
    expect([...(await VolumeJournal.read({ host: first.host, path, logger: silentLogger })).volumes().keys()]).toEqual([OLD_NAME])
    await first.host.writeFile(`${ROOT}/pods/a/volumes/kubevol.io~file-disk/pv-disk/db`, 'rows')

    const restarted = createHarness({ host: first.host, clock: first.clock, plugins: createBuiltinPlugins() })
    restarted.objects.put('PersistentVolumeClaim', buildClaim({ claim: 'disk', pv: 'pv-disk', pvSource: { csi: { driver: FILE_DISK_DRIVER, volumeHandle: IMAGE, fsType: 'ext4' } } }).pvc)
    restarted.objects.put('PersistentVolume', buildClaim({ claim: 'disk', pv: 'pv-disk', pvSource: { csi: { driver: FILE_DISK_DRIVER, volumeHandle: IMAGE, fsType: 'ext4' } } }).pv)
    restarted.pods.setPod(pod)
    restarted.start()
    await restarted.addPodAndWait(pod)
    await restarted.manager.waitForIdle()
    // Nothing of the pod's volume was torn down: one volume, under its current name.
    expect(restarted.operations.map((o) => o.name)).not.toContain('volume_unmount')
    expect(restarted.operations.map((o) => o.name)).not.toContain('unmount_device')
    expect(restarted.manager.snapshot().attached.map((v) => v.volumeName)).toEqual([CSI_NAME])
    await restarted.stop()
    expect([...(await VolumeJournal.read({ host: first.host, path, logger: silentLogger })).volumes().keys()]).toEqual([CSI_NAME])
    expect(new TextDecoder().decode(await first.host.readFile(`${ROOT}/pods/a/volumes/kubevol.io~file-disk/pv-disk/db`))).toBe('rows')
    expect((await first.host.loopDevices?.find(IMAGE))?.length).toBe(1)
  })
})

describe('fileDisk attachability (the CSIDriver object)', () => {
  it('without a CSIDriver object: attachable, attached by the attach step', async () => {
    const h = start()
    claimed(h)
    h.start()
    await h.addPodAndWait(podWith('a'))
    expect(succeeded(h)).toEqual(['volume_attach', 'volume_mount'])
    expect(h.manager.actualState.getAttachedVolume(CSI_NAME)?.attachability).toBe('attachable')
    h.pods.deletePod('a')
    await h.manager.waitForIdle()
    expect(succeeded(h)).toEqual(['volume_attach', 'volume_mount', 'volume_unmount', 'unmount_device', 'volume_detach'])
    expect(await h.host.loopDevices?.find(IMAGE)).toEqual([])
  })

  it.each([
    { mode: 'Filesystem' as const, up: ['verify_controller_attached_volume', 'volume_mount'], down: ['volume_unmount', 'unmount_device'] },
    { mode: 'Block' as const, up: ['verify_controller_attached_volume', 'map_volume'], down: ['unmap_volume', 'unmap_device'] },
  ])('attachRequired: false ($mode): no attach step; the device step attaches the loop device and its undoing releases it once', async ({ mode, up, down }) => {
    const h = start()
    claimed(h, mode)
    attachRequired(h, false)
    h.start()
    await h.addPodAndWait(podWith('a', mode === 'Block'))
    expect(succeeded(h)).toEqual(up)
    expect(h.manager.getVolumesInUse()).toEqual([])
    const [loop] = (await h.host.loopDevices?.find(IMAGE)) ?? []
    expect(loop).toMatch(/^\/dev\/loop\d+$/)
    if (mode === 'Block') expect(await h.host.readlink(`${ROOT}/pods/a/volumeDevices/kubevol.io~file-disk/pv-disk`)).toBe(loop)
    else expect(podMounts(h.host)).toContain('plugins/kubevol.io/file-disk/mounts/pv-disk')
    expect(await h.host.readdir(STAGED)).toHaveLength(1)
    // A second pod shares the device step: still one loop device.
    await h.addPodAndWait(podWith('b', mode === 'Block'))
    expect(await h.host.loopDevices?.find(IMAGE)).toEqual([loop])

    h.pods.deletePod('a')
    h.pods.deletePod('b')
    await h.manager.waitForIdle()
    expect(succeeded(h)).toEqual([...up, up[1], down[0], down[0], down[1]])
    expect(await h.host.loopDevices?.find(IMAGE)).toEqual([])
    expect(await h.host.readdir(STAGED)).toEqual([])
    expect(podMounts(h.host)).toEqual([])
  })

  it('an image someone else attached is still refused in the device step', async () => {
    const h = start()
    claimed(h)
    attachRequired(h, false)
    const theirs = await h.host.loopDevices?.attach(IMAGE)
    h.start()
    h.pods.setPod(podWith('a'))
    await h.advanceUntil(() => h.events.some((e) => e.reason === 'FailedMount'))
    expect(h.events.find((e) => e.reason === 'FailedMount')?.message).toContain(`${FILE_DISK_DRIVER} volumeHandle ${IMAGE} is in use: attached as ${theirs} by someone else`)
    h.pods.deletePod('a')
    await h.manager.waitForIdle()
    // Theirs stays attached: kubevol detaches only what it attached.
    expect(await h.host.loopDevices?.find(IMAGE)).toEqual([theirs])
  })

  it('controller mode: a CSIDriver object saying attachRequired: false after the pod lets it mount instead of waiting for an attach (SPEC §4.5)', async () => {
    const h = start({ controllerAttachDetach: true })
    claimed(h)
    h.objects.put('Node', { metadata: { name: 'node-1' }, status: { volumesAttached: [] } })
    h.start()
    const pod = podWith('a')
    h.pods.setPod(pod)
    const waiting = h.manager.waitForAttachAndMount(pod)
    const outcome = waiting.then(() => 'mounted', (err: Error) => err.message)
    await h.advanceUntil(() => h.manager.getVolumesInUse().length === 1)
    h.manager.markVolumesAsReportedInUse(h.manager.getVolumesInUse())
    await h.advanceUntil(() => h.operations.some((o) => o.error?.includes('Volume not attached according to node status')))
    expect(h.manager.desiredState.isVolumeAttachable(CSI_NAME)).toBe(true)

    // No controller will ever list it: the driver object now says no attach is needed.
    attachRequired(h, false)
    await h.advanceUntil(() => h.manager.getMountedVolumesForPod('a').has('data'), { maxMs: 60_000 })
    expect(h.manager.getMountedVolumesForPod('a').has('data')).toBe(true)
    expect(await outcome).toBe('mounted')
    expect(h.manager.desiredState.isVolumeAttachable(CSI_NAME)).toBe(false)
    expect(h.manager.getVolumesInUse()).toEqual([])
    h.pods.deletePod('a')
    await h.manager.waitForIdle()
    expect(await h.host.loopDevices?.find(IMAGE)).toEqual([])
  })
})
