/**
 * Issue 36, the exchange race: an exchanger process (harness/exchanger.py) swaps a directory kubevol
 * made with a symlink to a decoy outside R, with renameat2(RENAME_EXCHANGE) in a tight loop, while
 * pods (a disk and a Memory emptyDir, a configMap, a subPath, a fileDisk claim) are added and
 * removed through `kubevol run`. At any instant the name is kubevol's directory or the symlink: a
 * check on the name and an act on it again see different things. Every level of every path the
 * engine uses, as a loop: the 17 levels of a pod's directory at once (one pod per level, each level
 * its own decoy), then each level R's pods share (`pods`, the fileDisk plugin's tree, `journal`) on
 * its own. Promise: kubevol never writes, mounts or deletes through the symlink; refusing (a pod
 * fails with an error, set up again once the swapping stops) is fine.
 */
import { join } from 'node:path'
import { expect, it } from 'vitest'
import type { HostileNode } from '../harness/node.js'
import type { Attack } from './common.js'
import { POD_LEVELS, ROOT_LEVELS, type Workload, allGone, churn, decoyFindings, decoySnapshot, fill, makeDecoy, prepare, settle, startExchanger } from './levels.js'

/** Swapping time per round: several seconds for the pod levels, which share one round; a few for each shared level. */
const POD_LEVELS_MS = 4_000
const ROOT_LEVEL_MS = 3_000

async function race(n: HostileNode, levels: readonly { template: string; w: Workload }[], ms: number): Promise<void> {
  const ws = [...new Map(levels.map((l) => [l.w.uid, l.w])).values()]
  prepare(n, ws)
  const targets = levels.map((l) => ({ ...l, path: join(n.root, fill(l.template, l.w)), decoy: makeDecoy(n, l.template, l.w) }))
  await n.start({ entry: 'cli' })
  const before = targets.map((t) => decoySnapshot(t.decoy))
  const exchanger = startExchanger(
    n,
    targets.map((t) => ({ path: t.path, target: t.decoy })),
    ms,
  )
  const waves = await churn(n, ws, exchanger.running)
  const swaps = await exchanger.done
  // The swapping over, what was refused may be torn down (or stay refused: the audit says whether that costs anything).
  const gone = await settle(allGone(n, ws), 8_000)
  console.log(`[hostile-node] exchange race: ${waves} waves of pods, ${gone ? 'all torn down' : 'not all torn down'}; swaps: ${targets.map((t, i) => `${t.template} ${swaps[i]}`).join(', ')}`)
  const findings = targets.flatMap((t, i) => decoyFindings(t.decoy, before[i] as ReturnType<typeof decoySnapshot>).map((f) => `${t.template}: ${f}`))
  expect(findings, 'what kubevol did through the swapped symlinks').toEqual([])
}

export const exchangeRace: Attack = (node) => {
  it(`issue 36: every level of a pod directory (${POD_LEVELS.length}, one pod each) swapped with a symlink outside R for ${POD_LEVELS_MS / 1000} s while the pods come and go, through kubevol run`, async () => {
    const levels = POD_LEVELS.map((template, i) => ({ template, w: { uid: `race-${i + 1}`, pv: `pv-race-${i + 1}`, disk: i < 2 || template.includes('file-disk') } }))
    await race(node(), levels, POD_LEVELS_MS)
  }, 90_000)

  for (const template of ROOT_LEVELS) {
    it(`issue 36: <root>/${template} swapped with a symlink outside R for ${ROOT_LEVEL_MS / 1000} s while a pod with every volume type comes and goes, through kubevol run`, async () => {
      await race(node(), [{ template, w: { uid: 'race', pv: 'pv-race', disk: true } }], ROOT_LEVEL_MS)
    }, 90_000)
  }
}
