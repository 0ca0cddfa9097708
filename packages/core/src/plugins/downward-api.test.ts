import { describe, expect, it } from 'vitest'
import { buildPod } from '../testing/builders.js'
import { makeDownwardAPIPayload } from './downward-api.js'

describe('makeDownwardAPIPayload', () => {
  const pod = { ...buildPod({ name: 'web', uid: 'u-1' }), metadata: { name: 'web', namespace: 'default', uid: 'u-1', labels: { b: '2', a: '1' } } }

  it('projects each item with its own mode or the default, paths cleaned', () => {
    const payload = makeDownwardAPIPayload(
      pod,
      [
        { path: './name', fieldRef: { fieldPath: 'metadata.name' } },
        { path: 'meta/labels', fieldRef: { fieldPath: 'metadata.labels' }, mode: 0o400 },
        { path: 'cpu', resourceFieldRef: { containerName: 'main', resource: 'limits.cpu', divisor: '1m' } },
      ],
      0o644,
      { cpu: '2' },
    )
    expect(Object.fromEntries([...payload].map(([k, v]) => [k, [v.data, v.mode.toString(8)]]))).toEqual({
      name: ['web', '644'],
      'meta/labels': ['a="1"\nb="2"', '400'],
      cpu: ['2000', '644'],
    })
  })

  it.each([
    { name: 'one failing item', items: [{ path: 'x', fieldRef: { fieldPath: 'status.podIP' } }], error: 'unsupported fieldPath: status.podIP' },
    {
      name: 'every failing item together',
      items: [
        { path: 'x', fieldRef: { fieldPath: 'status.podIP' } },
        { path: 'y', fieldRef: { fieldPath: 'metadata.name' } },
        { path: 'z', resourceFieldRef: { containerName: 'ghost', resource: 'limits.cpu' } },
      ],
      error: '[unsupported fieldPath: status.podIP, container ghost not found]',
    },
  ])('reports $name', ({ items, error }) => {
    expect(() => makeDownwardAPIPayload(pod, items, 0o644)).toThrow(error)
  })
})
