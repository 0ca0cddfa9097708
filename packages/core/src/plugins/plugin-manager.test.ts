import { describe, expect, it } from 'vitest'
import { specFromVolume } from '../api/volume-spec.js'
import { createFakePlugin } from '../testing/fake-plugin.js'
import { createTestPluginManager } from '../testing/plugin-context.js'

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
})
