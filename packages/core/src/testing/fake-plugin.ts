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
 * What the fake plugin's capabilities share: the host and paths given at `init`, the state tests
 * read, and `step`, which runs a step's work through the interceptors.
 */
class FakeState {
  host!: Host
  paths!: Paths
  readonly attached = new Map<string, string>()
  readonly expandedTo = new Map<string, number>()
  readonly interceptors: FakeInterceptor[] = []

  constructor(readonly name: string) {}

  async step(call: FakeCall, work: () => Promise<void>): Promise<void> {
    // Without interceptors (most calls) the work itself, awaited as the chain would be: no chain built.
    if (this.interceptors.length === 0) {
      await work()
      return
    }
    const chain = this.interceptors.reduceRight<() => Promise<void>>((next, interceptor) => () => interceptor(call, next), work)
    await chain()
  }

  podVolumeDir(podUID: string, volume: string): string {
    return this.paths.podVolumeDir(podUID, this.name, volume)
  }

  deviceMountPath(spec: VolumeSpec): string {
    return joinPath(this.paths.pluginDir(this.name), 'mounts', volumeNameOf(spec))
  }

  globalMapPath(spec: VolumeSpec): string {
    return joinPath(this.paths.volumeDevicePluginDir(this.name), volumeNameOf(spec))
  }

  async unmountAndRemove(dir: string): Promise<void> {
    if (!(await this.host.lstat(dir))) return
    if (await this.host.isMountPoint(dir)) await this.host.unmount(dir)
    await this.host.remove(dir)
  }
}

/** A pod's volume: a bind of the device mount when there is one, else a tmpfs of its own. */
function fakeMounter(state: FakeState, deviceMountable: boolean, spec: VolumeSpec, pod: Pod) {
  const podUID = pod.metadata.uid ?? ''
  const dir = state.podVolumeDir(podUID, spec.name)
  const { host } = state
  return {
    getPath: () => dir,
    getAttributes: () => ({ readOnly: spec.readOnly, managed: true, seLinuxRelabel: false }),
    setUp: () =>
      state.step({ step: 'setUp', volume: volumeNameOf(spec), podUID }, async () => {
        await host.mkdir(dir, { recursive: true })
        if (await host.isMountPoint(dir)) return
        if (deviceMountable) await host.mount({ source: state.deviceMountPath(spec), target: dir, bind: true, readOnly: spec.readOnly })
        else await host.mount({ source: 'tmpfs', target: dir, fstype: 'tmpfs' })
      }),
  }
}

function fakeAttacher(state: FakeState): NonNullable<VolumePlugin['attach']> {
  const { attached } = state
  return {
    canAttach: () => true,
    attach: async (spec: VolumeSpec) => {
      const volume = volumeNameOf(spec)
      const device = `/dev/fake/${volume}`
      await state.step({ step: 'attach', volume }, async () => {
        attached.set(volume, device)
      })
      return device
    },
    // As a local attacher does (fileDisk): no device path means the attach was reconstructed
    // after a crash, maybe before it happened, so waiting for it is attaching again (idempotent).
    waitForAttach: async (spec: VolumeSpec, devicePath: string) => {
      const volume = volumeNameOf(spec)
      let device = devicePath
      await state.step({ step: 'waitForAttach', volume }, async () => {
        if (device) return
        device = `/dev/fake/${volume}`
        attached.set(volume, device)
      })
      return device
    },
    detach: (volume: string) =>
      state.step({ step: 'detach', volume }, async () => {
        attached.delete(volume)
      }),
  }
}

/** The device step: a tmpfs named for the device at the device mount path. */
function fakeDeviceMounter(state: FakeState): NonNullable<VolumePlugin['deviceMount']> {
  return {
    canDeviceMount: () => true,
    getDeviceMountPath: (spec) => state.deviceMountPath(spec),
    mountDevice: (spec: VolumeSpec, devicePath: string, path: string) =>
      state.step({ step: 'mountDevice', volume: volumeNameOf(spec) }, async () => {
        await state.host.mkdir(path, { recursive: true })
        if (!(await state.host.isMountPoint(path))) {
          await state.host.mount({ source: devicePath || `fake-${volumeNameOf(spec)}`, target: path, fstype: 'tmpfs' })
        }
      }),
    unmountDevice: (path: string) => state.step({ step: 'unmountDevice', volume: path.slice(path.lastIndexOf('/') + 1) }, () => state.unmountAndRemove(path)),
    getDeviceMountRefs: async (path: string) => {
      const mounts = await state.host.mounts()
      const own = mounts.find((m) => m.target === path)
      if (!own) return []
      return mounts.filter((m) => m.target !== path && m.device === own.device && m.root === own.root).map((m) => m.target)
    },
  }
}

