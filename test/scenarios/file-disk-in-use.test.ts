/**
 * fileDisk on the in-memory host: which loop device of an image is kubevol's. A record of an earlier
 * attach never makes someone else's later attach of the same device ours; a loop device kubevol
 * mounted is adopted again when its record is gone; detach leaves loop devices kubevol did not attach.
 * (The real-kernel side: packages/adapter-linux/src/file-disk-in-use.test.ts.)
 */
import type { Pod } from '@kubevol/core'
import { createBuiltinPlugins, FILE_DISK_DRIVER } from '@kubevol/core/plugins'
import { buildClaim, buildPod, createHarness, type Harness } from '@kubevol/core/testing'
import { afterEach, describe, expect, it } from 'vitest'
import { scenario } from './setup.js'

const ROOT = '/var/lib/kubevol'
const IMAGE = '/var/lib/images/disk.img'
const RECORDS = `${ROOT}/plugins/kubevol.io/file-disk/loops`
const GLOBAL = `${ROOT}/plugins/kubevol.io/file-disk/mounts/pv-disk`

const harnesses: Harness[] = []
afterEach(async () => {
  for (const h of harnesses.splice(0)) await h.stop()
})

function start<H extends Harness>(h: H): H {
  const { pvc, pv } = buildClaim({ claim: 'disk', pv: 'pv-disk', pvSource: { csi: { driver: FILE_DISK_DRIVER, volumeHandle: IMAGE, fsType: 'ext4' } } })
  h.objects.put('PersistentVolumeClaim', pvc)
  h.objects.put('PersistentVolume', pv)
  harnesses.push(h)
  h.start()
  return h
}
const podUsing = (uid: string): Pod => buildPod({ uid, volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'disk' } }] })
const inUse = (h: Harness) => h.events.find((e) => e.type === 'Warning' && e.message.includes('is in use'))?.message

describe('fileDisk: kubevol adopts only its own loop device', () => {
  it('a stale record does not make a later attach of the same device by someone else ours; detach leaves it', async () => {
    const h = start(scenario({ plugins: createBuiltinPlugins() }))
    h.host.allocateFile(IMAGE, 32 << 20)
    await h.addPodAndWait(podUsing('a'))
    const [ours] = (await h.host.loopDevices?.find(IMAGE)) ?? []
    const [name] = await h.host.readdir(RECORDS)
    const record = await h.host.readFile(`${RECORDS}/${name}`)
    h.pods.deletePod('a')
    await h.advanceUntil(() => h.host.mountTargets().length === 0)
    await h.manager.waitForIdle()
    expect(await h.host.loopDevices?.find(IMAGE)).toEqual([])
    // As if kubevol died after the detach, before forgetting the record; then someone else attaches
    // the image and gets the same device.
    await h.host.writeFile(`${RECORDS}/${name}`, record)
    const theirs = await h.host.loopDevices?.attach(IMAGE)
    expect(theirs).toBe(ours)

    h.pods.setPod(podUsing('b'))
    await h.advanceUntil(() => inUse(h) !== undefined)
    expect(inUse(h)).toContain(`${FILE_DISK_DRIVER} volumeHandle ${IMAGE} is in use: attached as ${theirs} by someone else`)
    expect(h.host.mountTargets()).toEqual([])
    h.pods.deletePod('b')
    await h.advanceUntil(() => h.manager.getMountedVolumesForPod('b').size === 0)
    await h.manager.waitForIdle()
    expect(await h.host.loopDevices?.find(IMAGE)).toEqual([theirs])
  })

  it("kubevol's own loop device, mounted only at the volume's paths, is adopted when its record is lost", async () => {
    const first = start(scenario({ plugins: createBuiltinPlugins() }))
    const { host, clock } = first
    host.allocateFile(IMAGE, 32 << 20)
    await first.addPodAndWait(podUsing('a'))
    await first.stop()
    harnesses.splice(0)
    await host.removeAll(RECORDS)

    const second = start(createHarness({ host, clock, plugins: createBuiltinPlugins() }))
    await second.addPodAndWait(podUsing('a'))
    expect(inUse(second)).toBeUndefined()
    expect(host.mountTargets()).toContain(GLOBAL)
    second.pods.deletePod('a')
    await second.advanceUntil(() => host.mountTargets().length === 0)
    await second.manager.waitForIdle()
    expect(await host.loopDevices?.find(IMAGE)).toEqual([])
  })

  it('an attach whose record cannot be written is undone: a failed attach leaves no loop device behind', async () => {
    const h = start(scenario({ plugins: createBuiltinPlugins() }))
    h.host.allocateFile(IMAGE, 32 << 20)
    // The loop device is attached, then the record saying so is refused (as when the records'
    // directory is swapped for a symlink in between).
    const refuse = h.host.faults.failOn((call) => call.method === 'writeFile' && String(call.path).startsWith(RECORDS) && String(call.args[1]).includes('"state":"attached"'), 'ELOOP')
    h.pods.setPod(podUsing('a'))
    await h.advanceUntil(() => h.events.some((e) => e.type === 'Warning' && e.message.includes('AttachVolume.Attach failed')))
    expect(await h.host.loopDevices?.find(IMAGE)).toEqual([])
    h.pods.deletePod('a')
    await h.advanceUntil(() => h.manager.getMountedVolumesForPod('a').size === 0)
    await h.manager.waitForIdle()
    expect(await h.host.loopDevices?.find(IMAGE)).toEqual([])
    expect(h.host.mountTargets()).toEqual([])
    // Once records can be written again, the same image attaches and mounts.
    refuse()
    await h.addPodAndWait(podUsing('b'))
    expect(h.host.mountTargets()).toContain(GLOBAL)
    expect(await h.host.loopDevices?.find(IMAGE)).toHaveLength(1)
  })
})
