/**
 * The set-up and tear-down that local and fileDisk volumes share: bind a global path into the pod's
 * volume directory (read-only when asked: a bind, then a read-only remount), apply fsGroup, and
 * undo it without ever deleting content that is still mounted.
 */
import type { Pod } from '../../api/kubernetes.js'
import { dirname } from '../../paths.js'
import type { Mounter, MounterArgs, Unmounter, VolumePluginContext } from '../plugin.js'
import { cleanupMountPoint, mountReferences } from './cleanup-mount-point.js'
import { applyFsGroup } from './fs-group.js'

export interface BindMounterOptions {
  readonly context: VolumePluginContext
  readonly pluginName: string
  readonly pod: Pod
  /** What to bind: the device's global mount, or a local directory. */
  readonly source: () => string
  /** The pod's volume directory. */
  readonly dir: string
  readonly readOnly: boolean
  readonly mountOptions: readonly string[]
  /** Where the applied fsGroup is recorded for this pod. */
  readonly fsGroupRecord: string
}

/** A mounter that binds `source` into the pod (kubelet local volume `SetUpAt`, SPEC §7.5). */
export function createBindMounter(options: BindMounterOptions): Mounter {
  const { context, dir, pod } = options
  return {
    getPath: () => dir,
    getAttributes: () => ({ readOnly: options.readOnly, managed: !options.readOnly, seLinuxRelabel: true }),
    async setUp(args: MounterArgs) {
      const { host } = context
      await host.mkdir(dir, { recursive: true, mode: 0o750 })
      if (!(await host.isMountPoint(dir))) {
        const source = options.source()
        const others = await mountReferences(host, source)
        if (args.fsGroup !== undefined && others.some((ref) => ref !== dir)) {
          const info = await host.stat(source)
          if (info && info.gid !== args.fsGroup) {
            context.recorder.event({
              type: 'Warning',
              reason: 'AlreadyMountedVolume',
              message: `The requested fsGroup is ${args.fsGroup}, but the volume ${dir} has GID ${info.gid}. The volume may not be shareable.`,
              target: { kind: 'Pod', metadata: pod.metadata },
              time: context.clock.now(),
            })
          }
        }
        try {
          await host.mount({ source, target: dir, bind: true, readOnly: options.readOnly, options: options.mountOptions })
        } catch (err) {
          // Half-mounted or not: leave nothing behind but what was there.
          await cleanupMountPoint(host, dir).catch(() => undefined)
          throw err
        }
      }
      if (!options.readOnly && args.fsGroup !== undefined) {
        await host.mkdir(dirname(options.fsGroupRecord), { recursive: true, mode: 0o750 })
        await applyFsGroup(context, {
          dir,
          fsGroup: args.fsGroup,
          policy: args.fsGroupChangePolicy,
          readOnly: false,
          recordPath: options.fsGroupRecord,
          pod,
          pluginName: options.pluginName,
        })
      }
    },
    async getMetrics() {
      if (!context.host.statfs) throw new Error('metrics are not supported')
      return context.host.statfs(dir)
    },
  }
}

/** Unmounts the pod's bind and removes its directory and its per-pod plugin data. */
export function createBindUnmounter(context: VolumePluginContext, dir: string, pluginDataDir: string): Unmounter {
  return {
    getPath: () => dir,
    async tearDown() {
      await cleanupMountPoint(context.host, dir)
      await context.host.removeAll(pluginDataDir)
    },
  }
}