/** Block volumes: every step goes through the interceptors and does nothing else. */
function fakeBlock(state: FakeState): NonNullable<VolumePlugin['block']> {
  const { name } = state
  const globalMapPath = (spec: VolumeSpec): string => state.globalMapPath(spec)
  return {
    newBlockVolumeMapper(spec: VolumeSpec, pod: Pod) {
      const podUID = pod.metadata.uid ?? ''
      const volume = volumeNameOf(spec)
      return {
        getGlobalMapPath: globalMapPath,
        getPodDeviceMapPath: () => ({ dir: state.paths.podVolumeDeviceDir(podUID, name), linkName: spec.name }),
        setUpDevice: async () => {
          await state.step({ step: 'setUpDevice', volume }, async () => {})
          return globalMapPath(spec)
        },
        mapPodDevice: async () => {
          await state.step({ step: 'mapPodDevice', volume, podUID }, async () => {})
          return state.attached.get(volume) ?? ''
        },
      }
    },
    newBlockVolumeUnmapper(innerName: string, podUID: string) {
      return {
        getGlobalMapPath: globalMapPath,
        getPodDeviceMapPath: () => ({ dir: state.paths.podVolumeDeviceDir(podUID, name), linkName: innerName }),
        unmapPodDevice: () => state.step({ step: 'unmapPodDevice', volume: innerName, podUID }, async () => {}),
        tearDownDevice: (mapPath: string) => state.step({ step: 'tearDownDevice', volume: mapPath.slice(mapPath.lastIndexOf('/') + 1) }, async () => {}),
      }
    },
  }
}

function fakeExpander(state: FakeState): NonNullable<VolumePlugin['nodeExpand']> {
  return {
    requiresFSResize: () => true,
    nodeExpand: async (opts: { spec: VolumeSpec; newSize: number }) => {
      await state.step({ step: 'nodeExpand', volume: volumeNameOf(opts.spec) }, async () => {
        state.expandedTo.set(volumeNameOf(opts.spec), opts.newSize)
      })
      return true
    },
  }
}

/** Whether an interceptor for `target` (and `volume`, if given) acts on this call. */
const matches = (call: FakeCall, target: FakeStep, volume: string | undefined): boolean => call.step === target && (volume === undefined || call.volume === volume)

/** An interceptor that makes the next `times` matching calls fail. */
function failing(target: FakeStep, opts: Parameters<FakePlugin['fail']>[1] = {}): FakeInterceptor {
  let left = opts.times ?? Number.POSITIVE_INFINITY
  return async (call, next) => {
    if (!matches(call, target, opts.volume) || left <= 0) return next()
    left--
    throw new VolumeOperationFailure(opts.kind ?? 'final', opts.message ?? `injected ${target} failure`)
  }
}

/** Holds the next matching call until released; the interceptor removes itself when it is used. */
function hanging(plugin: FakePlugin, target: FakeStep, opts: { volume?: string }): Hang {
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
    if (used || !matches(call, target, opts.volume)) return next()
    used = true
    remove()
    reached(call)
    const error = await released
    if (error) throw error
    return next()
  })
  return { reached: reachedPromise, release: (error?: Error) => release(error) }
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
  const state = new FakeState(name)
  const plugin: FakePlugin = {
    name,
    attached: state.attached,
    expandedTo: state.expandedTo,
    init(context: VolumePluginContext) {
      state.host = context.host
      state.paths = context.paths
    },
    canSupport: (spec) => {
      const source = (spec.volume?.fake ?? spec.persistentVolume?.spec?.fake) as { plugin?: string } | undefined
      return source !== undefined && (source.plugin ?? FAKE_PLUGIN_NAME) === name
    },
    getVolumeName: volumeNameOf,
    requiresRemount: () => options.requiresRemount ?? false,
    supportsMountOption: () => options.supportsMountOption ?? true,
    newMounter: (spec: VolumeSpec, pod: Pod) => fakeMounter(state, deviceMountable, spec, pod),
    newUnmounter(innerName: string, podUID: string) {
      const dir = state.podVolumeDir(podUID, innerName)
      return { getPath: () => dir, tearDown: () => state.step({ step: 'tearDown', volume: innerName, podUID }, () => state.unmountAndRemove(dir)) }
    },
    ...(attachable ? { attach: fakeAttacher(state) } : {}),
    ...(deviceMountable ? { deviceMount: fakeDeviceMounter(state) } : {}),
    ...(options.block ? { block: fakeBlock(state) } : {}),
    ...(options.expandable ? { nodeExpand: fakeExpander(state) } : {}),
    intercept(interceptor) {
      state.interceptors.push(interceptor)
      return () => {
        const i = state.interceptors.indexOf(interceptor)
        if (i >= 0) state.interceptors.splice(i, 1)
      }
    },
    fail: (target, opts) => plugin.intercept(failing(target, opts)),
    hang: (target, opts = {}) => hanging(plugin, target, opts),
  }
  return plugin
}
