/**
 * The playground's pictures as data: the reconcile picture (desired state and actual state side by
 * side, per device and per pod volume, with the operation between them) and the per-volume
 * timeline. Built from the manager's snapshot and the recorded activity; the Vue components only
 * draw what this returns, and a Node test checks it.
 */
import type { VolumeManagerSnapshot } from '@kubevol/core'
import { type Activity, type Span, type SpanKind, operationDirection } from './activity.js'

/** What the actual state holds for a row. */
export type ActualCell = 'absent' | 'attached' | 'device mounted' | 'device uncertain' | 'mounted' | 'uncertain'

/** The operation between the two columns of a row. */
export interface FlowOperation {
  readonly name: string
  readonly kind: SpanKind
  /** 'in' moves the row towards the desired state (attach, mount), 'out' takes it away (unmount, detach). */
  readonly direction: 'in' | 'out'
  /** Running; failed and waiting for its backoff to end; failed and due for a retry on the next pass. */
  readonly status: 'running' | 'backing-off' | 'retry-due'
  /** When it started (running) or failed (ms since the playground started). */
  readonly since: number
  /** When the executor allows the retry (ms since the playground started), while backing off. */
  readonly retryAt?: number
  readonly attempt: number
  readonly error?: string
}

export interface FlowRow {
  readonly key: string
  /** A device row (attach, device mount) or a pod's volume (setup, teardown). */
  readonly level: 'device' | 'pod'
  readonly pod: string
  readonly volume: string
  readonly desired: boolean
  readonly actual: ActualCell
  /** The mount was rebuilt from disk after a restart and not yet confirmed. */
  readonly reconstructed: boolean
  readonly operation?: FlowOperation
}

export interface TimelineLane {
  /** The volume's unique name. */
  readonly key: string
  readonly label: string
  readonly spans: readonly Span[]
}

export interface Picture {
  /** Milliseconds since the playground started. */
  readonly now: number
  readonly rows: readonly FlowRow[]
  /** The time the timeline shows, ms since the playground started. */
  readonly window: { readonly from: number; readonly to: number }
  readonly lanes: readonly TimelineLane[]
}

export interface PictureInput {
  readonly snapshot: VolumeManagerSnapshot
  readonly activity: Activity
  /** Milliseconds since the playground started. */
  readonly now: number
  /** When the executor allows a retry of this failed operation (ms since the start), if it is backing off. */
  readonly retryAt: (failed: Span) => number | undefined
  readonly podLabel: (podName: string) => string
  readonly volumeLabel: (volumeName: string) => string
  /** How much history the timeline shows. @default 60000 */
  readonly windowMs?: number
}

const DEVICE_KINDS: ReadonlySet<SpanKind> = new Set(['attach', 'verify', 'device unmount', 'detach'])

/** Builds both pictures from the manager's state and the activity. */
export function buildPicture(input: PictureInput): Picture {
  const { snapshot, activity, now } = input
  const running = activity.running()
  const failed = activity.failed()
  const operationFor = (volumeName: string, podName: string | undefined): FlowOperation | undefined => {
    const matches = (span: Span): boolean =>
      span.lane === volumeName && (podName === undefined ? DEVICE_KINDS.has(span.kind) : !DEVICE_KINDS.has(span.kind) && span.podName === podName)
    const run = running.find(matches)
    if (run) return { name: run.name, kind: run.kind, direction: operationDirection(run.name), status: 'running', since: run.start, attempt: run.attempt }
    const fail = failed.filter(matches).at(-1)
    if (!fail) return undefined
    const retryAt = input.retryAt(fail)
    const waiting = retryAt !== undefined && retryAt > now
    return {
      name: fail.name,
      kind: fail.kind,
      direction: operationDirection(fail.name),
      status: waiting ? 'backing-off' : 'retry-due',
      since: fail.end ?? now,
      ...(waiting ? { retryAt } : {}),
      attempt: fail.attempt,
      ...(fail.error === undefined ? {} : { error: fail.error }),
    }
  }

  const rows: FlowRow[] = []
  const devices = new Map<string, boolean>()
  for (const d of snapshot.desired) if (d.pluginIsAttachable || d.pluginIsDeviceMountable) devices.set(d.volumeName, true)
  for (const a of snapshot.attached) if (a.attachability === 'attachable' || a.deviceMountState !== 'not-mounted') devices.set(a.volumeName, devices.get(a.volumeName) ?? false)
  for (const [volumeName, desired] of devices) {
    const a = snapshot.attached.find((x) => x.volumeName === volumeName)
    const actual: ActualCell = !a ? 'absent' : a.deviceMountState === 'mounted' ? 'device mounted' : a.deviceMountState === 'uncertain' ? 'device uncertain' : 'attached'
    const operation = operationFor(volumeName, undefined)
    rows.push({ key: `device|${volumeName}`, level: 'device', pod: '', volume: input.volumeLabel(volumeName), desired, actual, reconstructed: false, ...(operation ? { operation } : {}) })
  }

  const podRows = new Map<string, { podName: string; volumeName: string; volume: string; desired: boolean }>()
  for (const d of snapshot.desired) {
    podRows.set(`${d.podName}|${d.volumeName}`, { podName: d.podName, volumeName: d.volumeName, volume: d.outerVolumeSpecNames[0] ?? d.spec.name, desired: true })
  }
  for (const m of snapshot.mounted) {
    const key = `${m.podName}|${m.volumeName}`
    if (!podRows.has(key)) podRows.set(key, { podName: m.podName, volumeName: m.volumeName, volume: m.outerVolumeSpecName || input.volumeLabel(m.volumeName), desired: false })
  }
  for (const [key, row] of podRows) {
    const m = snapshot.mounted.find((x) => x.podName === row.podName && x.volumeName === row.volumeName)
    const actual: ActualCell = m?.mountState === 'mounted' ? 'mounted' : m?.mountState === 'uncertain' ? 'uncertain' : 'absent'
    const operation = operationFor(row.volumeName, row.podName)
    rows.push({
      key: `pod|${key}`,
      level: 'pod',
      pod: input.podLabel(row.podName),
      volume: row.volume,
      desired: row.desired,
      actual,
      reconstructed: m?.reconstructed ?? false,
      ...(operation ? { operation } : {}),
    })
  }
  rows.sort((a, b) => (a.level === b.level ? `${a.pod}/${a.volume}`.localeCompare(`${b.pod}/${b.volume}`) : a.level === 'device' ? -1 : 1))

  const windowMs = input.windowMs ?? 60_000
  const window = { from: Math.max(0, now - windowMs), to: Math.max(now, 1) }
  const lanes = new Map<string, Span[]>()
  for (const span of activity.spans()) {
    if ((span.end ?? now) < window.from) continue
    const lane = lanes.get(span.lane) ?? []
    lane.push(span)
    lanes.set(span.lane, lane)
  }
  return {
    now,
    rows,
    window,
    lanes: [...lanes].map(([key, spans]) => ({ key, label: input.volumeLabel(key), spans })),
  }
}
