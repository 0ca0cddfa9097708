/**
 * The playground's engine: a real volume manager from @kubevol/core on the in-memory host of
 * @kubevol/adapter-mock, with pods to add and remove, faults to inject and a crash to survive.
 * No DOM here: the Vue component renders what this module reports, and a Node test drives the same
 * code, so the page and the test cannot disagree.
 */
import { type MemoryHost, createMemoryHost } from '@kubevol/adapter-mock'
import {
  type Clock,
  type OperationRecord,
  type Pod,
  type Volume,
  type VolumeManager,
  type VolumeManagerEvent,
  HostError,
  VolumeOperationFailure,
  createVolumeManager,
  systemClock,
} from '@kubevol/core'
import { createBuiltinPlugins } from '@kubevol/core/plugins'
import {
  type FakePlugin,
  type FakeStep,
  type MemoryObjectReader,
  type MemoryPodSource,
  buildPod,
  createFakePlugin,
  createMemoryObjectReader,
  createMemoryPodSource,
} from '@kubevol/core/testing'
import { type Activity, createActivity, recordPluginSteps } from './activity.js'
import { type Picture, buildPicture } from './picture.js'

/** The volume types a pod in the playground can have. */
export const VOLUME_KINDS = ['disk', 'scratch', 'emptyDir', 'memory', 'hostPath', 'configMap', 'secret', 'downwardAPI', 'projected'] as const
export type VolumeKind = (typeof VOLUME_KINDS)[number]

/** What each kind is, in a few words, for the form. */
export const VOLUME_KIND_LABELS: Readonly<Record<VolumeKind, string>> = {
  disk: 'disk (attachable, shared device)',
  scratch: 'scratch (per-pod, fake plugin)',
  emptyDir: 'emptyDir',
  memory: 'emptyDir (medium: Memory)',
  hostPath: 'hostPath',
  configMap: 'configMap',
  secret: 'secret',
  downwardAPI: 'downwardAPI',
  projected: 'projected',
}

/** The steps of the fake plugins that faults can target. */
export const FAULT_STEPS: readonly FakeStep[] = ['attach', 'mountDevice', 'setUp', 'tearDown', 'unmountDevice', 'detach']
export type FaultMode = 'fail-once' | 'fail-3' | 'uncertain' | 'hang'

export const DISK_PLUGIN = 'example.com/disk'
export const SCRATCH_PLUGIN = 'example.com/scratch'
const ROOT = '/var/lib/kubevol'
const NODE_NAME = 'node-1'

/** One line of the operation timeline. */
export interface TimelineEntry {
  readonly id: number
  /** Milliseconds since the playground started. */
  readonly at: number
  readonly kind: 'start' | 'ok' | 'error' | 'event' | 'note'
  readonly text: string
}

export interface DesiredRow {
  readonly pod: string
  readonly volume: string
  readonly plugin: string
  readonly uniqueName: string
}

export interface MountedRow {
  readonly pod: string
  readonly volume: string
  readonly state: string
  readonly reconstructed: boolean
}

export interface AttachedRow {
  readonly volume: string
  readonly plugin: string
  readonly device: string
  readonly deviceState: string
  readonly pods: number
}

export interface PodRow {
  readonly uid: string
  readonly name: string
  readonly volumes: readonly string[]
  /** Every volume mounted (the pod could start). */
  readonly ready: boolean
}

export interface PlaygroundView {
  readonly pods: readonly PodRow[]
  readonly desired: readonly DesiredRow[]
  readonly mounted: readonly MountedRow[]
  readonly attached: readonly AttachedRow[]
  readonly hostMounts: readonly string[]
  readonly timeline: readonly TimelineEntry[]
  readonly hanging: number
  readonly restarts: number
  /** The reconcile picture and the per-volume timeline, drawn from the same state. */
  readonly picture: Picture
}

