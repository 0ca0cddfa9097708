/**
 * A configurable volume plugin for tests: attachable, device-mountable, block-capable and
 * expandable as asked, doing real work on the Host it is given (tmpfs for devices, binds into pods),
 * with interceptors that make any step fail, hang or end uncertain. Faults are injected through
 * interceptors, never through magic volume names.
 */
import type { Pod } from '../api/kubernetes.js'
import type { VolumeSpec } from '../api/volume-spec.js'
import { VolumeOperationFailure } from '../errors.js'
import type { Host } from '../host/host.js'
import { joinPath } from '../paths.js'
import type { Paths } from '../paths.js'
import type { VolumePlugin, VolumePluginContext } from '../plugins/plugin.js'

export const FAKE_PLUGIN_NAME = 'kubevol.io/fake'

/** The steps an interceptor can act on. */
export type FakeStep =
  | 'attach'
  | 'waitForAttach'
  | 'detach'
  | 'mountDevice'
  | 'unmountDevice'
  | 'setUp'
  | 'tearDown'
  | 'setUpDevice'
  | 'mapPodDevice'
  | 'unmapPodDevice'
  | 'tearDownDevice'
  | 'nodeExpand'

export interface FakeCall {
  readonly step: FakeStep
  /** The volume's name as the plugin sees it (inline name or PV name). */
  readonly volume: string
  /** The pod UID, for per-pod steps. */
  readonly podUID?: string
}

export type FakeInterceptor = (call: FakeCall, next: () => Promise<void>) => Promise<void>

export interface FakePluginOptions {
  /** @default 'kubevol.io/fake' */
  readonly name?: string
  /** @default false */
  readonly attachable?: boolean
  /** @default false (true when attachable) */
  readonly deviceMountable?: boolean
  /** @default false */
  readonly block?: boolean
  /** @default false */
  readonly expandable?: boolean
  /** @default false */
  readonly requiresRemount?: boolean
  /** @default true */
  readonly supportsMountOption?: boolean
}

/** A hung step: it returns when released (successfully, or with an error). */
export interface Hang {
  /** Resolves once a call is hanging. */
  readonly reached: Promise<FakeCall>
  release(error?: Error): void
}

export interface FakePlugin extends VolumePlugin {
  /** Devices attached now: volume name → device path. */
  readonly attached: ReadonlyMap<string, string>
  /** Volume sizes after expansion: volume name → bytes. */
  readonly expandedTo: ReadonlyMap<string, number>
  /** Adds an interceptor; returns its remover. */
  intercept(interceptor: FakeInterceptor): () => void
  /** The next `times` calls (default: every call) of `step` (for `volume`, if given) fail with a final error. */
  fail(step: FakeStep, options?: { volume?: string; times?: number; message?: string; kind?: 'final' | 'uncertain' | 'transient' }): () => void
  /** The next call of `step` hangs until released. */
  hang(step: FakeStep, options?: { volume?: string }): Hang
}

/** The name the fake plugin gives a spec: `spec.volume.fake.name`/PV `spec.fake.name`, else the spec name. */
function volumeNameOf(spec: VolumeSpec): string {
  const source = (spec.volume?.fake ?? spec.persistentVolume?.spec?.fake) as { name?: string } | undefined
  return source?.name ?? spec.name
}

/**
 * Creates a fake plugin. It supports inline volumes and PVs that have a `fake` source
 * (`{ name: 'data', fake: {} }`) naming it in `fake.plugin` (default `kubevol.io/fake`), so
 * several fake plugins can serve different volumes side by side.
 */
