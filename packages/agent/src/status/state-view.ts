/**
 * The JSON answers of `/v1/state` and `/v1/pods/<uid>`: the manager's desired and actual state,
 * what runs and what backs off, and per pod volume the answer to "why is my pod stuck?".
 */
import type { Clock, MountedVolume, OperationRecord, Pod, PodSource, UniqueVolumeName, Volume, VolumeManager, VolumeToMount } from '@kubevol/core'
import type { PodWorkerStatus } from '../pods/pod-workers.js'
import type { OperationTracker } from './operation-tracker.js'

export interface StateViewSources {
  readonly nodeName: string
  readonly mode: 'static' | 'api'
  readonly manager: VolumeManager
  readonly pods: PodSource
  readonly clock: Clock
  readonly tracker: OperationTracker
  readonly worker: (uid: string) => PodWorkerStatus | undefined
  /** Extra sections (volumesInUse, manifest errors, ...). */
  readonly extra?: () => Record<string, unknown>
  /** An operation running this long is shown as stuck. */
  readonly stuckAfterMs?: number
}

/** A failed operation waiting for its backoff to end. */
export interface BackoffView {
  readonly volumeName: string
  readonly podName: string
  readonly operation: string
  readonly error: string
  readonly retryAt: string
  readonly durationMs: number
}

const iso = (ms: number): string => new Date(ms).toISOString()

/**
 * The pod volume types kubevol mounts (a claim's PV may be `csi`, `local` or `hostPath`). Any other
 * type (`nfs`, `iscsi`, ...) is refused with "no volume plugin matched", as a kubelet without the
 * plugin refuses it.
 */
const SUPPORTED_VOLUME_TYPES: readonly string[] = ['configMap', 'csi', 'downwardAPI', 'emptyDir', 'ephemeral', 'hostPath', 'persistentVolumeClaim', 'projected', 'secret']

/** The source key of a pod volume: `emptyDir`, `nfs`, ... (undefined when it has none). */
function volumeSourceOf(volume: Volume | undefined): string | undefined {
  return volume ? Object.keys(volume).find((k) => k !== 'name') : undefined
}

/**
 * A volume's type as `run`, `status` and `explain` all show it: the plugin's short name
 * (`kubernetes.io/empty-dir` → `empty-dir`), `(Memory)` for a Memory emptyDir, and without a plugin
 * the pod volume's source key (`nfs`).
 */
function volumeTypeOf(pluginName: string | undefined, volume: Volume | undefined): string {
  const base = pluginName ? pluginName.slice(pluginName.lastIndexOf('/') + 1) : (volumeSourceOf(volume) ?? 'unknown')
  const medium = (volume as { emptyDir?: { medium?: string } } | undefined)?.emptyDir?.medium
  return medium ? `${base} (${medium})` : base
}

/** The kubelet mounts only the volumes a container mounts (volumeMounts) or maps (volumeDevices). */
function isVolumeUsed(pod: Pod | undefined, name: string): boolean {
  const containers = [...(pod?.spec?.initContainers ?? []), ...(pod?.spec?.containers ?? [])] as { volumeMounts?: { name: string }[]; volumeDevices?: { name: string }[] }[]
  return containers.some((c) => c.volumeMounts?.some((m) => m.name === name) || c.volumeDevices?.some((d) => d.name === name))
}

const specVolume = (pod: Pod | undefined, name: string): Volume | undefined => pod?.spec?.volumes?.find((v) => v.name === name)

/** Every (volume, pod) key the manager knows, and each volume alone. */
function keysOf(manager: VolumeManager): [UniqueVolumeName, string][] {
  const keys = new Map<string, [UniqueVolumeName, string]>()
  const add = (v: UniqueVolumeName, p: string): void => {
    keys.set(`${v}\n${p}`, [v, p])
  }
  for (const vtm of manager.desiredState.getVolumesToMount()) {
    add(vtm.volumeName, vtm.podName)
    add(vtm.volumeName, '')
  }
  for (const mv of manager.actualState.getAllMountedVolumes()) add(mv.volumeName, mv.podName)
  for (const av of manager.actualState.getAttachedVolumes()) add(av.volumeName, '')
  return [...keys.values()]
}

