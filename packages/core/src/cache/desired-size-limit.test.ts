import { describe, expect, it } from 'vitest'
import { specFromVolume } from '../api/volume-spec.js'
import { buildPod } from '../testing/builders.js'
import { desiredSizeLimitOf } from './desired-size-limit.js'

describe('desiredSizeLimitOf (SPEC §3.2.2)', () => {
  const limited = {
    ...buildPod(),
    spec: {
      containers: [
        { name: 'a', resources: { limits: { 'ephemeral-storage': '1Gi' } } },
        { name: 'b', resources: { limits: { 'ephemeral-storage': '1Gi' } } },
      ],
    },
  }
  const gi = 2 ** 30
  it.each([
    { name: 'sizeLimit below pod limit', volume: { name: 'e', emptyDir: { sizeLimit: '1Gi' } }, pod: limited, size: gi },
    { name: 'sizeLimit above pod limit', volume: { name: 'e', emptyDir: { sizeLimit: '3Gi' } }, pod: limited, size: 2 * gi },
    { name: 'no sizeLimit', volume: { name: 'e', emptyDir: {} }, pod: limited, size: 2 * gi },
    { name: 'configMap', volume: { name: 'c', configMap: { name: 'x' } }, pod: limited, size: 2 * gi },
    { name: 'no pod limit', volume: { name: 'e', emptyDir: { sizeLimit: '3Gi' } }, pod: buildPod(), size: 3 * gi },
    { name: 'no limits at all', volume: { name: 'e', emptyDir: {} }, pod: buildPod(), size: 0 },
    { name: 'memory emptyDir has none', volume: { name: 'e', emptyDir: { medium: 'Memory' } }, pod: limited, size: undefined },
  ])('$name', ({ volume, pod, size }) => {
    expect(desiredSizeLimitOf(pod, specFromVolume(volume))).toBe(size)
  })
})
