/**
 * `kubevol status` and `kubevol explain POD`: read a running agent's /v1/state, /v1/pods/<uid> and
 * /v1/events, and print them as kubectl would: ages rather than timestamps, errors cut to a column
 * in tables (whole in `-o wide`, JSON, YAML and `explain`), an Events section.
 */
import { ageOf, eventAge, untilOf } from '../age.js'
import { CommandFailed, EXIT } from '../errors.js'
import { type Io, type OutputFormat, type TableOptions, causeOf, renderData, renderTable, tableOptions } from '../output.js'
import type { ParsedCommand } from '../parse.js'
import { waitForSignal } from '../signals.js'
import { agentGet } from './agent-request.js'

/** What tests can give `status --watch`. */
export interface StatusDependencies {
  /** How often `--watch` asks again. @default 2000 */
  readonly watchIntervalMs?: number
  /** Resolves to end `--watch` (default: SIGINT or SIGTERM). */
  readonly stopSignal?: Promise<void>
}

interface WorkerView {
  readonly uid: string
  readonly namespace: string
  readonly name: string
  readonly phase: string
  readonly attempts: number
  readonly lastError?: string
}

/** Where a (volume, pod) stands: the same fields in /v1/state's desired volumes and in /v1/pods/<uid>. */
interface VolumeProgress {
  readonly phase: string
  readonly attempts: number
  readonly lastError?: string
  readonly lastOperation?: string
  readonly backoff?: { operation: string; retryAt: string; durationMs: number }
}

interface StateView {
  readonly nodeName: string
  readonly mode: string
  readonly time?: string
  readonly sourcesReady: boolean
  readonly statesSynced: boolean
  readonly desired: readonly ({ volumeName: string; podUID: string; pod: string; outerVolumeSpecNames: string[]; pluginName: string; type?: string } & VolumeProgress)[]
  readonly actual: { mounted: readonly { volumeName: string; podUID: string; outerVolumeSpecName: string; pluginName: string; type?: string; mountState: string }[] }
  readonly pods?: readonly WorkerView[]
}

/** The agent's clock, so that ages agree with what it recorded. */
const nowOf = (state: { time?: string }): number => (state.time ? Date.parse(state.time) : Date.now())
/** The agent's label, or the plugin's short name from an older agent. */
const typeLabel = (type: string | undefined, plugin: string | undefined): string => type ?? (plugin ? plugin.slice(plugin.lastIndexOf('/') + 1) : '')

/** A volume's phase, with its failures in a row and when it is tried again. */
function phaseOf(v: VolumeProgress, now: number): string {
  const notes = [
    ...(v.attempts > 0 && v.lastError !== undefined ? [`${v.attempts} ${v.attempts === 1 ? 'failure' : 'failures'}`] : []),
    ...(v.phase === 'backing-off' && v.backoff ? [`retry ${untilOf(v.backoff.retryAt, now)}`] : []),
  ]
  return notes.length > 0 ? `${v.phase} (${notes.join(', ')})` : v.phase
}

/** Every pod the agent knows, by UID: `namespace/name`. */
function podNames(state: StateView): Map<string, string> {
  const podName = new Map<string, string>()
  for (const w of state.pods ?? []) podName.set(w.uid, `${w.namespace}/${w.name}`)
  for (const d of state.desired) podName.set(d.podUID, d.pod)
  return podName
}

/** `-o name`: `pod/namespace/name`, one line a pod, sorted, as `explain` takes it. */
function renderNames(state: StateView): string {
  const names = [...new Set(podNames(state).values())].sort()
  return names.map((n) => `pod/${n}\n`).join('')
}

