/**
 * `kubevol status` and `kubevol explain POD`: read a running agent's /v1/state and /v1/pods/<uid>.
 */
import { readFile } from 'node:fs/promises'
import { CliError, CommandFailed, EXIT } from '../errors.js'
import { type Io, type OutputFormat, renderData, renderTable } from '../output.js'
import type { ParsedCommand } from '../parse.js'

/** GETs `path` of the agent as JSON. Throws CliError (exit 3) when it cannot be reached. */
async function getJson(p: ParsedCommand, path: string): Promise<{ status: number; body: unknown }> {
  const server = String(p.flags.server).replace(/\/+$/, '')
  const headers: Record<string, string> = {}
  if (p.flags['token-file'] !== undefined) headers.authorization = `Bearer ${(await readFile(String(p.flags['token-file']), 'utf8')).trim()}`
  let res: Response
  try {
    res = await fetch(`${server}${path}`, { headers, signal: AbortSignal.timeout(10_000) })
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause
    throw new CliError(`cannot reach the agent at ${server} (${cause?.code ?? cause?.message ?? (err as Error).message}): is \`kubevol run\` running? Pass its address with --server`, EXIT.unreachable)
  }
  const text = await res.text()
  if (res.status === 401) throw new CliError(`the agent at ${server} requires a bearer token: pass --token-file`, EXIT.failed)
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    throw new CliError(`the agent at ${server} answered ${path} with HTTP ${res.status} and no JSON: is it a kubevol agent?`)
  }
  return { status: res.status, body }
}

interface WorkerView {
  readonly uid: string
  readonly namespace: string
  readonly name: string
  readonly phase: string
  readonly attempts: number
  readonly lastError?: string
}

interface StateView {
  readonly nodeName: string
  readonly mode: string
  readonly sourcesReady: boolean
  readonly statesSynced: boolean
  readonly desired: readonly { volumeName: string; podUID: string; pod: string; outerVolumeSpecNames: string[]; pluginName: string }[]
  readonly actual: { mounted: readonly { volumeName: string; podUID: string; outerVolumeSpecName: string; pluginName: string; mountState: string }[] }
  readonly backoffs: readonly { volumeName: string; podName: string; error: string; retryAt: string }[]
  readonly pods?: readonly WorkerView[]
}

const short = (plugin: string | undefined): string => (plugin ? plugin.slice(plugin.lastIndexOf('/') + 1) : '')

/** `kubevol status`. */
export async function statusCommand(p: ParsedCommand, io: Io): Promise<number> {
  const { body } = await getJson(p, '/v1/state')
  const format = p.flags.output as OutputFormat
  if (format === 'json' || format === 'yaml') {
    io.stdout.write(renderData(format, body))
    return EXIT.ok
  }
  const state = body as StateView
  const wide = format === 'wide'
  io.stdout.write(`node ${state.nodeName} (${state.mode} mode)  sources ready: ${state.sourcesReady ? 'yes' : 'no'}  states synced: ${state.statesSynced ? 'yes' : 'no'}\n\n`)
  const podName = new Map<string, string>()
  for (const w of state.pods ?? []) podName.set(w.uid, `${w.namespace}/${w.name}`)
  for (const d of state.desired) podName.set(d.podUID, d.pod)
  const rows: unknown[][] = []
  const seen = new Set<string>()
  const mountedOf = (uid: string, volume: string) => state.actual.mounted.find((m) => m.podUID === uid && m.volumeName === volume)
  for (const d of state.desired) {
    const m = mountedOf(d.podUID, d.volumeName)
    const backoff = state.backoffs.find((b) => b.volumeName === d.volumeName && (b.podName === d.podUID || b.podName === ''))
    seen.add(`${d.podUID}\n${d.volumeName}`)
    const phase = backoff ? 'backing-off' : (m?.mountState ?? 'waiting')
    const row = [d.pod, d.outerVolumeSpecNames.join(','), short(d.pluginName), phase]
    if (wide) row.push(d.podUID, d.volumeName, backoff?.error ?? '')
    rows.push(row)
  }
  for (const m of state.actual.mounted) {
    if (seen.has(`${m.podUID}\n${m.volumeName}`)) continue
    const row = [podName.get(m.podUID) ?? m.podUID, m.outerVolumeSpecName, short(m.pluginName), `${m.mountState} (unmounting)`]
    if (wide) row.push(m.podUID, m.volumeName, '')
    rows.push(row)
  }
  const head = wide ? ['pod', 'volume', 'type', 'phase', 'uid', 'unique name', 'error'] : ['pod', 'volume', 'type', 'phase']
  io.stdout.write(rows.length > 0 ? renderTable(head, rows) : 'no volumes\n')
  if (state.pods && state.pods.length > 0) {
    io.stdout.write('\n')
    io.stdout.write(renderTable(['pod', 'phase', 'attempts', 'last error'], state.pods.map((w) => [`${w.namespace}/${w.name}`, w.phase, w.attempts, w.lastError ?? ''])))
  }
  return EXIT.ok
}

