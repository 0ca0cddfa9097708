/**
 * The built-in volume plugins, ready to register with the manager.
 */
import type { AtomicWriterPluginOptions } from './atomic-writer-volume.js'
import { createConfigMapPlugin } from './config-map.js'
import { createDownwardAPIPlugin } from './downward-api.js'
import { createEmptyDirPlugin, type EmptyDirPluginOptions } from './empty-dir.js'
import { createFileDiskPlugin } from './file-disk.js'
import { createHostPathPlugin } from './host-path.js'
import { createLocalPlugin } from './local.js'
import type { VolumePlugin } from './plugin.js'
import { createProjectedPlugin } from './projected.js'
import { createSecretPlugin } from './secret.js'

export interface BuiltinPluginOptions {
  readonly emptyDir?: EmptyDirPluginOptions
  /** Node allocatable resources: the size of tmpfs-backed volumes, and downward API values of containers without limits. */
  readonly atomicWriter?: AtomicWriterPluginOptions
}

/** emptyDir, hostPath, configMap, secret, downwardAPI, projected, local and fileDisk. */
export function createBuiltinPlugins(options: BuiltinPluginOptions = {}): VolumePlugin[] {
  return [
    createEmptyDirPlugin(options.emptyDir),
    createHostPathPlugin(),
    createConfigMapPlugin(),
    createSecretPlugin(options.atomicWriter),
    createDownwardAPIPlugin(options.atomicWriter),
    createProjectedPlugin(options.atomicWriter),
    createLocalPlugin(),
    createFileDiskPlugin(),
  ]
}