/** The `status` text of one /v1/state answer; `--no-headers` leaves out the header rows and the node's summary line. */
function renderStatus(state: StateView, format: 'table' | 'wide', table: TableOptions): string {
  const wide = format === 'wide'
  const now = nowOf(state)
  let out = table.noHeaders ? '' : `node ${state.nodeName} (${state.mode} mode)  sources ready: ${state.sourcesReady ? 'yes' : 'no'}  states synced: ${state.statesSynced ? 'yes' : 'no'}\n\n`
  const podName = podNames(state)
  const rows: unknown[][] = []
  const seen = new Set<string>()
  for (const d of state.desired) {
    seen.add(`${d.podUID}\n${d.volumeName}`)
    const row = [d.pod, d.outerVolumeSpecNames.join(','), typeLabel(d.type, d.pluginName), phaseOf(d, now)]
    // The last error stays until an operation succeeds, also between two attempts.
    const error = d.lastError ?? ''
    if (wide) row.push(d.podUID, d.volumeName, error)
    else row.push(causeOf(error))
    rows.push(row)
  }
  for (const m of state.actual.mounted) {
    if (seen.has(`${m.podUID}\n${m.volumeName}`)) continue
    const row = [podName.get(m.podUID) ?? m.podUID, m.outerVolumeSpecName, typeLabel(m.type, m.pluginName), `${m.mountState} (unmounting)`]
    if (wide) row.push(m.podUID, m.volumeName, '')
    else row.push('')
    rows.push(row)
  }
  const head = wide ? ['pod', 'volume', 'type', 'phase', 'uid', 'unique name', 'error'] : ['pod', 'volume', 'type', 'phase', 'error']
  if (rows.length > 0) out += renderTable(head, rows, table)
  else if (!table.noHeaders) out += 'no volumes\n'
  if (state.pods && state.pods.length > 0) {
    if (out !== '') out += '\n'
    out += renderTable(
      ['pod', 'phase', 'failed syncs', 'last error'],
      state.pods.map((w) => [`${w.namespace}/${w.name}`, w.phase, w.attempts, wide ? (w.lastError ?? '') : causeOf(w.lastError ?? '')]),
      table,
    )
  }
  return out
}

/** `kubevol status`; with `--watch`, again on every change until interrupted. */
export async function statusCommand(p: ParsedCommand, io: Io, deps: StatusDependencies = {}): Promise<number> {
  const format = p.flags.output as OutputFormat
  const render = async (): Promise<string> => {
    const { body } = await agentGet(p, '/v1/state')
    if (format === 'json' || format === 'yaml') return renderData(format, body)
    return format === 'name' ? renderNames(body as StateView) : renderStatus(body as StateView, format, tableOptions(p))
  }
  let last = await render()
  io.stdout.write(last)
  if (p.flags.watch !== true) return EXIT.ok
  const stop = deps.stopSignal ?? waitForSignal()
  let stopped = false
  void stop.then(() => (stopped = true))
  const interval = deps.watchIntervalMs ?? 2_000
  for (;;) {
    let timer: NodeJS.Timeout | undefined
    await Promise.race([stop, new Promise<void>((r) => (timer = setTimeout(r, interval)))])
    clearTimeout(timer)
    if (stopped) return EXIT.ok
    const text = await render()
    if (text === last) continue
    // On a terminal, in place (as `watch`); elsewhere one after another, each a full listing.
    io.stdout.write(io.isTTY ? `\u001b[H\u001b[2J${text}` : `\n${text}`)
    last = text
  }
}

interface PodVolume {
  readonly name: string
  readonly volumeName?: string
  readonly pluginName?: string
  readonly type?: string
  readonly phase: string
  readonly mountState?: string
  readonly attempts?: number
  readonly lastError?: string
  readonly lastOperation?: string
  readonly reason?: string
  readonly backoff?: { operation: string; retryAt: string; durationMs: number }
}

interface EventView {
  readonly type: string
  readonly reason: string
  readonly message: string
  readonly count: number
  readonly firstTimestamp: number
  readonly lastTimestamp: number
}

interface PodExplain {
  uid: string
  namespace?: string
  name?: string
  terminating: boolean
  worker?: { phase: string; attempts: number; lastError?: string; nextRetryAt?: string; mountedAt?: string }
  podErrors: string[]
  volumes: PodVolume[]
}

