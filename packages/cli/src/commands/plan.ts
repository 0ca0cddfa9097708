/**
 * `kubevol plan`: a dry run. A volume manager on a read-only view of the host reconstructs what is
 * there, reads the manifests, and runs its first reconcile pass; every operation it starts is a line of
 * the plan, and every call that would change the host is refused (so the operation fails at its first
 * change and nothing is touched).
 */
import { hostname } from 'node:os'
import { isAbsolute, resolve } from 'node:path'
import { createManifestSource } from '@kubevol/agent'
import { type Host, type OperationRecord, createVolumeManager, silentLogger } from '@kubevol/core'
import { createBuiltinPlugins } from '@kubevol/core/plugins'
import { EXIT, UsageError } from '../errors.js'
import { hostFor } from '../host-loader.js'
import { createPreparedMemoryHost } from '../mock-setup.js'
import { type Io, type OutputFormat, renderData, renderTable, tableOptions } from '../output.js'
import type { ParsedCommand } from '../parse.js'
import { createReadOnlyHost } from '../read-only-host.js'

/** One operation a run would start. */
interface PlannedOperation {
  readonly operation: string
  readonly pod: string
  /** The pod's name for the volume (`data`); several when two pod volumes share one claim. */
  readonly podVolume: string
  /** The unique volume name (`kubernetes.io/empty-dir/<uid>-data`). */
  readonly volume: string
  readonly plugin: string
}

/** What `plan` found. */
export interface Plan {
  readonly operations: readonly PlannedOperation[]
  /** Host changes refused while planning (the first change of each operation). */
  readonly refusedCalls: readonly string[]
  readonly manifestErrors: readonly string[]
}

/** Computes the plan of `manifestDir` against `host` (wrapped read-only here). */
export async function computePlan(options: { host: Host; manifestDir: string; rootDir: string; nodeName: string }): Promise<Plan> {
  const ro = createReadOnlyHost(options.host)
  const source = createManifestSource({ dir: options.manifestDir, nodeName: options.nodeName, rescanMs: 3_600_000, logger: silentLogger })
  await source.start()
  const manager = createVolumeManager({
    host: ro.host,
    plugins: createBuiltinPlugins(),
    podSource: source.pods,
    objects: source.objects,
    nodeName: options.nodeName,
    rootDir: options.rootDir,
    controllerAttachDetach: false,
    // The journal is read, never written: a plan changes nothing.
    journal: 'read-only',
    housekeepingPeriodMs: 0,
    remountPeriodMs: 0,
    statsPeriodMs: 0,
    resyncPeriodMs: 3_600_000,
    // A refused operation is not retried within the plan.
    backoff: { initialMs: 3_600_000, maxMs: 3_600_000 },
  })
  const started: OperationRecord[] = []
  const unsubscribe = manager.subscribe((event) => {
    if (event.type === 'operation' && event.operation.endedAt === undefined) started.push(event.operation)
  })
  const abort = new AbortController()
  const run = manager.run(abort.signal)
  try {
    const deadline = Date.now() + 10_000
    while (!(manager.snapshot().sourcesReady && manager.snapshot().statesSynced) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5))
    await manager.waitForIdle()
  } finally {
    abort.abort()
    await run
    unsubscribe()
    source.stop()
  }
  const podNames = new Map(source.pods.getPods().map((p) => [p.metadata.uid ?? '', `${p.metadata.namespace ?? 'default'}/${p.metadata.name ?? ''}`]))
  // The pod's own name of each volume: from the desired state (mounts), else the actual (unmounts).
  const snap = manager.snapshot()
  const podVolumeOf = (op: OperationRecord): string => {
    const desired = snap.desired.filter((d) => d.volumeName === op.volumeName && (op.podName === '' || d.podName === op.podName))
    if (desired.length > 0) return [...new Set(desired.flatMap((d) => d.outerVolumeSpecNames))].join(',')
    return [...new Set(snap.mounted.filter((m) => m.volumeName === op.volumeName && (op.podName === '' || m.podName === op.podName)).map((m) => m.outerVolumeSpecName))].join(',')
  }
  const operations = started.map((op) => ({
    operation: op.name,
    pod: op.podName ? (podNames.get(op.podName) ?? op.podName) : '',
    podVolume: podVolumeOf(op),
    volume: op.volumeName,
    plugin: op.pluginName,
  }))
  return {
    operations,
    refusedCalls: ro.refused.map((e) => e.message.replace(/: the host is read-only here$/, '')),
    manifestErrors: source.errors().map((e) => `${e.file}:${e.line}: ${e.reason}`),
  }
}

/** `kubevol plan`. */
export async function planCommand(p: ParsedCommand, io: Io, deps: { host?: Host }): Promise<number> {
  if (p.flags['pod-manifest-path'] === undefined) throw new UsageError('plan: --pod-manifest-path is required', 'plan')
  const dir = String(p.flags['pod-manifest-path'])
  const manifestDir = isAbsolute(dir) ? dir : resolve(io.cwd, dir)
  const host = deps.host ?? (p.flags.host === 'linux' ? await hostFor('linux', undefined) : await createPreparedMemoryHost(manifestDir))
  const plan = await computePlan({
    host,
    manifestDir,
    rootDir: String(p.flags['root-dir']),
    nodeName: String(p.flags['node-name'] ?? hostname().toLowerCase()),
  })
  const format = p.flags.output as OutputFormat
  if (format === 'json' || format === 'yaml') {
    io.stdout.write(renderData(format, plan))
    return EXIT.ok
  }
  // --no-headers: the rows alone, no summary line.
  const table = tableOptions(p)
  if (plan.operations.length === 0) {
    if (!table.noHeaders) io.stdout.write('nothing to do: the machine matches the manifests\n')
  } else {
    const wide = format === 'wide'
    const head = wide ? ['operation', 'pod', 'volume', 'plugin', 'unique name'] : ['operation', 'pod', 'volume', 'plugin']
    const rows = plan.operations.map((o) => (wide ? [o.operation, o.pod, o.podVolume, o.plugin, o.volume] : [o.operation, o.pod, o.podVolume, o.plugin]))
    io.stdout.write(renderTable(head, rows, table))
    if (!table.noHeaders) io.stdout.write(`\n${plan.operations.length} operations; later steps (mount after attach) follow when these succeed. Nothing was changed.\n`)
  }
  for (const e of plan.manifestErrors) io.stderr.write(`error: invalid manifest ${e}\n`)
  return EXIT.ok
}
