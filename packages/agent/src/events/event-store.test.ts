import type { VolumeEvent } from '@kubevol/core'
import { createFakeClock } from '@kubevol/core/testing'
import { describe, expect, it } from 'vitest'
import { createEventStore } from './event-store.js'

const pod = (uid: string) => ({ kind: 'Pod', metadata: { name: `pod-${uid}`, namespace: 'default', uid } })
const event = (uid: string, reason: string, message: string, time: number): VolumeEvent => ({ type: 'Warning', reason, message, target: pod(uid), time })

describe('the event store', () => {
  it('aggregates identical events into one with a count and first and last times', () => {
    const clock = createFakeClock()
    const store = createEventStore({ capacity: 10, clock })
    const seen: [number, boolean][] = []
    store.subscribe((e, isNew) => seen.push([e.count, isNew]))
    store.event(event('a', 'FailedMount', 'm1', 1_000))
    store.event(event('a', 'FailedMount', 'm1', 2_000))
    store.event(event('a', 'FailedMount', 'm2', 3_000))
    expect(store.list().map((e) => [e.reason, e.message, e.count, e.firstTimestamp, e.lastTimestamp])).toEqual([
      ['FailedMount', 'm1', 2, 1_000, 2_000],
      ['FailedMount', 'm2', 1, 3_000, 3_000],
    ])
    expect(seen).toEqual([
      [1, true],
      [2, false],
      [1, true],
    ])
    expect(store.total).toBe(3)
  })

  it('keeps the last N distinct events, a repeat counting as recent', () => {
    const store = createEventStore({ capacity: 2, clock: createFakeClock() })
    store.event(event('a', 'R', '1', 1))
    store.event(event('a', 'R', '2', 2))
    store.event(event('a', 'R', '1', 3))
    store.event(event('a', 'R', '3', 4))
    expect(store.list().map((e) => e.message)).toEqual(['1', '3'])
  })

  it('filters by pod and limits', () => {
    const store = createEventStore({ capacity: 10, clock: createFakeClock() })
    store.event(event('a', 'R', '1', 1))
    store.event(event('b', 'R', '2', 2))
    store.event(event('a', 'R', '3', 3))
    expect(store.list({ podUID: 'a' }).map((e) => e.message)).toEqual(['1', '3'])
    expect(store.list({ podUID: 'a', limit: 1 }).map((e) => e.message)).toEqual(['3'])
  })
})
