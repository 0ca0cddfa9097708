/**
 * `kubevol mounts POD [CONTAINER]`: a container's mounts and devices as a runtime gives them to it,
 * read from a running agent's /v1/pods/<uid>/containers/<name>/mounts (every container's from
 * /v1/pods/<uid>/mounts): a table, the CRI's shape (`-o json|yaml`), or the entries of an OCI
 * runtime spec's `mounts` (`-o oci`), ready to append to a bundle's config.json.
 */
import { type ContainerMount, type ContainerMounts, ociMounts } from '@kubevol/core'
import { CliError, CommandFailed, EXIT } from '../errors.js'
import { type Io, renderData, renderTable, tableOptions } from '../output.js'
import type { ParsedCommand } from '../parse.js'
import { agentGet } from './agent-request.js'

/** One container's answer: its mounts, or why it has none yet. */
type ContainerAnswer = ({ readonly container: string } & ContainerMounts) | { readonly container: string; readonly error: string }

/** The UID of POD: a UID as given, or the pod of `namespace/name` among those the agent knows. */
async function podUID(p: ParsedCommand, pod: string): Promise<string> {
  const wanted = pod.replace(/^pods?\//, '')
  if (!wanted.includes('/')) return wanted
  const { body } = await agentGet(p, '/v1/state', 10_000)
  const state = body as { pods?: { uid: string; namespace: string; name: string }[]; desired?: { podUID: string; pod: string }[] }
  const uids = new Set([...(state.pods ?? []).filter((w) => `${w.namespace}/${w.name}` === wanted).map((w) => w.uid), ...(state.desired ?? []).filter((d) => d.pod === wanted).map((d) => d.podUID)])
  if (uids.size === 0) throw new CommandFailed(`pod ${wanted} is not known to the agent (see \`kubevol status\`)`)
  if (uids.size > 1) throw new CommandFailed(`pod ${wanted} is ambiguous: UIDs ${[...uids].join(', ')}; give the UID`)
  return [...uids][0] as string
}

const modeOf = (m: ContainerMount): string => (m.recursiveReadOnly ? 'rro' : m.readonly ? 'ro' : 'rw')
const PROPAGATION: Readonly<Record<ContainerMount['propagation'], string>> = {
  PROPAGATION_PRIVATE: 'private',
  PROPAGATION_HOST_TO_CONTAINER: 'host-to-container',
  PROPAGATION_BIDIRECTIONAL: 'bidirectional',
}

function renderContainers(containers: readonly ContainerAnswer[], p: ParsedCommand): string {
  const rows: unknown[][] = []
  for (const c of containers) {
    if ('error' in c) {
      rows.push([c.container, '', '', '', '', `not ready: ${c.error}`])
      continue
    }
    for (const m of c.mounts) rows.push([c.container, m.name, m.containerPath, modeOf(m), PROPAGATION[m.propagation], m.hostPath])
    for (const d of c.devices) rows.push([c.container, '(device)', d.containerPath, d.permissions, '', d.hostPath])
    if (c.mounts.length === 0 && c.devices.length === 0) rows.push([c.container, '', '', '', '', 'no volumes'])
  }
  return renderTable(['container', 'volume', 'container path', 'mode', 'propagation', 'host path'], rows, tableOptions(p))
}

/** `kubevol mounts POD [CONTAINER]`. */
export async function mountsCommand(p: ParsedCommand, io: Io): Promise<number> {
  const [pod, container] = p.args as [string, string | undefined]
  const uid = await podUID(p, pod)
  const format = p.flags.output as 'table' | 'json' | 'yaml' | 'oci'
  const query = new URLSearchParams()
  const waitMs = p.flags.wait as number | undefined
  if (waitMs !== undefined) query.set('wait', `${waitMs}ms`)
  if (p.flags['recursive-read-only'] === true) query.set('recursiveReadOnly', 'true')
  const path = `/v1/pods/${encodeURIComponent(uid)}${container === undefined ? '' : `/containers/${encodeURIComponent(container)}`}/mounts${query.size > 0 ? `?${query}` : ''}`
  const { status, body } = await agentGet(p, path, (waitMs ?? 0) + 10_000)
  if (status !== 200) throw new CommandFailed((body as { error?: string }).error ?? `the agent answered HTTP ${status}`)
  const containers: ContainerAnswer[] = container === undefined ? (body as { containers: ContainerAnswer[] }).containers : [body as ContainerAnswer]
  if (format === 'oci') {
    // The entries of one container's config.json: the container must be named when there are several.
    if (containers.length !== 1) throw new CliError(`pod ${pod} has containers ${containers.map((c) => c.container).join(', ')}: name one for -o oci`, EXIT.usage)
    const [only] = containers as [ContainerAnswer]
    if ('error' in only) throw new CommandFailed(only.error)
    io.stdout.write(`${JSON.stringify(ociMounts(only.mounts), null, 2)}\n`)
    if (only.devices.length > 0) {
      const list = only.devices.map((d) => `${d.containerPath} (${d.hostPath}, ${d.permissions})`).join(', ')
      io.stderr.write(`the container also has block devices, which are linux.devices entries and not mounts: ${list}\n`)
    }
    return EXIT.ok
  }
  if (format === 'json' || format === 'yaml') {
    io.stdout.write(renderData(format, body))
    return EXIT.ok
  }
  io.stdout.write(renderContainers(containers, p))
  return containers.some((c) => 'error' in c) ? EXIT.failed : EXIT.ok
}