interface PodVolume {
  readonly name: string
  readonly volumeName?: string
  readonly pluginName?: string
  readonly phase: string
  readonly mountState?: string
  readonly attempts?: number
  readonly lastError?: string
  readonly lastOperation?: string
  readonly backoff?: { operation: string; retryAt: string; durationMs: number }
}

/** `kubevol explain POD`: POD is a UID, a name or namespace/name. */
export async function explainCommand(p: ParsedCommand, io: Io): Promise<number> {
  const wanted = p.args[0] as string
  const { body: state } = await getJson(p, '/v1/state')
  const s = state as StateView
  const candidates = new Map<string, string>()
  for (const w of s.pods ?? []) candidates.set(w.uid, `${w.namespace}/${w.name}`)
  for (const d of s.desired) candidates.set(d.podUID, d.pod)
  const matches = [...candidates].filter(([uid, name]) => uid === wanted || name === wanted || name === `default/${wanted}`)
  if (matches.length === 0) throw new CommandFailed(`pod ${wanted} is not known to the agent (see \`kubevol status\`)`)
  if (matches.length > 1) throw new CommandFailed(`pod ${wanted} is ambiguous: ${matches.map(([uid, name]) => `${name} (${uid})`).join(', ')}; give the namespace or UID`)
  const [uid] = matches[0] as [string, string]
  const { status, body } = await getJson(p, `/v1/pods/${encodeURIComponent(uid)}`)
  if (status === 404) throw new CommandFailed(`pod ${wanted} is not known to the agent`)
  const format = p.flags.output as OutputFormat
  if (format === 'json' || format === 'yaml') {
    io.stdout.write(renderData(format, body))
    return EXIT.ok
  }
  const pod = body as { uid: string; namespace?: string; name?: string; terminating: boolean; worker?: { phase: string; attempts: number; lastError?: string; nextRetryAt?: string }; podErrors: string[]; volumes: PodVolume[] }
  io.stdout.write(`pod ${pod.namespace ?? 'default'}/${pod.name ?? ''} (uid ${pod.uid})${pod.terminating ? ', terminating' : ''}\n`)
  if (pod.worker) {
    io.stdout.write(`sync: ${pod.worker.phase}, ${pod.worker.attempts} failed attempts${pod.worker.nextRetryAt ? `, next retry ${pod.worker.nextRetryAt}` : ''}\n`)
    if (pod.worker.lastError) io.stdout.write(`last sync error: ${pod.worker.lastError}\n`)
  }
  for (const e of pod.podErrors) io.stdout.write(`pod error: ${e}\n`)
  io.stdout.write('\n')
  const wide = format === 'wide'
  const head = wide ? ['volume', 'type', 'phase', 'attempts', 'last error', 'next retry', 'unique name'] : ['volume', 'type', 'phase', 'attempts', 'last error', 'next retry']
  io.stdout.write(
    renderTable(
      head,
      pod.volumes.map((v) => {
        const row: unknown[] = [v.name, short(v.pluginName), v.phase, v.attempts ?? 0, v.lastError ? `${v.lastOperation ? `${v.lastOperation}: ` : ''}${v.lastError}` : '', v.backoff?.retryAt ?? '']
        if (wide) row.push(v.volumeName ?? '')
        return row
      }),
    ),
  )
  return EXIT.ok
}
