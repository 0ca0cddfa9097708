/**
 * Finds the plugin for a volume spec or a plugin name (kubelet `VolumePluginMgr`, SPEC §7.1).
 */
import type { UniquePodName, UniqueVolumeName } from '../api/names.js'
import type { VolumeSpec } from '../api/volume-spec.js'
import { ConfigError, VolumeSpecError } from '../errors.js'
import type { VolumePlugin, VolumePluginContext } from './plugin.js'

/**
 * The unique name of the volume `spec` describes (SPEC §3.1, kubelet `GetUniqueVolumeNameFromSpec`
 * and `GetUniqueVolumeName`): `<plugin>/<plugin.getVolumeName(spec)>` when the plugin attaches or
 * device-mounts it (one device shared by every pod), `<plugin>/<pod>-<spec name>` otherwise. The
 * plugin part is the plugin's `uniqueNamePrefix` when it has one. Throws what the plugin throws.
 */
export function uniqueVolumeNameOf(plugin: VolumePlugin, spec: VolumeSpec, podName: UniquePodName): UniqueVolumeName {
  const prefix = plugin.uniqueNamePrefix ?? plugin.name
  const shared = (plugin.attach?.canAttach(spec) ?? false) || (plugin.deviceMount?.canDeviceMount(spec) ?? false)
  return shared ? `${prefix}/${plugin.getVolumeName(spec)}` : `${prefix}/${podName}-${spec.name}`
}

/** The plugin's volume name inside a shared-device unique name (what `detach` is given). */
export function volumeNameInUniqueName(plugin: VolumePlugin, uniqueName: UniqueVolumeName): string {
  const prefix = `${plugin.uniqueNamePrefix ?? plugin.name}/`
  return uniqueName.startsWith(prefix) ? uniqueName.slice(prefix.length) : uniqueName.slice(plugin.name.length + 1)
}

const QUALIFIED_NAME = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/

export interface PluginManager {
  readonly plugins: readonly VolumePlugin[]
  /** The one plugin that supports `spec`. Throws "no volume plugin matched" or "multiple volume plugins matched: a,b". */
  findPluginBySpec(spec: VolumeSpec): VolumePlugin
  /** Throws "no volume plugin matched name: X". */
  findPluginByName(name: string): VolumePlugin
  /** The plugin when it can attach this spec, else null. */
  findAttachablePluginBySpec(spec: VolumeSpec): VolumePlugin | null
  /** The plugin when it can device-mount this spec, else null. */
  findDeviceMountablePluginBySpec(spec: VolumeSpec): VolumePlugin | null
}

/**
 * True when the attachable plugin of one of `volumes` reports that the node ran out of what
 * attaching takes (kubelet `VerifyExhaustedResource`, asked for each unattached volume in turn until
 * one says so). A volume with no attachable plugin, or whose plugin cannot tell, is not.
 */
export async function attachResourceExhausted(plugins: PluginManager, volumes: Iterable<{ readonly spec: VolumeSpec }>): Promise<boolean> {
  for (const { spec } of volumes) {
    let plugin: VolumePlugin | null
    try {
      plugin = plugins.findAttachablePluginBySpec(spec)
    } catch {
      continue
    }
    if (await plugin?.attach?.verifyExhaustedResource?.(spec)) return true
  }
  return false
}

/**
 * Registers plugins and initializes each with `context`. Names must be non-empty qualified names
 * and unique ("volume plugin %q was registered more than once").
 */
export function createPluginManager(plugins: readonly VolumePlugin[], context: VolumePluginContext): PluginManager {
  const byName = new Map<string, VolumePlugin>()
  for (const plugin of plugins) {
    if (!plugin.name || !QUALIFIED_NAME.test(plugin.name)) {
      throw new ConfigError(`volume plugin has an invalid name "${plugin.name}"`)
    }
    if (byName.has(plugin.name)) throw new ConfigError(`volume plugin "${plugin.name}" was registered more than once`)
    byName.set(plugin.name, plugin)
  }
  for (const plugin of byName.values()) {
    try {
      plugin.init?.(context)
    } catch (err) {
      context.logger.error('Failed to load volume plugin', { plugin: plugin.name, err })
      byName.delete(plugin.name)
    }
  }
  const list = [...byName.values()]

  // Asked several times for every volume (populator, reconciler, executor): the one match is found
  // without building a list of matches, which is built only for the error naming them.
  const findPluginBySpec = (spec: VolumeSpec): VolumePlugin => {
    let match: VolumePlugin | undefined
    for (const plugin of list) {
      if (!plugin.canSupport(spec)) continue
      if (match) {
        const matches = list.filter((p) => p.canSupport(spec))
        throw new VolumeSpecError(`multiple volume plugins matched: ${matches.map((p) => p.name).join(',')}`)
      }
      match = plugin
    }
    if (!match) throw new VolumeSpecError('no volume plugin matched')
    return match
  }

  return {
    plugins: list,
    findPluginBySpec,
    findPluginByName(name) {
      const plugin = byName.get(name)
      if (!plugin) throw new VolumeSpecError(`no volume plugin matched name: ${name}`)
      return plugin
    },
    findAttachablePluginBySpec(spec) {
      const plugin = findPluginBySpec(spec)
      return plugin.attach?.canAttach(spec) ? plugin : null
    },
    findDeviceMountablePluginBySpec(spec) {
      const plugin = findPluginBySpec(spec)
      return plugin.deviceMount?.canDeviceMount(spec) ? plugin : null
    },
  }
}