/** Failed operations whose retry time is still ahead. */
export function backoffsOf(manager: VolumeManager, now: number): BackoffView[] {
  const result: BackoffView[] = []
  const seen = new Set<string>()
  for (const [volumeName, podName] of keysOf(manager)) {
    const failure = manager.executor.lastFailure(volumeName, podName)
    if (!failure || failure.retryAt <= now) continue
    // A volume-wide record matches every pod: list it once.
    const id = `${volumeName}\n${failure.name}\n${failure.retryAt}`
    if (seen.has(id)) continue
    seen.add(id)
    result.push({
      volumeName,
      podName,
      operation: failure.name,
      error: failure.error instanceof Error ? failure.error.message : String(failure.error),
      retryAt: iso(failure.retryAt),
      durationMs: failure.durationMs,
    })
  }
  return result
}

/**
 * Where one (volume, pod) stands, as `/v1/state` and `/v1/pods/<uid>` both report it, so that
 * `kubevol status` and `kubevol explain` never disagree: the phase, the failures in a row and the
 * last error (kept after the backoff has run out, until an operation succeeds), and the backoff.
 */
interface VolumeProgress {
  readonly phase: string
  readonly attempts: number
  readonly lastError?: string
  readonly lastOperation?: string
  readonly backoff?: { readonly operation: string; readonly retryAt: string; readonly durationMs: number }
}

function progressOf(
  s: StateViewSources,
  now: number,
  running: readonly OperationRecord[],
  uid: string,
  vtm: VolumeToMount | undefined,
  mv: MountedVolume | undefined,
): VolumeProgress {
  const { manager } = s
  const volumeName = (vtm?.volumeName ?? mv?.volumeName) as UniqueVolumeName
  const op = running.find((o) => o.volumeName === volumeName && (o.podName === uid || o.podName === ''))
  const failure = manager.executor.lastFailure(volumeName, uid)
  const backingOff = failure !== undefined && failure.retryAt > now
  const history = s.tracker.history(volumeName, uid)
  let phase: string
  if (op) phase = s.stuckAfterMs !== undefined && now - op.startedAt >= s.stuckAfterMs ? `stuck in ${op.name}` : `running ${op.name}`
  else if (backingOff) phase = 'backing-off'
  else if (mv?.mountState === 'mounted' && vtm) phase = 'mounted'
  else if (mv?.mountState === 'uncertain') phase = 'uncertain'
  else if (mv && !vtm) phase = 'unmounting'
  else if (vtm?.pluginIsAttachable && !manager.actualState.getAttachedVolume(volumeName)) phase = vtm.reportedInUse ? 'waiting-for-attach' : 'waiting-for-report-in-use'
  else phase = 'waiting'
  return {
    phase,
    attempts: history?.attempts ?? 0,
    ...(history?.lastError ? { lastError: history.lastError, lastOperation: history.lastOperation } : {}),
    ...(failure ? { backoff: { operation: failure.name, retryAt: iso(failure.retryAt), durationMs: failure.durationMs } } : {}),
  }
}

/** `/v1/state`. */
export function stateView(s: StateViewSources): Record<string, unknown> {
  const { manager } = s
  const snap = manager.snapshot()
  const now = s.clock.now()
  const running = s.tracker.running()
  const mountedOf = new Map(snap.mounted.map((m) => [`${m.volumeName}\n${m.podName}`, m]))
  return {
    nodeName: s.nodeName,
    mode: s.mode,
    time: iso(now),
    sourcesReady: s.pods.allReady(),
    populatorHasAddedPods: snap.sourcesReady,
    statesSynced: snap.statesSynced,
    desired: snap.desired.map((v) => ({
      volumeName: v.volumeName,
      podUID: v.podName,
      pod: `${v.pod.metadata.namespace ?? 'default'}/${v.pod.metadata.name ?? ''}`,
      outerVolumeSpecNames: v.outerVolumeSpecNames,
      pluginName: v.pluginName,
      type: volumeTypeOf(v.pluginName, specVolume(v.pod, v.outerVolumeSpecNames[0] ?? '')),
      attachable: v.pluginIsAttachable,
      deviceMountable: v.pluginIsDeviceMountable,
      reportedInUse: v.reportedInUse,
      mountRequestTime: iso(v.mountRequestTime),
      ...progressOf(s, now, running, v.podName, v, mountedOf.get(`${v.volumeName}\n${v.podName}`)),
    })),
    actual: {
      mounted: snap.mounted.map((m) => ({
        volumeName: m.volumeName,
        podUID: m.podUID,
        outerVolumeSpecName: m.outerVolumeSpecName,
        pluginName: m.pluginName,
        type: volumeTypeOf(m.pluginName, specVolume(s.pods.getPodByUID(m.podUID), m.outerVolumeSpecName)),
        mountState: m.mountState,
        deviceMountPath: m.deviceMountPath,
        remountRequired: m.remountRequired,
        reconstructed: m.reconstructed,
      })),
      attached: snap.attached.map((a) => ({
        volumeName: a.volumeName,
        pluginName: a.pluginName,
        attachability: a.attachability,
        devicePath: a.devicePath,
        deviceMountPath: a.deviceMountPath,
        deviceMountState: a.deviceMountState,
        mountedPods: a.mountedPods,
      })),
    },
    pendingOperations: running.map((op) => ({ ...op, startedAt: iso(op.startedAt) })),
    backoffs: backoffsOf(manager, now),
    podErrors: Object.fromEntries(snap.podErrors),
    volumesInUse: manager.getVolumesInUse(),
    ...s.extra?.(),
  }
}

