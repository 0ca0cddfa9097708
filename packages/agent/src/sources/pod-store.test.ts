import type { Pod } from '@kubevol/core'
import { describe, expect, it } from 'vitest'
import { createPodStore } from './pod-store.js'

const pod = (uid: string, extra: Partial<Pod['metadata']> = {}, phase?: string): Pod => ({
  metadata: { name: uid, namespace: 'default', uid, resourceVersion: '1', ...extra },
  spec: { containers: [] },
  ...(phase ? { status: { phase } } : {}),
})

describe('the pod store', () => {
  it.each([
    ['running', pod('a'), false],
    ['marked for deletion', pod('a', { deletionTimestamp: '2026-01-01T00:00:00Z' }), true],
    ['succeeded', pod('a', {}, 'Succeeded'), true],
    ['failed', pod('a', {}, 'Failed'), true],
  ])('takes a %s pod as terminating (and its runtime as gone) accordingly', (_name, p, terminating) => {
    const store = createPodStore()
    store.set(p)
    expect(store.shouldPodContainersBeTerminating('a')).toBe(terminating)
    expect(store.shouldPodRuntimeBeRemoved('a')).toBe(terminating)
  })

  it('takes an unknown or removed pod as gone', () => {
    const store = createPodStore()
    expect(store.shouldPodRuntimeBeRemoved('x')).toBe(true)
    store.set(pod('a'))
    store.delete('a')
    expect(store.shouldPodRuntimeBeRemoved('a')).toBe(true)
    expect(store.getPodByUID('a')).toBeUndefined()
  })

  it('announces only real changes', () => {
    const store = createPodStore()
    let changes = 0
    store.subscribe(() => changes++)
    store.set(pod('a'))
    store.set(pod('a'))
    store.replaceAll([pod('a'), pod('b')])
    store.replaceAll([pod('a'), pod('b')])
    store.setReady(true)
    store.setReady(true)
    store.set(pod('a', { resourceVersion: '2' }))
    expect(changes).toBe(4)
    expect(store.getPods().map((p) => p.metadata.uid)).toEqual(['a', 'b'])
  })
})