/** The `explain` text: the pod, its volumes, its events (kubectl describe's shape). */
function renderExplain(pod: PodExplain, events: readonly EventView[], now: number, wide: boolean, table: TableOptions): string {
  const lines = [`Name:       ${pod.name ?? ''}`, `Namespace:  ${pod.namespace ?? 'default'}`, `UID:        ${pod.uid}`]
  if (pod.terminating) lines.push('Status:     terminating')
  if (pod.worker) {
    const w = pod.worker
    // The pod's sync count is of whole syncs (each waits up to the sync timeout), not of volume operations.
    const notes = [
      ...(w.attempts > 0 ? [`${w.attempts} failed ${w.attempts === 1 ? 'sync' : 'syncs'} in a row`] : []),
      ...(w.nextRetryAt ? [`next sync ${untilOf(w.nextRetryAt, now)}`] : []),
      ...(w.phase === 'mounted' && w.mountedAt ? [`for ${ageOf(w.mountedAt, now)}`] : []),
    ]
    lines.push(`Volumes:    ${w.phase}${notes.length > 0 ? ` (${notes.join(', ')})` : ''}`)
    if (w.lastError) lines.push(`Last sync error: ${w.lastError}`)
  }
  for (const e of pod.podErrors) lines.push(`Pod error:  ${e}`)
  let out = `${lines.join('\n')}\n\n`
  // The error last: it is shown whole here, and may be long.
  const head = ['volume', 'type', 'phase', 'failures', 'next retry', ...(wide ? ['unique name'] : []), 'last error']
  out += renderTable(
    head,
    pod.volumes.map((v) => {
      const error = v.lastError ? `${v.lastOperation ? `${v.lastOperation}: ` : ''}${v.lastError}` : (v.reason ?? '')
      return [v.name, typeLabel(v.type, v.pluginName), v.phase, v.attempts ?? 0, v.backoff ? untilOf(v.backoff.retryAt, now) : '', ...(wide ? [v.volumeName ?? ''] : []), error]
    }),
    table,
  )
  out += '\nEvents:'
  if (events.length === 0) return `${out}  <none>\n`
  out += '\n'
  // Newest last, as kubectl describe lists them.
  const sorted = [...events].sort((a, b) => a.lastTimestamp - b.lastTimestamp)
  out += renderTable(
    ['type', 'reason', 'age', 'from', 'message'],
    sorted.map((e) => [e.type, e.reason, eventAge(e, now), 'kubevol', e.message]),
    table,
  )
    .split('\n')
    .map((l) => (l ? `  ${l}` : l))
    .join('\n')
  return out
}

/** `kubevol explain POD`: POD is a UID, a name or namespace/name. */
export async function explainCommand(p: ParsedCommand, io: Io): Promise<number> {
  // `status -o name` prints pod/namespace/name.
  const wanted = (p.args[0] as string).replace(/^pods?\//, '')
  const { body: state } = await agentGet(p, '/v1/state')
  const s = state as StateView
  const candidates = new Map<string, string>()
  for (const w of s.pods ?? []) candidates.set(w.uid, `${w.namespace}/${w.name}`)
  for (const d of s.desired) candidates.set(d.podUID, d.pod)
  const matches = [...candidates].filter(([uid, name]) => uid === wanted || name === wanted || name === `default/${wanted}`)
  if (matches.length === 0) throw new CommandFailed(`pod ${wanted} is not known to the agent (see \`kubevol status\`)`)
  if (matches.length > 1) throw new CommandFailed(`pod ${wanted} is ambiguous: ${matches.map(([uid, name]) => `${name} (${uid})`).join(', ')}; give the namespace or UID`)
  const [uid] = matches[0] as [string, string]
  const { status, body } = await agentGet(p, `/v1/pods/${encodeURIComponent(uid)}`)
  if (status === 404) throw new CommandFailed(`pod ${wanted} is not known to the agent`)
  const { body: events } = await agentGet(p, `/v1/events?pod=${encodeURIComponent(uid)}`)
  const format = p.flags.output as OutputFormat
  if (format === 'json' || format === 'yaml') {
    io.stdout.write(renderData(format, { ...(body as object), events }))
    return EXIT.ok
  }
  io.stdout.write(renderExplain(body as PodExplain, Array.isArray(events) ? (events as EventView[]) : [], nowOf(s), format === 'wide', tableOptions(p)))
  return EXIT.ok
}