export interface Playground {
  /** Adds a pod with one volume of each kind given. `disk` volumes use the disk name given (pods that name the same disk share it). */
  addPod(name: string, kinds: readonly VolumeKind[], options?: { disk?: string }): Pod
  removePod(uid: string): void
  /** Makes the next call(s) of `step` of the disk and scratch plugins fail, end uncertain or hang. */
  injectFault(step: FakeStep, mode: FaultMode): void
  /** Makes the next `times` host mount calls fail with EIO (hits every volume type). */
  failHostMounts(times: number): void
  /** Lets hung steps finish. */
  releaseHangs(): void
  /** Drops the manager without any clean-up (a process crash) and starts a new one on the same host: it reconstructs. */
  crashAndRestart(): Promise<void>
  view(): PlaygroundView
  /** Calls `listener` after anything changed (batched per microtask). */
  subscribe(listener: () => void): () => void
  readonly host: MemoryHost
  manager(): VolumeManager
  dispose(): void
}

/** A hang injected by `injectFault`: armed until a call reaches it, then holding that call. */
interface PendingHang {
  release(error?: Error): void
  /** Disarms it (a call already held stays held until released). */
  remove(): void
}

export interface PlaygroundOptions {
  /** @default the system clock: live updates, real backoff */
  readonly clock?: Clock
  /** How many timeline entries are kept. @default 200 */
  readonly timelineLimit?: number
}

function volumeOf(kind: VolumeKind, disk: string): Volume {
  switch (kind) {
    case 'disk':
      return { name: 'data', fake: { name: disk, plugin: DISK_PLUGIN } }
    case 'scratch':
      return { name: 'scratch', fake: { name: 'scratch', plugin: SCRATCH_PLUGIN } }
    case 'emptyDir':
      return { name: 'cache', emptyDir: {} }
    case 'memory':
      return { name: 'shm', emptyDir: { medium: 'Memory', sizeLimit: '64Mi' } }
    case 'hostPath':
      return { name: 'logs', hostPath: { path: '/var/log/playground', type: 'DirectoryOrCreate' } }
    case 'configMap':
      return { name: 'config', configMap: { name: 'app-config' } }
    case 'secret':
      return { name: 'creds', secret: { secretName: 'app-secret' } }
    case 'downwardAPI':
      return { name: 'podinfo', downwardAPI: { items: [{ path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } }] } }
    case 'projected':
      return {
        name: 'bundle',
        projected: {
          sources: [{ configMap: { name: 'app-config' } }, { downwardAPI: { items: [{ path: 'name', fieldRef: { fieldPath: 'metadata.name' } }] } }],
        },
      }
  }
}

