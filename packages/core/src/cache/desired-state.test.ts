import { describe, expect, it } from 'vitest'
import { specFromPersistentVolume, specFromVolume } from '../api/volume-spec.js'
import { buildClaim, buildPod, fakeVolume } from '../testing/builders.js'
import { createFakeClock } from '../testing/fake-clock.js'
import { createFakePlugin } from '../testing/fake-plugin.js'
import { createTestPluginManager } from '../testing/plugin-context.js'
import { DesiredStateOfWorld, MAX_POD_ERRORS } from './desired-state.js'

function setup(options: Parameters<typeof createFakePlugin>[0] = {}) {
  const clock = createFakeClock()
  const dsw = new DesiredStateOfWorld(createTestPluginManager([createFakePlugin(options)]), clock)
  return { dsw, clock }
}

describe('DesiredStateOfWorld', () => {
  it('names per-pod volumes with the pod and shared-device volumes by device', () => {
    const perPod = setup().dsw
    const pod = buildPod({ uid: 'u1', volumes: [fakeVolume('data')] })
    expect(perPod.addPodToVolume({ podName: 'u1', pod, spec: specFromVolume(fakeVolume('data')), outerVolumeSpecName: 'data' })).toBe(
      'kubevol.io/fake/u1-data',
    )
    const shared = setup({ attachable: true }).dsw
    expect(shared.addPodToVolume({ podName: 'u1', pod, spec: specFromVolume(fakeVolume('data', 'disk1')), outerVolumeSpecName: 'data' })).toBe(
      'kubevol.io/fake/disk1',
    )
  })

  it('fails with the kubelet text when no plugin supports the spec', () => {
    const { dsw } = setup()
    const pod = buildPod({ uid: 'u1' })
    expect(() => dsw.addPodToVolume({ podName: 'u1', pod, spec: specFromVolume({ name: 'x', gitRepo: {} }), outerVolumeSpecName: 'x' })).toThrow(
      'failed to get Plugin from volumeSpec for volume "x" err=no volume plugin matched',
    )
  })

  it('keeps two pods on one shared volume and drops the volume with the last pod', () => {
    const { dsw } = setup({ attachable: true })
    const spec = specFromVolume(fakeVolume('d', 'disk'))
    const name = dsw.addPodToVolume({ podName: 'a', pod: buildPod({ uid: 'a' }), spec, outerVolumeSpecName: 'd' })
    dsw.addPodToVolume({ podName: 'b', pod: buildPod({ uid: 'b' }), spec, outerVolumeSpecName: 'd' })
    expect(dsw.getVolumesToMountFor(name).map((v) => v.podName).sort()).toEqual(['a', 'b'])
    dsw.deletePodFromVolume('a', name)
    expect(dsw.volumeExists(name)).toBe(true)
    dsw.deletePodFromVolume('b', name)
    expect(dsw.volumeExists(name)).toBe(false)
    expect(dsw.getPods().size).toBe(0)
  })

  it('builds views only for the pods a filter picks, asking it what the actual state check needs', () => {
    const { dsw } = setup({ attachable: true })
    const spec = specFromVolume(fakeVolume('d', 'disk'))
    const name = dsw.addPodToVolume({ podName: 'a', pod: buildPod({ uid: 'a' }), spec, outerVolumeSpecName: 'd' })
    dsw.addPodToVolume({ podName: 'b', pod: buildPod({ uid: 'b' }), spec, outerVolumeSpecName: 'd' })
    const asked: unknown[] = []
    const picked = dsw.getVolumesToMountFor(name, (podName, volumeName, size, label) => {
      asked.push([podName, volumeName, size, label])
      return podName === 'b'
    })
    expect(picked.map((v) => v.podName)).toEqual(['b'])
    expect(picked[0]?.outerVolumeSpecNames).toEqual(['d'])
    expect(asked.sort()).toEqual([
      ['a', name, undefined, ''],
      ['b', name, undefined, ''],
    ])
    expect(dsw.getVolumesToMountFor(name, () => false)).toEqual([])
  })

  it('records both outer names when two pod volumes resolve to one volume', () => {
    const { dsw } = setup({ attachable: true })
    const pod = buildPod({ uid: 'a' })
    const spec = specFromVolume(fakeVolume('x', 'disk'))
    dsw.addPodToVolume({ podName: 'a', pod, spec, outerVolumeSpecName: 'one' })
    dsw.addPodToVolume({ podName: 'a', pod, spec, outerVolumeSpecName: 'two' })
    expect([...dsw.getVolumeNamesForPod('a').keys()].sort()).toEqual(['one', 'two'])
  })

  it('answers one outer name as the map of the pod answers it', () => {
    const { dsw } = setup({ attachable: true })
    const pod = buildPod({ uid: 'a' })
    // Two names of one volume, a volume of its own, and the same outer name on two volumes (the map keeps the last).
    dsw.addPodToVolume({ podName: 'a', pod, spec: specFromVolume(fakeVolume('x', 'disk')), outerVolumeSpecName: 'one' })
    dsw.addPodToVolume({ podName: 'a', pod, spec: specFromVolume(fakeVolume('x', 'disk')), outerVolumeSpecName: 'two' })
    dsw.addPodToVolume({ podName: 'a', pod, spec: specFromVolume(fakeVolume('y', 'other')), outerVolumeSpecName: 'three' })
    dsw.addPodToVolume({ podName: 'a', pod, spec: specFromVolume(fakeVolume('z', 'third')), outerVolumeSpecName: 'one' })
    dsw.addPodToVolume({ podName: 'b', pod: buildPod({ uid: 'b' }), spec: specFromVolume(fakeVolume('w', 'fourth')), outerVolumeSpecName: 'four' })
    const map = dsw.getVolumeNamesForPod('a')
    for (const outer of ['one', 'two', 'three', 'four', 'none']) expect(dsw.getVolumeNameForPod('a', outer), outer).toBe(map.get(outer))
    expect(dsw.getVolumeNameForPod('a', 'one')).toBeDefined()
    expect(dsw.getVolumeNameForPod('nobody', 'one')).toBeUndefined()
  })

  it.each([
    { added: ['one'], names: ['one'] },
    { added: ['one', 'one'], names: ['one'] },
    { added: ['two', 'one'], names: ['one', 'two'] },
    { added: ['b', 'a', 'b', 'c', 'a'], names: ['a', 'b', 'c'] },
  ])('outer names $added are listed as $names', ({ added, names }) => {
    const { dsw } = setup({ attachable: true })
    const pod = buildPod({ uid: 'a' })
    const spec = specFromVolume(fakeVolume('x', 'disk'))
    for (const outer of added) dsw.addPodToVolume({ podName: 'a', pod, spec, outerVolumeSpecName: outer })
    expect(dsw.getVolumesToMount().map((v) => v.outerVolumeSpecNames)).toEqual([names])
    expect([...dsw.getVolumeNamesForPod('a').keys()].sort()).toEqual(names)
  })

  it('markVolumesReportedInUse sets the listed volumes and clears all others', () => {
    const { dsw } = setup({ attachable: true })
    const pod = buildPod({ uid: 'a' })
    const v1 = dsw.addPodToVolume({ podName: 'a', pod, spec: specFromVolume(fakeVolume('x', 'd1')), outerVolumeSpecName: 'x' })
    const v2 = dsw.addPodToVolume({ podName: 'a', pod, spec: specFromVolume(fakeVolume('y', 'd2')), outerVolumeSpecName: 'y' })
    dsw.markVolumesReportedInUse([v1])
    dsw.markVolumesReportedInUse([v2])
    const byName = new Map(dsw.getVolumesToMount().map((v) => [v.volumeName, v.reportedInUse]))
    expect(byName.get(v1)).toBe(false)
    expect(byName.get(v2)).toBe(true)
  })

  it('keeps the mount request time on re-add unless the plugin requires remount', async () => {
    for (const requiresRemount of [false, true]) {
      const { dsw, clock } = setup({ requiresRemount })
      const pod = buildPod({ uid: 'a' })
      const spec = specFromVolume(fakeVolume('x'))
      dsw.addPodToVolume({ podName: 'a', pod, spec, outerVolumeSpecName: 'x' })
      const first = dsw.getVolumesToMount()[0]?.mountRequestTime
      await clock.advance(1000)
      dsw.addPodToVolume({ podName: 'a', pod, spec, outerVolumeSpecName: 'x' })
      expect(dsw.getVolumesToMount()[0]?.mountRequestTime).toBe(requiresRemount ? (first ?? 0) + 1000 : first)
    }
  })

  it('gives the exact mount request time across a move of its epoch (offsets kept as small integers)', async () => {
    const { dsw, clock } = setup()
    const spec = specFromVolume(fakeVolume('x'))
    dsw.addPodToVolume({ podName: 'a', pod: buildPod({ uid: 'a' }), spec, outerVolumeSpecName: 'x' })
    const first = clock.now()
    // Past 2^30 ms the epoch moves and the earlier offset is rewritten; past 2^31 it is no small integer.
    for (const step of [2 ** 30 + 5, 2 ** 31 + 7, 3]) {
      await clock.advance(step)
      dsw.addPodToVolume({ podName: `p${step}`, pod: buildPod({ uid: `p${step}` }), spec, outerVolumeSpecName: 'x' })
    }
    const times = new Map(dsw.getVolumesToMount().map((v) => [v.podName, v.mountRequestTime]))
    expect(times.get('a')).toBe(first)
    expect(times.get(`p${2 ** 30 + 5}`)).toBe(first + 2 ** 30 + 5)
    expect(times.get(`p${2 ** 31 + 7}`)).toBe(first + 2 ** 30 + 5 + 2 ** 31 + 7)
    expect(times.get('p3')).toBe(first + 2 ** 30 + 5 + 2 ** 31 + 7 + 3)
  })

  it('gives the exact mount request time from a clock with fractions of a millisecond', async () => {
    const clock = createFakeClock(1_700_000_000_000.25)
    const dsw = new DesiredStateOfWorld(createTestPluginManager([createFakePlugin()]), clock)
    const spec = specFromVolume(fakeVolume('x'))
    await clock.advance(0.5)
    dsw.addPodToVolume({ podName: 'a', pod: buildPod({ uid: 'a' }), spec, outerVolumeSpecName: 'x' })
    expect(dsw.getVolumesToMount()[0]?.mountRequestTime).toBe(1_700_000_000_000.75)
  })

  it('lists the pods with volumes set up again on every sync, and those no event announces', () => {
    // One plugin whose volumes are refreshed by events, except those named "token".
    const plugin = { ...createFakePlugin({ requiresRemount: true }), refreshOnEvents: (spec: { name: string }) => spec.name !== 'token' }
    const plain = createFakePlugin({ name: 'kubevol.io/plain' })
    const dsw = new DesiredStateOfWorld(createTestPluginManager([plugin, plain]), createFakeClock())
    const add = (pod: string, name: string, pluginName?: string) =>
      dsw.addPodToVolume({
        podName: pod,
        pod: buildPod({ uid: pod }),
        spec: specFromVolume(fakeVolume(name, undefined, pluginName)),
        outerVolumeSpecName: name,
      })
    const plainA = add('a', 'data', 'kubevol.io/plain')
    const eventsB = add('b', 'config')
    const tokenB = add('b', 'token')
    add('c', 'config')
    expect(dsw.podsRequiringRemount().sort()).toEqual(['b', 'c'])
    expect(dsw.podsRequiringRemount({ timedOnly: true })).toEqual(['b'])
    expect([dsw.podRequiresRemount('a'), dsw.podRequiresRemount('b')]).toEqual([false, true])
    // Adding the same (volume, pod) again counts it once.
    add('b', 'token')
    dsw.deletePodFromVolume('b', tokenB)
    expect(dsw.podsRequiringRemount({ timedOnly: true })).toEqual([])
    expect(dsw.podRequiresRemount('b')).toBe(true)
    dsw.deletePodFromVolume('b', eventsB)
    dsw.deletePodFromVolume('a', plainA)
    expect(dsw.podsRequiringRemount()).toEqual(['c'])
    expect([...dsw.getPods()]).toEqual(['c'])
  })

  it('keeps at most eleven distinct errors per pod, deduplicated, and pops them sorted', () => {
    const { dsw } = setup()
    for (let i = 0; i < 20; i++) dsw.addErrorToPod('a', `e${String(i).padStart(2, '0')}`)
    dsw.addErrorToPod('a', 'e00')
    const errors = dsw.popPodErrors('a')
    expect(errors).toHaveLength(MAX_POD_ERRORS + 1)
    expect(errors[0]).toBe('e00')
    expect(dsw.popPodErrors('a')).toEqual([])
  })

  it('takes the PV capacity as the desired size and the gid annotation', () => {
    const { dsw } = setup({ attachable: true })
    const { pv } = buildClaim({ claim: 'c', capacity: '2Gi', gid: '777' })
    dsw.addPodToVolume({ podName: 'a', pod: buildPod({ uid: 'a' }), spec: specFromPersistentVolume(pv, false), outerVolumeSpecName: 'v' })
    const [vtm] = dsw.getVolumesToMount()
    expect(vtm?.desiredPersistentVolumeSize).toBe(2 * 2 ** 30)
    expect(vtm?.volumeGidValue).toBe('777')
  })
})
