import { describe, expect, it } from 'vitest'
import { specFromVolume } from '../api/volume-spec.js'
import { ActualStateOfWorld } from '../cache/actual-state.js'
import { DesiredStateOfWorld } from '../cache/desired-state.js'
import { silentLogger } from '../observability.js'
import type { OperationExecutor } from '../operations/operation-executor.js'
import { buildPod, fakeVolume } from '../testing/builders.js'
import { createFakeClock } from '../testing/fake-clock.js'
import { createFakePlugin } from '../testing/fake-plugin.js'
import { createTestPluginManager } from '../testing/plugin-context.js'
import { Reconciler } from './reconciler.js'

// A reconciler over real caches with an executor that only records what it was asked to start.
function setup(resyncSlice: number) {
  const clock = createFakeClock()
  const plugins = createTestPluginManager([createFakePlugin()])
  const dsw = new DesiredStateOfWorld(plugins, clock)
  const asw = new ActualStateOfWorld(plugins)
  const started: string[] = []
  const record = (volumeName: string) => {
    started.push(volumeName)
    return { status: 'already-pending' as const, message: '' }
  }
  const executor = {
    verifyControllerAttachedVolume: (vtm: { volumeName: string }) => record(vtm.volumeName),
    mountVolume: (vtm: { volumeName: string }) => record(vtm.volumeName),
  } as unknown as OperationExecutor
  const reconciler = new Reconciler({ dsw, asw, executor, clock, logger: silentLogger, populatorHasAddedPods: () => true, controllerAttachDetach: true, resyncSlice })
  for (let i = 0; i < 25; i++) {
    const pod = buildPod({ uid: `u${i}`, volumes: [fakeVolume('data')] })
    dsw.addPodToVolume({ podName: `u${i}`, pod, spec: specFromVolume(fakeVolume('data')), outerVolumeSpecName: 'data' })
  }
  return { reconciler, started }
}

describe('Reconciler', () => {
  it('looks at every volume in one full pass', () => {
    const { reconciler, started } = setup(10)
    reconciler.reconcileOnce()
    expect(new Set(started).size).toBe(25)
    expect(reconciler.hasWork).toBe(false)
  })

  it('spreads a resync over passes of at most a slice each, and covers every volume', () => {
    const { reconciler, started } = setup(10)
    reconciler.reconcileOnce()
    started.length = 0
    reconciler.queueResync()
    const perPass: number[] = []
    while (reconciler.resyncPending) {
      const before = started.length
      reconciler.reconcileOnce()
      perPass.push(started.length - before)
    }
    expect(perPass).toEqual([10, 10, 5])
    expect(new Set(started).size).toBe(25)
    expect(reconciler.hasWork).toBe(false)
  })

  it('a full pass takes over a resync in progress', () => {
    const { reconciler, started } = setup(10)
    reconciler.reconcileOnce()
    reconciler.queueResync()
    reconciler.reconcileOnce()
    reconciler.markAllDirty()
    started.length = 0
    reconciler.reconcileOnce()
    expect(new Set(started).size).toBe(25)
    expect(reconciler.resyncPending).toBe(false)
  })
})