export function createFakePlugin(options: FakePluginOptions = {}): FakePlugin {
  const name = options.name ?? FAKE_PLUGIN_NAME
  const attachable = options.attachable ?? false
  const deviceMountable = options.deviceMountable ?? attachable
  let host: Host
  let paths: Paths
  const attached = new Map<string, string>()
  const expandedTo = new Map<string, number>()
  const interceptors: FakeInterceptor[] = []

  const step = async (call: FakeCall, work: () => Promise<void>): Promise<void> => {
    // Without interceptors (most calls) the work itself, awaited as the chain would be: no chain built.
    if (interceptors.length === 0) {
      await work()
      return
    }
    const chain = interceptors.reduceRight<() => Promise<void>>((next, interceptor) => () => interceptor(call, next), work)
    await chain()
  }
  const podVolumeDir = (podUID: string, volume: string): string => paths.podVolumeDir(podUID, name, volume)
  const deviceMountPath = (spec: VolumeSpec): string => joinPath(paths.pluginDir(name), 'mounts', volumeNameOf(spec))
  const globalMapPath = (spec: VolumeSpec): string => joinPath(paths.volumeDevicePluginDir(name), volumeNameOf(spec))

  async function unmountAndRemove(dir: string): Promise<void> {
    if (!(await host.lstat(dir))) return
    if (await host.isMountPoint(dir)) await host.unmount(dir)
    await host.remove(dir)
  }

  const plugin: FakePlugin = {
    name,
    attached,
    expandedTo,
    init(context: VolumePluginContext) {
      host = context.host
      paths = context.paths
    },
    canSupport: (spec) => {
      const source = (spec.volume?.fake ?? spec.persistentVolume?.spec?.fake) as { plugin?: string } | undefined
      return source !== undefined && (source.plugin ?? FAKE_PLUGIN_NAME) === name
    },
    getVolumeName: volumeNameOf,
    requiresRemount: () => options.requiresRemount ?? false,
    supportsMountOption: () => options.supportsMountOption ?? true,
    newMounter(spec: VolumeSpec, pod: Pod) {
      const podUID = pod.metadata.uid ?? ''
      const dir = podVolumeDir(podUID, spec.name)
      return {
        getPath: () => dir,
        getAttributes: () => ({ readOnly: spec.readOnly, managed: true, seLinuxRelabel: false }),
        setUp: () =>
          step({ step: 'setUp', volume: volumeNameOf(spec), podUID }, async () => {
            await host.mkdir(dir, { recursive: true })
            if (await host.isMountPoint(dir)) return
            if (deviceMountable) await host.mount({ source: deviceMountPath(spec), target: dir, bind: true, readOnly: spec.readOnly })
            else await host.mount({ source: 'tmpfs', target: dir, fstype: 'tmpfs' })
          }),
      }
    },
    newUnmounter(innerName: string, podUID: string) {
      const dir = podVolumeDir(podUID, innerName)
      return {
        getPath: () => dir,
        tearDown: () => step({ step: 'tearDown', volume: innerName, podUID }, () => unmountAndRemove(dir)),
      }
    },
    ...(attachable
      ? {
          attach: {
            canAttach: () => true,
            attach: async (spec: VolumeSpec) => {
              const volume = volumeNameOf(spec)
              const device = `/dev/fake/${volume}`
              await step({ step: 'attach', volume }, async () => {
                attached.set(volume, device)
              })
              return device
            },
            // As a local attacher does (fileDisk): no device path means the attach was reconstructed
            // after a crash, maybe before it happened, so waiting for it is attaching again (idempotent).
            waitForAttach: async (spec: VolumeSpec, devicePath: string) => {
              const volume = volumeNameOf(spec)
              let device = devicePath
              await step({ step: 'waitForAttach', volume }, async () => {
                if (device) return
                device = `/dev/fake/${volume}`
                attached.set(volume, device)
              })
              return device
            },
            detach: (volume: string) =>
              step({ step: 'detach', volume }, async () => {
                attached.delete(volume)
              }),
          },
        }
      : {}),
    ...(deviceMountable
      ? {
          deviceMount: {
            canDeviceMount: () => true,
            getDeviceMountPath: deviceMountPath,
            mountDevice: (spec: VolumeSpec, devicePath: string, path: string) =>
              step({ step: 'mountDevice', volume: volumeNameOf(spec) }, async () => {
                await host.mkdir(path, { recursive: true })
                if (!(await host.isMountPoint(path))) {
                  await host.mount({ source: devicePath || `fake-${volumeNameOf(spec)}`, target: path, fstype: 'tmpfs' })
                }
              }),
            unmountDevice: (path: string) =>
              step({ step: 'unmountDevice', volume: path.slice(path.lastIndexOf('/') + 1) }, () => unmountAndRemove(path)),
            getDeviceMountRefs: async (path: string) => {
              const mounts = await host.mounts()
              const own = mounts.find((m) => m.target === path)
              if (!own) return []
              return mounts.filter((m) => m.target !== path && m.device === own.device && m.root === own.root).map((m) => m.target)
            },
          },
        }
      : {}),
    ...(options.block
      ? {
          block: {
            newBlockVolumeMapper(spec: VolumeSpec, pod: Pod) {
              const podUID = pod.metadata.uid ?? ''
              const volume = volumeNameOf(spec)
              return {
                getGlobalMapPath: globalMapPath,
                getPodDeviceMapPath: () => ({ dir: paths.podVolumeDeviceDir(podUID, name), linkName: spec.name }),
                setUpDevice: async () => {
                  await step({ step: 'setUpDevice', volume }, async () => {})
                  return globalMapPath(spec)
                },
                mapPodDevice: async () => {
                  await step({ step: 'mapPodDevice', volume, podUID }, async () => {})
                  return attached.get(volume) ?? ''
                },
              }
            },
            newBlockVolumeUnmapper(innerName: string, podUID: string) {
              return {
                getGlobalMapPath: globalMapPath,
                getPodDeviceMapPath: () => ({ dir: paths.podVolumeDeviceDir(podUID, name), linkName: innerName }),
                unmapPodDevice: () => step({ step: 'unmapPodDevice', volume: innerName, podUID }, async () => {}),
                tearDownDevice: (mapPath: string) =>
                  step({ step: 'tearDownDevice', volume: mapPath.slice(mapPath.lastIndexOf('/') + 1) }, async () => {}),
              }
            },
          },
        }
      : {}),
    ...(options.expandable
      ? {
          nodeExpand: {
            requiresFSResize: () => true,
            nodeExpand: async (opts: { spec: VolumeSpec; newSize: number }) => {
              await step({ step: 'nodeExpand', volume: volumeNameOf(opts.spec) }, async () => {
                expandedTo.set(volumeNameOf(opts.spec), opts.newSize)
              })
              return true
            },
          },
        }
      : {}),
    intercept(interceptor) {
      interceptors.push(interceptor)
      return () => {
        const i = interceptors.indexOf(interceptor)
        if (i >= 0) interceptors.splice(i, 1)
      }
    },
    fail(target, opts = {}) {
      let left = opts.times ?? Number.POSITIVE_INFINITY
      const remove = plugin.intercept(async (call, next) => {
        if (call.step !== target || (opts.volume !== undefined && call.volume !== opts.volume) || left <= 0) return next()
        left--
        throw new VolumeOperationFailure(opts.kind ?? 'final', opts.message ?? `injected ${target} failure`)
      })
      return remove
    },
    hang(target, opts = {}) {
      let release!: (error?: Error) => void
      let reached!: (call: FakeCall) => void
      const reachedPromise = new Promise<FakeCall>((resolve) => {
        reached = resolve
      })
      const released = new Promise<Error | undefined>((resolve) => {
        release = resolve
      })
      let used = false
      const remove = plugin.intercept(async (call, next) => {
        if (used || call.step !== target || (opts.volume !== undefined && call.volume !== opts.volume)) return next()
        used = true
        remove()
        reached(call)
        const error = await released
        if (error) throw error
        return next()
      })
      return { reached: reachedPromise, release: (error?: Error) => release(error) }
    },
  }
  return plugin
}
