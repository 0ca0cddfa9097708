/**
 * The after-each teardown and audit. Teardown: wake what the attack froze, remove every pod
 * manifest, let the agent unmount (starting one when none runs), stop it, undo the attack's own
 * fixtures. Audit, from the kernel and the disk: every file outside R byte-identical (canaries and
 * fixtures), nothing new outside R, no mount under or showing the temporary directory, no loop
 * device backed by a file in it. Then scrub whatever is left, so one attack cannot spoil the next.
 */
import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { compareSnapshots, loopsBackedBy, mountTable, mountsConcerning } from './audit.js'
import { type NodeInternals, removeNodeDirs } from './node.js'
import { until } from './processes.js'

/** One attack's audit. */
export interface AuditResult {
  readonly attack: string
  readonly escapes: string[]
  readonly lost: string[]
  readonly lostBytes: number
  readonly leakedMounts: string[]
  readonly leakedLoops: string[]
  /** Problems of the teardown itself (the agent did not unmount in time, did not stop). */
  readonly notes: string[]
}

/** Counts over the run, for the summary line. */
export interface Tally {
  attacks: number
  escaped: number
  lostBytes: number
  leaked: number
  readonly results: AuditResult[]
}

export const newTally = (): Tally => ({ attacks: 0, escaped: 0, lostBytes: 0, leaked: 0, results: [] })

const quiet = (cmd: string, args: string[]): void => {
  try {
    execFileSync(cmd, args, { stdio: 'ignore', timeout: 10_000 })
  } catch {}
}

async function letAgentUnmount(internals: NodeInternals, notes: string[]): Promise<void> {
  const { node } = internals
  for (const name of readdirSync(node.manifests)) node.remove(name)
  try {
    if (!node.agent?.alive()) node.agent = undefined
    if (!node.agent) await node.start()
    await until(
      'the agent to unmount every pod',
      async () => {
        // Idle means nothing desired, mounted or attached, and no operation running: a mount that
        // started while its pod was still there lands after the pod is gone, and a shutdown before
        // it lands would leave it for the next start's reconstruction, not for this audit.
        const state = await node.state()
        return (
          state.desired.length === 0 &&
          state.actual.mounted.length === 0 &&
          state.actual.attached.length === 0 &&
          state.pendingOperations.length === 0 &&
          node.mountsUnder(join(node.root, 'pods')).length === 0
        )
      },
      20_000,
    )
  } catch (err) {
    notes.push(`teardown: ${(err as Error).message}`)
  }
  const stopped = await node.agent?.stop(15_000)
  if (stopped?.killed) notes.push(`teardown: the agent did not exit within 15 s of SIGTERM (SIGKILLed)`)
  node.agent = undefined
}

/** Unmounts (lazily, deepest first) everything concerning the node's directories; the mounts still there after. */
function scrubMounts(internals: NodeInternals): string[] {
  const { base, sentinel } = internals.node
  const concerning = () => [...mountsConcerning(base), ...mountsConcerning(sentinel)]
  for (let round = 0; round < 8 && concerning().length > 0; round++) {
    for (const m of concerning().sort((a, b) => b.target.length - a.target.length)) quiet('umount', ['-l', '-c', m.target])
  }
  return concerning().map((m) => m.target)
}

/** Tears the node down and audits it. Never throws: what it finds is in the result. */
export async function teardownAndAudit(attack: string, internals: NodeInternals): Promise<AuditResult> {
  const { node } = internals
  const notes: string[] = []
  for (const step of internals.preTeardown.splice(0)) await step()
  await letAgentUnmount(internals, notes)
  for (const step of internals.cleanups.splice(0).reverse()) {
    try {
      await step()
    } catch (err) {
      notes.push(`fixture cleanup: ${(err as Error).message}`)
    }
  }

  const table = mountTable()
  const leakedMounts: string[] = []
  const escapes: string[] = []
  for (const m of [...mountsConcerning(node.base, table), ...mountsConcerning(node.sentinel, table)]) {
    const inside = m.target === node.base || m.target.startsWith(`${node.base}/`)
    if (inside) leakedMounts.push(`${m.target} (${m.fsType} ${m.source}${m.root !== '/' ? ` root ${m.root}` : ''})`)
    else escapes.push(`mount outside the node's directory: ${m.target} (${m.fsType}, root ${m.root})`)
  }
  const leakedLoops = loopsBackedBy([node.base, node.sentinel], internals.loopFiles)
  if (existsSync(node.sentinel)) escapes.push(`${node.sentinel} exists`)
  // The outside snapshot is read only once nothing is mounted in it (a hung FUSE would hang the read).
  scrubMounts(internals)
  const after = internals.outsideSnapshot()
  const outside = internals.baseline ? compareSnapshots(internals.baseline, after) : { added: [], lost: [], lostBytes: 0 }
  escapes.push(...outside.added.map((p) => `created outside R: ${p}`))
  const lost = [...outside.lost, ...internals.midRunLosses.lost.map((p) => `${p} (lost while the attack ran)`)]
  const lostBytes = outside.lostBytes + internals.midRunLosses.bytes

  for (const loop of loopsBackedBy([node.base, node.sentinel], internals.loopFiles)) quiet('losetup', ['-d', loop.slice(0, loop.indexOf(' '))])
  removeNodeDirs(internals, scrubMounts(internals))
  return { attack, escapes, lost, lostBytes, leakedMounts, leakedLoops, notes }
}

/** Adds an audit to the tally; the message to fail the attack with, if it found anything. */
export function record(tally: Tally, result: AuditResult): string | undefined {
  tally.attacks++
  tally.escaped += result.escapes.length
  tally.lostBytes += result.lostBytes
  tally.leaked += result.leakedMounts.length + result.leakedLoops.length
  tally.results.push(result)
  const problems = [
    ...result.escapes.map((e) => `escaped: ${e}`),
    ...result.lost.map((l) => `lost: ${l}`),
    ...result.leakedMounts.map((m) => `leaked mount: ${m}`),
    ...result.leakedLoops.map((l) => `leaked loop device: ${l}`),
  ]
  return problems.length > 0 ? `audit of "${result.attack}" found:\n  ${problems.join('\n  ')}${result.notes.length ? `\n  (${result.notes.join('; ')})` : ''}` : undefined
}

/** The run's summary line. */
export function summaryLine(t: Tally): string {
  return `hostile node: ${t.attacks} attacks ran, ${t.escaped} escaped, ${t.lostBytes} bytes lost, ${t.leaked} mounts or loop devices leaked`
}
