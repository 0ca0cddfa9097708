/**
 * hostPath (`kubernetes.io/host-path`, SPEC §7.4): a path on the node, inline or as a PV. Nothing is
 * mounted: the volume's path is the host path itself. SetUp checks (and for the `...OrCreate` types
 * creates) what the `type` asks for, with the kubelet's error texts.
 */
import type { VolumeSpec } from '../api/volume-spec.js'
import type { FileInfo } from '../host/host.js'
import { dirname } from '../paths.js'
import type { Mounter, VolumePlugin, VolumePluginContext } from './plugin.js'

export const HOST_PATH_PLUGIN_NAME = 'kubernetes.io/host-path'

const KINDS: Readonly<Record<string, { type: FileInfo['type']; text: string }>> = {
  Directory: { type: 'directory', text: 'is not a directory' },
  DirectoryOrCreate: { type: 'directory', text: 'is not a directory' },
  File: { type: 'file', text: 'is not a file' },
  FileOrCreate: { type: 'file', text: 'is not a file' },
  Socket: { type: 'socket', text: 'is not a socket file' },
  CharDevice: { type: 'char-device', text: 'is not a character device' },
  BlockDevice: { type: 'block-device', text: 'is not a block device' },
}

function sourceOf(spec: VolumeSpec): { path: string; type?: string } | undefined {
  return spec.volume?.hostPath ?? spec.persistentVolume?.spec?.hostPath
}

/** Null when the path is acceptable, else the kubelet's reason. */
function validateHostPath(path: string): string | null {
  if (!path.startsWith('/')) return `invalid HostPath \`${path}\`: must be an absolute path`
  if (path.split('/').includes('..')) return `invalid HostPath \`${path}\`: must not contain '..'`
  return null
}

export function createHostPathPlugin(): VolumePlugin {
  let context: VolumePluginContext

  /** Checks (and for *OrCreate types, creates) the path. */
  async function checkType(path: string, type: string): Promise<void> {
    const { host } = context
    if (type === '') return
    const kind = KINDS[type]
    if (!kind) throw new Error(`hostPath type check failed: invalid type "${type}" for ${path}`)
    let info = await host.stat(path)
    if (!info) {
      // A dangling symlink would make "create" write wherever the link points: refuse it.
      if (await host.lstat(path)) throw new Error(`hostPath type check failed: ${path} is a dangling symbolic link`)
      if (type === 'DirectoryOrCreate') {
        await host.mkdir(path, { recursive: true, mode: 0o755 })
      } else if (type === 'FileOrCreate') {
        if (!(await host.stat(dirname(path)))) throw new Error(`hostPath type check failed: ${path}: parent directory does not exist`)
        await host.writeFile(path, '', { mode: 0o644 })
      } else {
        throw new Error(`hostPath type check failed: ${path} ${kind.text}`)
      }
      info = await host.stat(path)
    }
    if (info?.type !== kind.type) throw new Error(`hostPath type check failed: ${path} ${kind.text}`)
  }

  return {
    name: HOST_PATH_PLUGIN_NAME,
    init(ctx) {
      context = ctx
    },
    canSupport: (spec) => sourceOf(spec) !== undefined,
    getVolumeName: (spec) => sourceOf(spec)?.path ?? spec.name,
    requiresRemount: () => false,
    // SetUp leaves nothing of kubevol's: at most the node's own path (DirectoryOrCreate), which no
    // tear-down touches. A crash that loses the intent loses nothing to undo.
    setUpFoundOnDisk: true,
    supportsMountOption: () => false,
    newMounter(spec): Mounter {
      const source = sourceOf(spec)
      if (!source) throw new Error(`volume ${spec.name} is not a hostPath volume`)
      const invalid = validateHostPath(source.path)
      if (invalid) throw new Error(invalid)
      return {
        getPath: () => source.path,
        getAttributes: () => ({ readOnly: spec.readOnly, managed: false, seLinuxRelabel: false }),
        setUp: () => checkType(source.path, source.type ?? ''),
        async getMetrics() {
          if (!context.host.statfs) throw new Error('metrics are not supported')
          return context.host.statfs(source.path)
        },
      }
    },
    newUnmounter(innerName) {
      // The host path is the node's: there is nothing of the pod's to tear down.
      return { getPath: () => innerName, tearDown: async () => {} }
    },
  }
}
