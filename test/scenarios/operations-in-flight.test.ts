/**
 * The bound on operations running at once (`maxRunningOperations`): operations beyond it wait in
 * start order, and one that has run for `slowOperationMs` stops counting, so a host call that
 * never answers holds back no other volume.
 */
import { buildPod, fakeVolume } from '@kubevol/core/testing'
import { afterEach, describe, expect, it } from 'vitest'
import { podMounts, scenario } from './setup.js'

let current: ReturnType<typeof scenario> | undefined
afterEach(async () => {
  await current?.stop()
  current?.host.assertNoViolations()
  current = undefined
})

const volumes = (n: number) => Array.from({ length: n }, (_, i) => fakeVolume(`v${i}`))

describe('operations in flight', () => {
  it('a mount that never answers holds no slot once slow: every other pod mounts and the queue drains', async () => {
    const h = (current = scenario({ manager: { maxRunningOperations: 2, slowOperationMs: 100 } }))
    h.start()
    // Both slots go to the hung pod's two volumes first.
    const hang = h.host.faults.hangOn({ method: 'mount', path: /\/pods\/hung\// })
    const hung = buildPod({ uid: 'hung', volumes: volumes(2) })
    h.pods.setPod(hung)
    void h.manager.waitForAttachAndMount(hung).catch(() => {})
    await h.advanceUntil(() => hang.held.length === 2)
    for (const uid of ['a', 'b', 'c']) await h.addPodAndWait(buildPod({ uid, volumes: volumes(5) }))
    expect(podMounts(h.host).filter((m) => !m.startsWith('pods/hung/'))).toHaveLength(15)
    expect(h.manager.snapshot()).toMatchObject({ runningOperations: 2, queuedOperations: 0 })
    // The hung volumes are still pending: the reconciler starts no second mount for them.
    const hungVolumes = h.manager.desiredState.getVolumesToMount().filter((v) => v.podName === 'hung')
    expect(hungVolumes.map((v) => h.manager.executor.isOperationPending(v.volumeName, 'hung'))).toEqual([true, true])
    hang.release()
    await h.advanceUntil(() => h.manager.getMountedVolumesForPod('hung').size === 2)
    expect(h.manager.getMountedVolumesForPod('hung').size).toBe(2)
    await h.manager.waitForIdle()
    expect(h.manager.snapshot()).toMatchObject({ runningOperations: 0, queuedOperations: 0 })
  })

  it('with a bound of 1, operations wait in the order they were started, each counting as pending', async () => {
    const h = (current = scenario({ manager: { maxRunningOperations: 1, slowOperationMs: 60_000 } }))
    h.start()
    const hang = h.host.faults.hangOn({ method: 'mount' })
    const pod = buildPod({ uid: 'a', volumes: volumes(3) })
    h.pods.setPod(pod)
    await h.advanceUntil(() => hang.held.length === 1)
    expect(h.manager.snapshot()).toMatchObject({ runningOperations: 1, queuedOperations: 2 })
    const starts = () => h.operations.filter((o) => o.name === 'volume_mount' && o.endedAt === undefined).length
    expect(starts()).toBe(1)
    hang.release()
    await h.addPodAndWait(pod)
    expect(starts()).toBe(3)
    expect(h.events.filter((e) => e.type === 'Warning')).toEqual([])
  })
})
