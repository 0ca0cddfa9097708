/**
 * A synchronous view of CSIDriver objects (the kubelet's CSIDriver lister). Plugin methods such as
 * `canAttach` and `requiresRemount` are synchronous, so the objects are fetched ahead: when a driver
 * registers, when any object changes, and on every asynchronous step that reads one.
 */
import type { CSIDriver } from '../../api/kubernetes.js'
import { NotFoundError } from '../../errors.js'
import type { ObjectReader } from '../../populator/sources.js'

export interface CsiDriverObjects {
  /** The cached object; null when the API has none; undefined when not fetched yet. */
  peek(name: string): CSIDriver | null | undefined
  /** Fetches (and caches) the object; null when it does not exist. Other read errors reject. */
  fetch(name: string): Promise<CSIDriver | null>
  /** Fetches every name seen so far again. */
  refreshAll(): Promise<void>
}

export function createCsiDriverObjects(objects: () => ObjectReader): CsiDriverObjects {
  const cache = new Map<string, CSIDriver | null>()
  const fetch = async (name: string): Promise<CSIDriver | null> => {
    const reader = objects()
    if (!reader.getCSIDriver) {
      cache.set(name, null)
      return null
    }
    try {
      const object = await reader.getCSIDriver(name)
      cache.set(name, object)
      return object
    } catch (err) {
      if (err instanceof NotFoundError) {
        cache.set(name, null)
        return null
      }
      throw err
    }
  }
  // Object changes come in bursts: one refresh runs at a time, and one more after it when asked meanwhile.
  let running: Promise<void> | undefined
  let again = false
  const refreshAll = (): Promise<void> => {
    if (running) {
      again = true
      return running
    }
    running = (async () => {
      do {
        again = false
        await Promise.allSettled([...cache.keys()].map(fetch))
      } while (again)
      running = undefined
    })()
    return running
  }
  return { peek: (name) => cache.get(name), fetch, refreshAll }
}
