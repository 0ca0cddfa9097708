/**
 * Events as the kubelet's recorder aggregates them: an event identical to an earlier one (same
 * object, type, reason and message) raises that one's count and last time instead of adding a new
 * one. The last `capacity` distinct events are kept in memory for `/v1/events` and status.
 */
import type { Clock, Recorder, VolumeEvent } from '@kubevol/core'

/** The object an event is about, as core/v1 Events name it. */
export interface InvolvedObject {
  readonly kind: string
  readonly namespace?: string
  readonly name: string
  readonly uid?: string
}

/** One aggregated event. */
export interface StoredEvent {
  /** Increasing id, unique in this process. */
  readonly id: number
  readonly type: 'Normal' | 'Warning'
  readonly reason: string
  readonly message: string
  readonly involvedObject: InvolvedObject
  count: number
  /** Clock times, ms. */
  readonly firstTimestamp: number
  lastTimestamp: number
}

export interface EventStore extends Recorder {
  /** Events, oldest first; `podUID` keeps those about one pod. */
  list(filter?: { readonly podUID?: string; readonly limit?: number }): StoredEvent[]
  /** Calls `listener` after each event is recorded (`isNew`: not an aggregated repeat). */
  subscribe(listener: (event: StoredEvent, isNew: boolean) => void): () => void
  /** Number of events recorded, repeats included. */
  readonly total: number
}

function keyOf(event: VolumeEvent): string {
  const o = event.target.metadata
  return JSON.stringify([event.target.kind, o.namespace ?? '', o.name ?? '', o.uid ?? '', event.type, event.reason, event.message])
}

/** Creates an event store that keeps the last `capacity` distinct events. */
export function createEventStore(options: { readonly capacity: number; readonly clock: Clock }): EventStore {
  // Insertion order is recency order: a repeat moves its event to the end.
  const events = new Map<string, StoredEvent>()
  const listeners = new Set<(event: StoredEvent, isNew: boolean) => void>()
  let nextId = 1
  let total = 0
  return {
    get total() {
      return total
    },
    event(event) {
      total++
      const key = keyOf(event)
      const time = event.time || options.clock.now()
      let stored = events.get(key)
      const isNew = stored === undefined
      if (stored) {
        stored.count++
        stored.lastTimestamp = time
        events.delete(key)
      } else {
        const meta = event.target.metadata
        stored = {
          id: nextId++,
          type: event.type,
          reason: event.reason,
          message: event.message,
          involvedObject: {
            kind: event.target.kind,
            ...(meta.namespace ? { namespace: meta.namespace } : {}),
            name: meta.name ?? '',
            ...(meta.uid ? { uid: meta.uid } : {}),
          },
          count: 1,
          firstTimestamp: time,
          lastTimestamp: time,
        }
      }
      events.set(key, stored)
      while (events.size > options.capacity) {
        const oldest = events.keys().next().value as string
        events.delete(oldest)
      }
      for (const listener of [...listeners]) listener(stored, isNew)
    },
    list(filter) {
      let list = [...events.values()]
      if (filter?.podUID) list = list.filter((e) => e.involvedObject.kind === 'Pod' && e.involvedObject.uid === filter.podUID)
      if (filter?.limit !== undefined) list = list.slice(-filter.limit)
      return list.map((e) => ({ ...e, involvedObject: { ...e.involvedObject } }))
    },
    subscribe(listener) {
      listeners.add(listener)
      return () => listeners.delete(listener)
    },
  }
}
