import { describe, expect, it } from 'vitest'
import type { UniquePodName, UniqueVolumeName } from '../api/names.js'
import { specFromVolume } from '../api/volume-spec.js'
import { ActualStateOfWorld } from '../cache/actual-state.js'
import type { DesiredStateOfWorld } from '../cache/desired-state.js'
import { systemClock } from '../clock.js'
import { createPaths } from '../paths.js'
import { buildPod, fakeVolume } from '../testing/builders.js'
import { createFakePlugin } from '../testing/fake-plugin.js'
import { createTestPluginManager } from '../testing/plugin-context.js'
import { PodWaiters } from './pod-waiters.js'

const POD = 'ns/pod' as UniquePodName
const OUTER = ['data', 'logs'] as const
const VOLUMES = ['kubevol.io/fake/x', 'kubevol.io/fake/y', 'kubevol.io/fake/z'] as UniqueVolumeName[]

/** Every way of naming each outer name's desired volume (or none) and of mounting each volume (or not) under an outer name. */
function* worlds(): Generator<{ desired: Map<string, UniqueVolumeName>; mounted: Map<UniqueVolumeName, string> }> {
  const choices = [undefined, ...VOLUMES]
  for (const d0 of choices) {
    for (const d1 of choices) {
      const desired = new Map<string, UniqueVolumeName>()
      if (d0) desired.set('data', d0)
      if (d1 && d1 !== d0) desired.set('logs', d1)
      const outerChoices = [undefined, ...OUTER]
      for (const mx of outerChoices) {
        for (const my of outerChoices) {
          for (const mz of outerChoices) {
            const mounted = new Map<UniqueVolumeName, string>()
            for (const [i, outer] of [mx, my, mz].entries()) if (outer) mounted.set(VOLUMES[i] as UniqueVolumeName, outer)
            yield { desired, mounted }
          }
        }
      }
    }
  }
}

describe('PodWaiters.allMounted', () => {
  it('decides as the pod’s mounted-volume views do, for every world of two names and three volumes', () => {
    const plugins = createTestPluginManager([createFakePlugin({ attachable: true })])
    let checked = 0
    let mountedCount = 0
    for (const { desired, mounted } of worlds()) {
      const asw = new ActualStateOfWorld(plugins)
      for (const [volumeName, outer] of mounted) {
        const spec = specFromVolume(fakeVolume(outer, volumeName.split('/').pop() as string))
        asw.markVolumeAsAttached(volumeName, spec, '/dev/fake')
        asw.markVolumeAsMounted({ podName: POD, podUID: 'pod', volumeName, outerVolumeSpecName: outer, volumeGidValue: '', spec })
      }
      const dsw = { getVolumesToMountForPod: () => [], getVolumeNamesForPod: () => new Map(desired), getVolumeNameForPod: (_: UniquePodName, outer: string) => desired.get(outer) } as unknown as DesiredStateOfWorld
      const waiters = new PodWaiters({ dsw, asw, plugins, paths: createPaths('/var/lib/kubevol'), clock: systemClock, polling: false })
      const views = waiters.mountedVolumesForPod(POD)
      for (const expected of [['data'], ['logs'], ['data', 'logs']]) {
        const want = expected.every((name) => views.has(name))
        const world = JSON.stringify({ desired: [...desired], mounted: [...mounted], expected })
        expect(waiters.allMounted(expected, POD), world).toBe(want)
        // From any index on, the first name without a mounted volume.
        for (let from = 0; from <= expected.length; from++) {
          const first = expected.findIndex((name, i) => i >= from && !views.has(name))
          expect(waiters.firstUnmounted(expected, POD, from), world).toBe(first < 0 ? expected.length : first)
        }
        if (want) mountedCount++
        checked++
      }
    }
    // Both answers occur, many times.
    expect(checked).toBe(16 * 27 * 3)
    expect(mountedCount).toBeGreaterThan(100)
    expect(checked - mountedCount).toBeGreaterThan(100)
  })
})

describe('PodWaiters.waitForAttachAndMount', () => {
  it('resolves only on a look at every name: a volume unmounted after it was seen mounted holds the wait', async () => {
    const plugins = createTestPluginManager([createFakePlugin({ attachable: true })])
    const asw = new ActualStateOfWorld(plugins)
    const names = ['a', 'b', 'c']
    const desired = new Map(names.map((n) => [n, `kubevol.io/fake/${n}` as UniqueVolumeName]))
    const dsw = {
      getVolumesToMountForPod: () => [],
      getVolumeNamesForPod: () => new Map(desired),
      getVolumeNameForPod: (_: UniquePodName, outer: string) => desired.get(outer),
      popPodErrors: () => [],
    } as unknown as DesiredStateOfWorld
    const waiters = new PodWaiters({ dsw, asw, plugins, paths: createPaths('/var/lib/kubevol'), clock: systemClock, polling: false })
    const pod = buildPod({ uid: 'pod', volumes: names.map((n) => fakeVolume(n, n)) })
    const mount = (n: string): void => {
      const spec = specFromVolume(fakeVolume(n, n))
      const volumeName = desired.get(n) as UniqueVolumeName
      if (!asw.volumeExists(volumeName)) asw.markVolumeAsAttached(volumeName, spec, '/dev/fake')
      asw.markVolumeAsMounted({ podName: POD, podUID: 'pod', volumeName, outerVolumeSpecName: n, volumeGidValue: '', spec })
    }
    let resolved = false
    const waiting = waiters.waitForAttachAndMount(pod, POD, { timeoutMs: 60_000 }).then(() => {
      resolved = true
    })
    const changed = async (): Promise<void> => {
      waiters.podChanged(POD)
      for (let i = 0; i < 5; i++) await Promise.resolve()
    }
    mount('a')
    await changed()
    mount('b')
    await changed()
    expect(resolved).toBe(false)
    // 'a' goes away after the waiter saw it; 'c' comes: the waiter has looked past 'a' and 'b'.
    asw.markVolumeAsUnmounted(POD, desired.get('a') as UniqueVolumeName)
    mount('c')
    await changed()
    expect(resolved).toBe(false)
    mount('a')
    await changed()
    await waiting
    expect(resolved).toBe(true)
  })
})
