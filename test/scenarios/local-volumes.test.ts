/**
 * Local PVs as the kubelet's local plugin has them (SPEC §7.5): device-mountable, one unique name
 * per PV shared by its pods, a device mounted once globally and bound into each pod, the global
 * mount released only after the last pod, and a restart (journal or disk alone) that picks it up.
 */
import type { Volume } from '@kubevol/core'
import { createBuiltinPlugins } from '@kubevol/core/plugins'
import { buildClaim, buildPod, createHarness } from '@kubevol/core/testing'
import { afterEach, describe, expect, it } from 'vitest'
import { podMounts, scenario } from './setup.js'

const ROOT = '/var/lib/kubevol'
const GLOBAL = 'plugins/kubernetes.io/local-volume/mounts/pv-dev'
let current: ReturnType<typeof scenario> | undefined
function start(options: Parameters<typeof scenario>[0] = {}) {
  current = scenario({ plugins: createBuiltinPlugins(), ...options })
  current.start()
  return current
}
afterEach(async () => {
  await current?.stop()
  current?.host.assertNoViolations()
  current = undefined
})

type H = ReturnType<typeof scenario> | ReturnType<typeof createHarness>
const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes)
const claimVolume = (name: string): Volume => ({ name, persistentVolumeClaim: { claimName: 'local' } })
const podDir = (uid: string) => `pods/${uid}/volumes/kubernetes.io~local-volume/pv-dev`

function claim(h: H, local: { path: string; fsType?: string }) {
  const { pvc, pv } = buildClaim({ claim: 'local', pv: 'pv-dev', pvSource: { local } })
  h.objects.put('PersistentVolumeClaim', pvc)
  h.objects.put('PersistentVolume', pv)
}
const desiredNames = (h: H) => [...new Set(h.manager.snapshot().desired.map((v) => v.volumeName))]

describe.each([
  ['a directory', { path: '/mnt/disks/ssd0' }, [] as string[]],
  ['a device', { path: '/dev/sdb', fsType: 'ext4' }, [GLOBAL]],
])('a local PV on %s', (_kind, local, globalMounts) => {
  async function twoPods() {
    const h = start()
    if (local.fsType) h.host.addBlockDevice(local.path, 64 << 20)
    else {
      await h.host.mkdir(local.path, { recursive: true })
      await h.host.writeFile(`${local.path}/kept`, 'node data')
    }
    claim(h, local)
    await h.addPodAndWait(buildPod({ uid: 'a', volumes: [claimVolume('data')] }))
    await h.addPodAndWait(buildPod({ uid: 'b', volumes: [claimVolume('data')] }))
    return h
  }

  it('has one unique name for every pod, and each pod a bind of the same data', async () => {
    const h = await twoPods()
    expect(desiredNames(h)).toEqual(['kubernetes.io/local-volume/pv-dev'])
    expect(h.manager.actualState.getAttachedVolumes().map((v) => v.volumeName)).toEqual(['kubernetes.io/local-volume/pv-dev'])
    expect(podMounts(h.host).sort()).toEqual([...globalMounts, podDir('a'), podDir('b')].sort())
    await h.host.writeFile(`${ROOT}/${podDir('a')}/shared`, 'from a')
    expect(text(await h.host.readFile(`${ROOT}/${podDir('b')}/shared`))).toBe('from a')
  })

  it('keeps the device mount while a pod uses it and releases it after the last pod; the data stays', async () => {
    const h = await twoPods()
    h.pods.deletePod('a')
    await h.manager.waitForIdle()
    expect(podMounts(h.host).sort()).toEqual([...globalMounts, podDir('b')].sort())
    expect(h.manager.actualState.getAttachedVolumes().map((v) => [v.volumeName, v.deviceMountState])).toEqual([['kubernetes.io/local-volume/pv-dev', 'mounted']])
    h.pods.deletePod('b')
    await h.manager.waitForIdle()
    expect(podMounts(h.host)).toEqual([])
    expect(h.manager.actualState.getAttachedVolumes()).toEqual([])
    if (!local.fsType) expect(text(await h.host.readFile(`${local.path}/kept`))).toBe('node data')
    else expect(await h.host.filesystems?.detect(local.path)).toBe('ext4')
  })

  it.each([
    ['through the journal', true],
    ['from the disk alone', false],
  ])('after a restart %s: a pod still there keeps its mounts, a pod gone is torn down and the device released', async (_how, journal) => {
    const first = await twoPods()
    const before = podMounts(first.host).sort()
    await first.stop()
    current = undefined
    const restarted = createHarness({ host: first.host, clock: first.clock, plugins: createBuiltinPlugins(), manager: { journal } })
    claim(restarted, local)
    const b = buildPod({ uid: 'b', volumes: [claimVolume('data')] })
    restarted.start()
    await restarted.addPodAndWait(b)
    expect(podMounts(first.host).sort()).toEqual(before.filter((m) => m !== podDir('a')))
    restarted.pods.deletePod('b')
    await restarted.manager.waitForIdle()
    expect(podMounts(first.host)).toEqual([])
    if (!local.fsType) expect(text(await first.host.readFile(`${local.path}/kept`))).toBe('node data')
    await restarted.stop()
    first.host.assertNoViolations()
  })

  it.each([
    ['through the journal', true],
    ['from the disk alone', false],
  ])('after a restart %s with every pod gone: every mount released, the device’s included', async (_how, journal) => {
    const first = await twoPods()
    await first.stop()
    current = undefined
    const restarted = createHarness({ host: first.host, clock: first.clock, plugins: createBuiltinPlugins(), manager: { journal } })
    claim(restarted, local)
    restarted.start()
    await restarted.advanceUntil(() => podMounts(first.host).length === 0)
    await restarted.manager.waitForIdle()
    expect(podMounts(first.host)).toEqual([])
    expect(restarted.manager.actualState.getAttachedVolumes()).toEqual([])
    if (!local.fsType) expect(text(await first.host.readFile(`${local.path}/kept`))).toBe('node data')
    await restarted.stop()
    first.host.assertNoViolations()
  })
})

it('fails the device step with the kubelet text when the directory is missing', async () => {
  const h = start()
  claim(h, { path: '/mnt/disks/gone' })
  h.pods.setPod(buildPod({ uid: 'a', volumes: [claimVolume('data')] }))
  await h.advanceUntil(() => h.events.some((e) => e.reason === 'FailedMount'))
  expect(h.events.find((e) => e.reason === 'FailedMount')?.message).toBe('MountVolume.MountDevice failed for volume "pv-dev" : path "/mnt/disks/gone" does not exist')
})
