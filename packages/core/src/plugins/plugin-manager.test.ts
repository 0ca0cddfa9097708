import { describe, expect, it } from 'vitest'
import { specFromVolume } from '../api/volume-spec.js'
import { createFakePlugin } from '../testing/fake-plugin.js'
import { createTestPluginManager } from '../testing/plugin-context.js'
import { uniqueVolumeNameOf, volumeNameInUniqueName } from './plugin-manager.js'

describe('createPluginManager', () => {
  it.each([
    { name: 'duplicate names', plugins: () => [createFakePlugin(), createFakePlugin()], error: 'volume plugin "kubevol.io/fake" was registered more than once' },
    { name: 'an invalid name', plugins: () => [createFakePlugin({ name: 'not a name!' })], error: 'volume plugin has an invalid name "not a name!"' },
  ])('rejects $name', ({ plugins, error }) => {
    expect(() => createTestPluginManager(plugins())).toThrow(error)
  })

  it('finds the one plugin that supports a spec, with the kubelet texts otherwise', () => {
    const greedy = { ...createFakePlugin({ name: 'kubevol.io/other' }), canSupport: () => true }
    const manager = createTestPluginManager([createFakePlugin(), greedy])
    expect(() => createTestPluginManager([createFakePlugin()]).findPluginBySpec(specFromVolume({ name: 'x', emptyDir: {} }))).toThrow(
      'no volume plugin matched',
    )
    expect(() => manager.findPluginBySpec(specFromVolume({ name: 'x', fake: {} }))).toThrow(
      'multiple volume plugins matched: kubevol.io/fake,kubevol.io/other',
    )
    expect(() => manager.findPluginByName('kubevol.io/none')).toThrow('no volume plugin matched name: kubevol.io/none')
  })

  it('reports attachable and device-mountable plugins only when they are', () => {
    const spec = specFromVolume({ name: 'x', fake: {} })
    const plain = createTestPluginManager([createFakePlugin()])
    expect(plain.findAttachablePluginBySpec(spec)).toBeNull()
    expect(plain.findDeviceMountablePluginBySpec(spec)).toBeNull()
    const attachable = createTestPluginManager([createFakePlugin({ attachable: true })])
    expect(attachable.findAttachablePluginBySpec(spec)?.name).toBe('kubevol.io/fake')
    expect(attachable.findDeviceMountablePluginBySpec(spec)?.name).toBe('kubevol.io/fake')
  })

  it('names a shared-device volume by its device and a per-pod one by its pod, under the plugin\'s unique-name prefix (SPEC §3.1)', () => {
    const spec = specFromVolume({ name: 'x', fake: { name: 'disk1' } })
    expect(uniqueVolumeNameOf(createFakePlugin({ attachable: true }), spec, 'uid1')).toBe('kubevol.io/fake/disk1')
    expect(uniqueVolumeNameOf(createFakePlugin(), spec, 'uid1')).toBe('kubevol.io/fake/uid1-x')
    const csiNamed = { ...createFakePlugin({ attachable: true }), uniqueNamePrefix: 'kubernetes.io/csi' }
    expect(uniqueVolumeNameOf(csiNamed, spec, 'uid1')).toBe('kubernetes.io/csi/disk1')
    expect(volumeNameInUniqueName(csiNamed, 'kubernetes.io/csi/disk1')).toBe('disk1')
    // A name made before the plugin had a prefix still gives its volume name.
    expect(volumeNameInUniqueName(csiNamed, 'kubevol.io/fake/disk1')).toBe('disk1')
  })
})
