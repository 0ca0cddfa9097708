import { describe, expect, it } from 'vitest'
import { specFromPersistentVolume, specFromVolume } from '../api/volume-spec.js'
import { buildClaim, fakeVolume } from '../testing/builders.js'
import { createFakePlugin } from '../testing/fake-plugin.js'
import { createTestPluginManager } from '../testing/plugin-context.js'
import { ActualStateOfWorld, type MarkVolumeOptions } from './actual-state.js'

const spec = specFromVolume(fakeVolume('data', 'disk'))
const opts = (podName: string, volumeName = 'kubevol.io/fake/disk'): MarkVolumeOptions => ({
  podName,
  podUID: podName,
  volumeName,
  outerVolumeSpecName: 'data',
  volumeGidValue: '',
  spec,
})

function setup(pluginOptions: Parameters<typeof createFakePlugin>[0] = { attachable: true }) {
  return new ActualStateOfWorld(createTestPluginManager([createFakePlugin(pluginOptions)]))
}

describe('ActualStateOfWorld', () => {
  it('derives an empty volume name from the attachable plugin, as the kubelet addVolume does (SPEC §3.3)', () => {
    const asw = setup()
    expect(asw.markVolumeAsAttached('', spec, '/dev/fake/disk')).toBe('kubevol.io/fake/disk')
    expect(asw.getAttachedVolume('kubevol.io/fake/disk')).toMatchObject({ devicePath: '/dev/fake/disk', attachability: 'attachable' })
    expect(asw.volumeNames()).toEqual(['kubevol.io/fake/disk'])
    // With a plugin that names its volumes under another prefix (fileDisk: the CSI one).
    const prefixed = new ActualStateOfWorld(createTestPluginManager([{ ...createFakePlugin({ attachable: true }), uniqueNamePrefix: 'kubernetes.io/csi' }]))
    expect(prefixed.markVolumeAsAttached('', spec, '')).toBe('kubernetes.io/csi/disk')
    // Nothing attaches it: the kubelet's error, and nothing added.
    const plain = setup({})
    expect(() => plain.markVolumeAsAttached('', spec, '')).toThrow('failed to get AttachablePlugin from volumeSpec for volume "data" err=<nil>')
    expect(plain.volumeNames()).toEqual([])
  })

  it('lists the mounted and uncertain entries of a volume, only those a filter picks when given', () => {
    const asw = setup()
    const name = 'kubevol.io/fake/disk'
    asw.markVolumeAsAttached(name, spec, '/dev/fake/disk')
    asw.markVolumeAsMounted(opts('a'))
    asw.markVolumeMountAsUncertain(opts('b'))
    expect(asw.getAllMountedVolumesFor(name).map((mv) => [mv.podName, mv.mountState])).toEqual([
      ['a', 'mounted'],
      ['b', 'uncertain'],
    ])
    const asked: unknown[] = []
    const picked = asw.getAllMountedVolumesFor(name, (podName, volumeName, context) => {
      asked.push([podName, volumeName, context])
      return podName === 'b'
    })
    expect(picked.map((mv) => mv.podName)).toEqual(['b'])
    expect(asked).toEqual([
      ['a', name, ''],
      ['b', name, ''],
    ])
    expect(asw.getAllMountedVolumesFor('kubevol.io/fake/other', () => true)).toEqual([])
  })

  it('refuses to mount a volume that is not attached', () => {
    const asw = setup()
    expect(() => asw.markVolumeAsMounted(opts('a'))).toThrow(
      'no volume with the name "kubevol.io/fake/disk" exists in the list of attached volumes',
    )
  })

  it('answers podExistsInVolume in the kubelet order', () => {
    const asw = setup({ attachable: true, expandable: true, requiresRemount: true })
    const name = 'kubevol.io/fake/disk'
    expect(asw.podExistsInVolume('a', name, undefined).status).toBe('not-attached')
    asw.markVolumeAsAttached(name, spec, '/dev/fake/disk')
    expect(asw.podExistsInVolume('a', name, undefined)).toEqual({ status: 'not-mounted', devicePath: '/dev/fake/disk' })
    asw.markVolumeMountAsUncertain(opts('a'))
    expect(asw.podExistsInVolume('a', name, undefined).status).toBe('not-mounted')
    asw.markVolumeAsMounted(opts('a'))
    expect(asw.podExistsInVolume('a', name, undefined).status).toBe('mounted')
    asw.markRemountRequired('a')
    expect(asw.podExistsInVolume('a', name, undefined).status).toBe('remount-required')
    asw.markVolumeAsMounted(opts('a'))
    asw.markVolumeAsResized(name, 1000)
    expect(asw.podExistsInVolume('a', name, 2000)).toEqual({ status: 'fs-resize-required', devicePath: '/dev/fake/disk', currentSize: 1000 })
    asw.markForInUseExpansionError(name)
    expect(asw.podExistsInVolume('a', name, 2000).status).toBe('mounted')
  })

  it('keeps the volume while pods are mounted and forgets it after', () => {
    const asw = setup()
    const name = 'kubevol.io/fake/disk'
    asw.markVolumeAsAttached(name, spec, '/dev/x')
    asw.markVolumeAsMounted(opts('a'))
    expect(asw.markVolumeAsDetached(name)).toBe(false)
    expect(asw.volumeExists(name)).toBe(true)
    asw.markVolumeAsUnmounted('a', name)
    expect(asw.markVolumeAsDetached(name)).toBe(true)
    expect(asw.volumeExists(name)).toBe(false)
  })

  it('tells mounted from possibly mounted', () => {
    const asw = setup()
    asw.markVolumeAsAttached('kubevol.io/fake/disk', spec, '')
    asw.markVolumeMountAsUncertain(opts('a'))
    expect(asw.podHasMountedVolumes('a')).toBe(false)
    expect(asw.podHasPossiblyMountedVolumes('a')).toBe(true)
    expect(asw.podRemovedFromVolume('a', 'kubevol.io/fake/disk')).toBe(false)
    expect(asw.getMountedVolumes()).toHaveLength(0)
    expect(asw.getAllMountedVolumes()).toHaveLength(1)
  })

  it.each([
    { name: 'the usual (UID the pod name, outer name the spec name, no gid)', podUID: 'a', outer: 'data', gid: '' },
    { name: 'its own UID', podUID: 'uid-a', outer: 'data', gid: '' },
    { name: 'another outer name', podUID: 'a', outer: 'claim', gid: '' },
    { name: 'a gid', podUID: 'a', outer: 'data', gid: '1000' },
  ])('keeps what a mount was marked with, through an uncertain mark with a new spec: $name', ({ podUID, outer, gid }) => {
    const asw = setup()
    const name = asw.markVolumeAsAttached('', spec, '/dev/fake/disk')
    asw.markVolumeAsMounted({ ...opts('a'), podUID, outerVolumeSpecName: outer, volumeGidValue: gid })
    const view = { podUID, outerVolumeSpecName: outer, volumeGidValue: gid, innerVolumeSpecName: 'data', mountState: 'mounted' }
    expect(asw.getMountedVolumeForPod('a', name)).toMatchObject(view)
    // Uncertain over mounted keeps the entry's UID, outer name and gid, and takes the new spec.
    const renamed = specFromVolume(fakeVolume('renamed', 'disk'))
    asw.markVolumeMountAsUncertain({ ...opts('a'), podUID: 'other', outerVolumeSpecName: 'other', volumeGidValue: '5', spec: renamed })
    expect(asw.getMountedVolumeForPod('a', name)).toMatchObject({ ...view, innerVolumeSpecName: 'renamed', mountState: 'uncertain' })
  })

  it('keeps the device fields of each volume apart', () => {
    const asw = setup()
    const one = asw.markVolumeAsAttached('one', spec, '')
    const two = asw.markVolumeAsAttached('two', spec, '')
    asw.markDeviceAsMounted(one, '/dev/one', '/g/one', 'ctx')
    asw.markVolumeAsResized(two, 10)
    expect(asw.getAttachedVolume(one)).toMatchObject({ devicePath: '/dev/one', deviceMountPath: '/g/one', deviceMountState: 'mounted', seLinuxMountContext: 'ctx' })
    expect(asw.getAttachedVolume(two)).toMatchObject({ devicePath: '', deviceMountPath: '', deviceMountState: 'not-mounted', seLinuxMountContext: undefined, persistentVolumeSize: 10 })
    asw.markDeviceAsUnmounted(one)
    expect(asw.getAttachedVolume(one)).toMatchObject({ devicePath: '/dev/one', deviceMountPath: '', deviceMountState: 'not-mounted', seLinuxMountContext: 'ctx' })
  })

  it('keeps the device path when the device is unmounted, for a later mount', () => {
    const asw = setup()
    const name = 'kubevol.io/fake/disk'
    asw.markVolumeAsAttached(name, spec, '/dev/x')
    asw.markDeviceAsMounted(name, '/dev/x', '/global/disk')
    expect(asw.getAttachedVolume(name)).toMatchObject({ deviceMountState: 'mounted', deviceMountPath: '/global/disk' })
    asw.markDeviceAsUnmounted(name)
    expect(asw.getAttachedVolume(name)).toMatchObject({ deviceMountState: 'not-mounted', deviceMountPath: '', devicePath: '/dev/x' })
  })

  it('marks reconstructed mounts uncertain and remembers them until confirmed', () => {
    const asw = setup()
    const name = 'kubevol.io/fake/disk'
    asw.addAttachUncertainReconstructedVolume(name, spec, '')
    expect(asw.checkAndMarkVolumeAsUncertainViaReconstruction(opts('a'))).toBe(true)
    expect(asw.checkAndMarkVolumeAsUncertainViaReconstruction(opts('a'))).toBe(false)
    expect(asw.isVolumeReconstructed(name, 'a')).toBe(true)
    expect(asw.checkAndMarkDeviceUncertainViaReconstruction(name, '/global/disk')).toBe(true)
    asw.updateReconstructedDevicePath(name, '/dev/y')
    asw.updateReconstructedVolumeAttachability(name, true)
    expect(asw.getAttachedVolume(name)).toMatchObject({ devicePath: '/dev/y', attachability: 'attachable' })
    asw.markVolumeAsMounted(opts('a'))
    expect(asw.isVolumeReconstructed(name, 'a')).toBe(false)
  })

  it('initializes the claim size only once', () => {
    const asw = setup()
    const { pv } = buildClaim({ claim: 'c' })
    const name = 'kubevol.io/fake/pv-c'
    asw.markVolumeAsAttached(name, specFromPersistentVolume(pv, false), '')
    asw.initializeClaimSize(name, 100)
    asw.initializeClaimSize(name, 200)
    expect(asw.getClaimSize(name)).toBe(100)
  })

  it('reports another pod for RWOP enforcement', () => {
    const asw = setup()
    asw.markVolumeAsAttached('kubevol.io/fake/disk', spec, '')
    asw.markVolumeAsMounted(opts('a'))
    expect(asw.isVolumeMountedElsewhere('kubevol.io/fake/disk', 'a')).toBe(false)
    expect(asw.isVolumeMountedElsewhere('kubevol.io/fake/disk', 'b')).toBe(true)
  })

  it('announces every change with the volume name', () => {
    const asw = setup()
    const seen: string[] = []
    asw.changes.subscribe((name) => seen.push(name))
    asw.markVolumeAsAttached('kubevol.io/fake/disk', spec, '')
    asw.markVolumeAsMounted(opts('a'))
    expect(seen).toEqual(['kubevol.io/fake/disk', 'kubevol.io/fake/disk'])
  })
})