/** Creates a playground. Call `dispose()` to stop its manager. */
export function createPlayground(options: PlaygroundOptions = {}): Playground {
  const clock = options.clock ?? systemClock
  const limit = options.timelineLimit ?? 200
  const t0 = clock.now()
  const host = createMemoryHost({ clock })
  const pods: MemoryPodSource = createMemoryPodSource([], { ready: true })
  const objects: MemoryObjectReader = createMemoryObjectReader()
  objects.put('ConfigMap', { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'app-config', namespace: 'default' }, data: { 'app.yaml': 'replicas: 2\n' } })
  objects.put('Secret', { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'app-secret', namespace: 'default' }, data: { password: 'c2VjcmV0' } })
  // The plugins stand for the world outside the process (a cloud's disks), so they outlive a crash.
  const disks: FakePlugin = createFakePlugin({ name: DISK_PLUGIN, attachable: true })
  const scratch: FakePlugin = createFakePlugin({ name: SCRATCH_PLUGIN })
  const builtins = createBuiltinPlugins()
  const podNames = new Map<string, string>()
  const timeline: TimelineEntry[] = []
  const listeners = new Set<() => void>()
  const hangs: PendingHang[] = []
  const faultRemovers: (() => void)[] = []
  const activity: Activity = createActivity(() => clock.now() - t0, { steppedPlugins: [DISK_PLUGIN, SCRATCH_PLUGIN] })
  let nextId = 0
  let restarts = 0
  let disposed = false

  let notifyScheduled = false
  const notify = (): void => {
    if (notifyScheduled) return
    notifyScheduled = true
    void Promise.resolve().then(() => {
      notifyScheduled = false
      for (const listener of listeners) listener()
    })
  }
  const log = (kind: TimelineEntry['kind'], text: string): void => {
    timeline.push({ id: nextId++, at: clock.now() - t0, kind, text })
    if (timeline.length > limit) timeline.splice(0, timeline.length - limit)
    notify()
  }

  // Unique volume names are `plugin/name` for shared devices and `plugin/<pod uid>-<name>` per pod.
  const shortVolume = (volumeName: string): string => {
    const name = volumeName.split('/').slice(2).join('/')
    for (const uid of podNames.keys()) if (name.startsWith(`${uid}-`)) return name.slice(uid.length + 1)
    return name
  }
  const podLabel = (podName: string): string => {
    if (!podName) return 'node'
    const uid = podName.split('/').pop() ?? podName
    return podNames.get(uid) ?? uid
  }
  const describe = (op: OperationRecord): string => `${op.name} ${podLabel(op.podName)}/${shortVolume(op.volumeName)}`
  const volumeLabel = (volumeName: string): string => {
    const name = volumeName.split('/').slice(2).join('/')
    for (const [uid, pod] of podNames) if (name.startsWith(`${uid}-`)) return `${pod}/${name.slice(uid.length + 1)}`
    return name
  }

  recordPluginSteps(activity, disks, true)
  recordPluginSteps(activity, scratch, false)
  const retryAt = (failed: { lane: string; podName: string; name: string }): number | undefined => {
    const executor = current.manager.executor
    for (const pod of [failed.podName, '']) {
      const failure = executor.lastFailure(failed.lane, pod)
      if (failure?.name === failed.name) return failure.retryAt - t0
    }
    const at = executor.retryAt(failed.lane, '', NODE_NAME)
    return at === undefined ? undefined : at - t0
  }

  const onEvent = (event: VolumeManagerEvent): void => {
    if (event.type === 'operation') {
      const op = event.operation
      activity.operation(op)
      if (op.endedAt === undefined) log('start', `▶ ${describe(op)}`)
      else if (op.error) log('error', `✗ ${describe(op)} after ${op.endedAt - op.startedAt} ms: ${op.error}`)
      else log('ok', `✓ ${describe(op)} in ${op.endedAt - op.startedAt} ms`)
    } else if (event.type === 'event') {
      const e = event.event
      log('event', `⚑ ${e.type} ${e.reason} (${e.target.kind} ${e.target.metadata.name ?? ''}): ${e.message}`)
    } else notify()
  }

  let current: { manager: VolumeManager; stop: AbortController; running: Promise<void>; off: () => void }
  const start = (): void => {
    const manager = createVolumeManager({
      host,
      plugins: [disks, scratch, ...builtins],
      podSource: pods,
      objects,
      nodeName: NODE_NAME,
      rootDir: ROOT,
      controllerAttachDetach: false,
      clock,
      resyncPeriodMs: 2_000,
    })
    const off = manager.subscribe(onEvent)
    const stop = new AbortController()
    const running = manager.run(stop.signal)
    current = { manager, stop, running, off }
  }
  start()
  log('note', 'manager started on an empty in-memory node')

  const playground: Playground = {
    host,
    manager: () => current.manager,
    addPod(name, kinds, opts = {}) {
      const uid = `uid-${name}-${nextId}`
      const unique = [...new Set(kinds)]
      const built = buildPod({ name, uid, volumes: unique.map((k) => volumeOf(k, opts.disk ?? 'disk-1')) })
      const pod: Pod = { ...built, metadata: { ...built.metadata, labels: { app: name } } }
      podNames.set(uid, name)
      log('note', `pod ${name} added with ${unique.join(', ') || 'no volumes'}`)
      pods.setPod(pod)
      return pod
    },
    removePod(uid) {
      log('note', `pod ${podNames.get(uid) ?? uid} deleted`)
      pods.deletePod(uid)
    },
    injectFault(step, mode) {
      const fault = mode === 'fail-once' ? 'fails once' : mode === 'fail-3' ? 'fails 3 times' : mode === 'uncertain' ? 'ends uncertain once' : 'hangs'
      log('note', `fault: the next ${step} ${fault}`)
      if (mode === 'hang') {
        // One hang shared by both plugins: the first call of the step, in either, is held.
        let release!: (error?: Error) => void
        const released = new Promise<Error | undefined>((resolve) => {
          release = resolve
        })
        let used = false
        const removers: (() => void)[] = []
        const hang: PendingHang = {
          release: (error) => release(error),
          remove: () => {
            for (const remove of removers) remove()
          },
        }
        for (const plugin of [disks, scratch]) {
          removers.push(
            plugin.intercept(async (call, next) => {
              if (used || call.step !== step) return next()
              used = true
              hang.remove()
              log('note', `${step} of ${call.volume} is hanging: release it, or crash and restart`)
              const error = await released
              if (error) throw error
              return next()
            }),
          )
        }
        hangs.push(hang)
      } else {
        // One fault shared by both plugins: whichever reaches the step first uses it up.
        const shared = { left: mode === 'fail-3' ? 3 : 1 }
        const uncertain = mode === 'uncertain'
        for (const plugin of [disks, scratch]) {
          faultRemovers.push(
            plugin.intercept(async (call, next) => {
              if (call.step !== step || shared.left <= 0) return next()
              shared.left--
              // Uncertain: the step did its work, but the caller cannot know (a timeout, say).
              if (uncertain) await next()
              throw new VolumeOperationFailure(
                uncertain ? 'uncertain' : 'final',
                uncertain ? `injected: ${step} of ${call.volume} timed out, it may have happened` : `injected: ${step} of ${call.volume} failed`,
              )
            }),
          )
        }
      }
      notify()
    },
    failHostMounts(times) {
      log('note', `fault: the next ${times} host mount call(s) fail with EIO`)
      let left = times
      const remove = host.faults.intercept((call, next) => {
        if (call.method !== 'mount' || left <= 0) return next()
        left--
        if (left === 0) remove()
        throw new HostError('EIO', 'mount', call.path ?? '', 'injected')
      })
    },
    releaseHangs() {
      const n = hangs.length
      for (const hang of hangs.splice(0)) {
        hang.remove()
        hang.release()
      }
      if (n > 0) log('note', 'hung steps released')
    },
    async crashAndRestart() {
      log('note', 'crash: the manager process is gone (in-memory state lost; host, journal and mounts remain)')
      current.off()
      current.stop.abort()
      // A crash takes hung calls with it: their late results must not reach the new manager.
      for (const hang of hangs.splice(0)) {
        hang.remove()
        hang.release(new Error('process crashed'))
      }
      for (const remove of faultRemovers.splice(0)) remove()
      activity.crash()
      await current.running
      restarts++
      start()
      log('note', 'restart: a new manager reconstructs the actual state from the journal and the pods directory')
    },
    view() {
      const s = current.manager.snapshot()
      const podsNow = pods.getPods()
      const mountedKeys = new Set(s.mounted.filter((m) => m.mountState === 'mounted').map((m) => `${m.podName}|${m.volumeName}`))
      return {
        pods: podsNow.map((pod) => {
          const uid = pod.metadata.uid ?? ''
          const desired = s.desired.filter((d) => d.pod.metadata.uid === uid)
          return {
            uid,
            name: pod.metadata.name ?? uid,
            volumes: (pod.spec?.volumes ?? []).map((v) => v.name),
            ready: desired.length > 0 && desired.every((d) => mountedKeys.has(`${d.podName}|${d.volumeName}`)),
          }
        }),
        desired: s.desired.map((d) => ({ pod: podLabel(d.podName), volume: d.outerVolumeSpecNames[0] ?? d.spec.name, plugin: d.pluginName, uniqueName: d.volumeName })),
        mounted: s.mounted.map((m) => ({ pod: podLabel(m.podName), volume: m.outerVolumeSpecName || shortVolume(m.volumeName), state: m.mountState, reconstructed: m.reconstructed })),
        attached: s.attached
          .filter((a) => a.attachability === 'attachable' || a.deviceMountState !== 'not-mounted')
          .map((a) => ({ volume: shortVolume(a.volumeName), plugin: a.pluginName, device: a.devicePath, deviceState: a.deviceMountState, pods: a.mountedPods.length })),
        hostMounts: host.mountTargets().filter((t) => t.startsWith(ROOT)).map((t) => t.slice(ROOT.length + 1)),
        timeline: [...timeline],
        hanging: hangs.length,
        restarts,
        picture: buildPicture({ snapshot: s, activity, now: clock.now() - t0, retryAt, podLabel, volumeLabel }),
      }
    },
    subscribe(listener) {
      listeners.add(listener)
      return () => listeners.delete(listener)
    },
    dispose() {
      if (disposed) return
      disposed = true
      current.off()
      current.stop.abort()
      for (const hang of hangs.splice(0)) {
        hang.remove()
        hang.release(new Error('playground closed'))
      }
      listeners.clear()
    },
  }
  return playground
}
