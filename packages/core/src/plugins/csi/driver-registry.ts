/**
 * The node's registered CSI drivers: name → CsiDriver (the kubelet's `csiDrivers` map, filled by
 * plugin registration or static configuration).
 */
import type { CsiDriver } from './csi-driver.js'

/** What is known of a registered driver. */
export interface RegisteredCsiDriver {
  readonly name: string
  readonly driver: CsiDriver
  /** The unix socket the driver listens on, when known. */
  readonly endpoint?: string
  /** Versions the driver said it supports at registration. */
  readonly versions?: readonly string[]
}

export interface CsiDriverRegistry {
  /** Adds or replaces a driver; a replaced driver's connection is closed. */
  register(entry: RegisteredCsiDriver): void
  /** Removes a driver and closes its connection; unknown names are ignored. */
  unregister(name: string): void
  get(name: string): RegisteredCsiDriver | undefined
  list(): readonly RegisteredCsiDriver[]
  /** Calls `listener` with the driver's name after each change; returns the unsubscribe function. */
  subscribe(listener: (name: string) => void): () => void
}

/** An empty registry. */
export function createCsiDriverRegistry(initial: readonly RegisteredCsiDriver[] = []): CsiDriverRegistry {
  const drivers = new Map<string, RegisteredCsiDriver>()
  const listeners = new Set<(name: string) => void>()
  for (const entry of initial) drivers.set(entry.name, entry)
  const changed = (name: string): void => {
    for (const listener of listeners) listener(name)
  }
  return {
    register(entry) {
      const old = drivers.get(entry.name)
      if (old && old.driver !== entry.driver) old.driver.close?.()
      drivers.set(entry.name, entry)
      changed(entry.name)
    },
    unregister(name) {
      const old = drivers.get(name)
      if (!old) return
      drivers.delete(name)
      old.driver.close?.()
      changed(name)
    },
    get: (name) => drivers.get(name),
    list: () => [...drivers.values()],
    subscribe(listener) {
      listeners.add(listener)
      return () => listeners.delete(listener)
    },
  }
}
