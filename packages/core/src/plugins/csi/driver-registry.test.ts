import { describe, expect, it } from 'vitest'
import type { CsiDriver } from './csi-driver.js'
import { createCsiDriverRegistry } from './driver-registry.js'

/** A driver that only knows whether it was closed. */
function closable(): CsiDriver & { closed: boolean } {
  const fail = () => Promise.reject(new Error('not used'))
  const driver = {
    closed: false,
    getPluginInfo: fail,
    nodeGetInfo: fail,
    nodeGetCapabilities: fail,
    nodeStageVolume: fail,
    nodeUnstageVolume: fail,
    nodePublishVolume: fail,
    nodeUnpublishVolume: fail,
    nodeExpandVolume: fail,
    nodeGetVolumeStats: fail,
    close() {
      driver.closed = true
    },
  }
  return driver
}

describe('CSI driver registry', () => {
  it('announces changes, and closes a driver that is replaced or unregistered', () => {
    const registry = createCsiDriverRegistry()
    const seen: string[] = []
    registry.subscribe((name) => seen.push(name))
    const first = closable()
    const second = closable()
    registry.register({ name: 'a.example.com', driver: first })
    registry.register({ name: 'a.example.com', driver: second, endpoint: '/run/a.sock' })
    expect(first.closed).toBe(true)
    expect(registry.get('a.example.com')?.endpoint).toBe('/run/a.sock')
    registry.unregister('a.example.com')
    registry.unregister('a.example.com')
    expect(second.closed).toBe(true)
    expect(registry.list()).toEqual([])
    expect(seen).toEqual(['a.example.com', 'a.example.com', 'a.example.com'])
  })
})
