// Which plugin serves a volume, and what it can do: the plugin manager asks each plugin's
// `canSupport` (exactly one must say yes) and reads its capabilities from the members it has.
import { type Volume, type VolumeSpec, specFromPersistentVolume, specFromVolume } from '@kubevol/core'
import { createBuiltinPlugins, createCsiDriverRegistry, createCsiPlugin } from '@kubevol/core/plugins'
import { createTestPluginManager } from '@kubevol/core/testing'

export async function run() {
  const plugins = createTestPluginManager([...createBuiltinPlugins(), createCsiPlugin({ drivers: createCsiDriverRegistry() })])
  const inline: Volume[] = [
    { name: 'cache', emptyDir: {} },
    { name: 'shm', emptyDir: { medium: 'Memory' } },
    { name: 'logs', hostPath: { path: '/var/log' } },
    { name: 'config', configMap: { name: 'app' } },
    { name: 'token', projected: { sources: [] } },
    { name: 'scratch', csi: { driver: 'scratch.csi.example.com' } },
  ]
  const specs: VolumeSpec[] = [
    ...inline.map(specFromVolume),
    specFromPersistentVolume({ metadata: { name: 'pv-db' }, spec: { csi: { driver: 'disk.csi.example.com', volumeHandle: 'vol-7' } } }, false),
    specFromPersistentVolume({ metadata: { name: 'pv-local' }, spec: { local: { path: '/mnt/disks/ssd1' } } }, false),
  ]
  const rows = specs.map((spec) => {
    const plugin = plugins.findPluginBySpec(spec)
    const can = [
      plugins.findAttachablePluginBySpec(spec) ? 'attach' : '',
      plugins.findDeviceMountablePluginBySpec(spec) ? 'device mount' : '',
      plugin.requiresRemount(spec) ? 'remount on sync' : '',
    ].filter(Boolean)
    return { volume: spec.name, plugin: plugin.name, volumeName: plugin.getVolumeName(spec), can }
  })
  const lines = rows.map((r) => `${r.volume.padEnd(9)} → ${r.plugin.padEnd(26)} ${r.volumeName.padEnd(32)} ${r.can.join(', ') || '-'}`)
  return { lines: ['volume      plugin                       volume name                      capabilities', ...lines], rows }
}
