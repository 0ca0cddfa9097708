/**
 * The built-in volume plugins, ready to register with the manager.
 */
import { createEmptyDirPlugin, type EmptyDirPluginOptions } from './empty-dir.js'
import { createFileDiskPlugin } from './file-disk.js'
import { createHostPathPlugin } from './host-path.js'
import { createLocalPlugin } from './local.js'
import type { VolumePlugin } from './plugin.js'

export interface BuiltinPluginOptions {
  readonly emptyDir?: EmptyDirPluginOptions
}

/** emptyDir, hostPath, local and fileDisk (and, as they land, the other built-in types). */
export function createBuiltinPlugins(options: BuiltinPluginOptions = {}): VolumePlugin[] {
  return [createEmptyDirPlugin(options.emptyDir), createHostPathPlugin(), createLocalPlugin(), createFileDiskPlugin()]
}