/** `/v1/pods/<uid>`, or undefined when nothing is known of the pod. */
export function podView(s: StateViewSources, uid: string): Record<string, unknown> | undefined {
  const { manager } = s
  const pod = s.pods.getPodByUID(uid)
  const worker = s.worker(uid)
  const desired = manager.desiredState.getVolumesToMountForPod(uid)
  const mounted = manager.actualState.getPossiblyMountedVolumesForPod(uid)
  if (!pod && !worker && desired.length === 0 && mounted.length === 0) return undefined
  const now = s.clock.now()
  const meta = pod?.metadata
  const names = new Set<string>([
    ...(pod?.spec?.volumes ?? []).map((v) => v.name),
    ...desired.flatMap((v) => v.outerVolumeSpecNames),
    ...mounted.map((m) => m.outerVolumeSpecName),
  ])
  const running = s.tracker.running()
  const volumes = [...names].sort().map((outer) => {
    const vtm = desired.find((v) => v.outerVolumeSpecNames.includes(outer))
    const mv = mounted.find((m) => m.outerVolumeSpecName === outer || (vtm !== undefined && m.volumeName === vtm.volumeName))
    if (vtm === undefined && mv === undefined) {
      const spec = specVolume(pod, outer)
      const type = volumeTypeOf(undefined, spec)
      // As the kubelet: a volume no container mounts is not mounted, and nothing waits for it.
      if (spec && !isVolumeUsed(pod, outer)) return { name: outer, type, phase: 'unused', desired: false, reason: 'no container mounts it' }
      const source = volumeSourceOf(spec)
      if (source !== undefined && !SUPPORTED_VOLUME_TYPES.includes(source)) {
        return { name: outer, type, phase: 'unsupported', desired: false, reason: `volume type ${source} is not supported; supported: ${SUPPORTED_VOLUME_TYPES.join(', ')}` }
      }
      return { name: outer, type, phase: spec ? 'not-desired' : 'unknown', desired: false }
    }
    const volumeName = (vtm?.volumeName ?? mv?.volumeName) as UniqueVolumeName
    const attached = manager.actualState.getAttachedVolume(volumeName)
    const progress = progressOf(s, now, running, uid, vtm, mv)
    return {
      name: outer,
      volumeName,
      pluginName: vtm?.pluginName ?? mv?.pluginName,
      type: volumeTypeOf(vtm?.pluginName ?? mv?.pluginName, specVolume(pod, outer)),
      phase: progress.phase,
      desired: vtm !== undefined,
      mountState: mv?.mountState ?? 'not-mounted',
      ...(attached ? { devicePath: attached.devicePath, deviceMountState: attached.deviceMountState } : {}),
      attempts: progress.attempts,
      ...(progress.lastError ? { lastError: progress.lastError, lastOperation: progress.lastOperation } : {}),
      ...(progress.backoff ? { backoff: progress.backoff } : {}),
    }
  })
  return {
    uid,
    namespace: meta?.namespace ?? worker?.namespace,
    name: meta?.name ?? worker?.name,
    inSource: pod !== undefined,
    terminating: s.pods.shouldPodContainersBeTerminating(uid),
    worker: worker
      ? {
          phase: worker.phase,
          attempts: worker.attempts,
          ...(worker.lastError ? { lastError: worker.lastError } : {}),
          ...(worker.nextRetryAt ? { nextRetryAt: iso(worker.nextRetryAt) } : {}),
          ...(worker.mountedAt ? { mountedAt: iso(worker.mountedAt) } : {}),
        }
      : undefined,
    podErrors: manager.desiredState.peekPodErrors(uid),
    volumes,
  }
}
