import { buildPod, fakeVolume } from '@kubevol/core/testing'
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

describe('populator and pod lifecycle', () => {
  it('keeps the volumes of a terminating pod until its containers are gone', async () => {
    const h = start()
    await h.addPodAndWait(buildPod({ uid: 'a', volumes: [fakeVolume('data')] }))
    h.pods.terminatePod('a')
    await h.clock.advance(5_000)
    expect(podMounts(h.host)).toEqual(['pods/a/volumes/kubevol.io~fake/data'])
    h.pods.markRuntimeRemoved('a')
    await h.advanceUntil(() => podMounts(h.host).length === 0)
    expect(h.manager.hasPossiblyMountedVolumesForPod('a')).toBe(false)
  })

  it('keeps the volumes of a deleted pod whose containers still run', async () => {
    const h = start()
    await h.addPodAndWait(buildPod({ uid: 'a', volumes: [fakeVolume('data')] }))
    h.pods.deletePod('a', { runtimeRemains: true })
    await h.clock.advance(5_000)
    expect(podMounts(h.host)).toEqual(['pods/a/volumes/kubevol.io~fake/data'])
  })

  it('ignores pod volumes no container uses', async () => {
    const h = start()
    await h.addPodAndWait(buildPod({ uid: 'a', volumes: [fakeVolume('used'), fakeVolume('unused')], unused: ['unused'] }))
    expect(podMounts(h.host)).toEqual(['pods/a/volumes/kubevol.io~fake/used'])
  })

  it('sets up a volume again on every wait when its plugin requires remount', async () => {
    const h = start({ fake: { requiresRemount: true } })
    const pod = buildPod({ uid: 'a', volumes: [fakeVolume('config')] })
    await h.addPodAndWait(pod)
    const mounts = () => h.operations.filter((o) => o.name === 'volume_mount' && o.endedAt !== undefined).length
    expect(mounts()).toBe(1)
    await h.addPodAndWait(pod)
    await h.advanceUntil(() => mounts() === 2)
    expect(mounts()).toBe(2)
    expect(podMounts(h.host)).toEqual(['pods/a/volumes/kubevol.io~fake/config'])
  })

  it('resolves a pod without volumes at once', async () => {
    const h = start()
    await expect(h.manager.waitForAttachAndMount(buildPod({ uid: 'none' }))).resolves.toBeUndefined()
  })

  it('reports synced states once the first pass has run', async () => {
    const h = start()
    await h.clock.flush()
    expect(h.manager.reconcilerStatesHaveBeenSynced()).toBe(true)
    expect(h.manager.snapshot()).toMatchObject({ sourcesReady: true, statesSynced: true, runningOperations: 0 })
  })
})
