import { describe, expect, it } from 'vitest'
import { buildPod } from '../testing/builders.js'
import { expectedVolumeNames, splitUniqueVolumeName, uniqueVolumeNameForPod, uniqueVolumeNameFromDevice } from './names.js'
import { parseQuantity } from './quantity.js'

describe('names', () => {
  it('builds unique volume names per device and per pod', () => {
    expect(uniqueVolumeNameFromDevice('kubernetes.io/csi', 'drv^h1')).toBe('kubernetes.io/csi/drv^h1')
    expect(uniqueVolumeNameForPod('kubernetes.io/empty-dir', 'uid1', 'cache')).toBe('kubernetes.io/empty-dir/uid1-cache')
  })

  it.each([
    { name: 'kubernetes.io/empty-dir/uid-v', plugin: 'kubernetes.io/empty-dir', volume: 'uid-v' },
    { name: 'kubernetes.io/csi/drv^a/b', plugin: 'kubernetes.io/csi', volume: 'drv^a/b' },
  ])('splits $name', ({ name, plugin, volume }) => {
    expect(splitUniqueVolumeName(name)).toEqual({ pluginName: plugin, volumeName: volume })
  })

  it('rejects names without a plugin domain', () => {
    expect(splitUniqueVolumeName('plain')).toBeNull()
  })

  it('lists only volumes containers use, init and ephemeral containers included', () => {
    const pod = buildPod({ volumes: [{ name: 'a' }, { name: 'b' }, { name: 'c' }], unused: ['c'], devices: ['b'] })
    const withInit = {
      ...pod,
      spec: { ...pod.spec, initContainers: [{ name: 'init', volumeMounts: [{ name: 'd', mountPath: '/d' }] }] },
    }
    expect(expectedVolumeNames(withInit)).toEqual(['a', 'b', 'd'])
  })
})

describe('parseQuantity', () => {
  it.each([
    ['1Gi', 2 ** 30],
    ['500M', 500e6],
    ['1.5Ki', 1536],
    [1024, 1024],
    ['100m', 1],
    ['2e3', 2000],
  ] as const)('%s', (input, bytes) => {
    expect(parseQuantity(input)).toBe(bytes)
  })

  it('names the bad value', () => {
    expect(() => parseQuantity('12 apples')).toThrow('invalid quantity "12 apples"')
  })
})
