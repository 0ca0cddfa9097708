/**
 * A plugin manager for unit tests of the caches, whose plugins never touch a host.
 */
import type { Host } from '../host/host.js'
import { silentLogger, silentMetrics, silentRecorder } from '../observability.js'
import { createPaths } from '../paths.js'
import { type PluginManager, createPluginManager } from '../plugins/plugin-manager.js'
import type { VolumePlugin } from '../plugins/plugin.js'
import { createFakeClock } from './fake-clock.js'
import { createMemoryObjectReader } from '../populator/memory-sources.js'

/** A host whose every call fails: for code that must not touch one. */
export const unreachableHost: Host = new Proxy({} as Host, {
  get(_target, property) {
    if (property === 'then') return undefined
    return () => Promise.reject(new Error(`unexpected host call ${String(property)}`))
  },
})

/** Registers `plugins` with a context that has no usable host. */
export function createTestPluginManager(plugins: readonly VolumePlugin[]): PluginManager {
  return createPluginManager(plugins, {
    host: unreachableHost,
    paths: createPaths('/var/lib/kubevol'),
    nodeName: 'node-1',
    objects: createMemoryObjectReader(),
    clock: createFakeClock(),
    logger: silentLogger,
    recorder: silentRecorder,
    metrics: silentMetrics,
  })
}
