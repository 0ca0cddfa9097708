/**
 * Issue 36, symlinks planted before start: at every level of a pod's directory (the 17 levels at
 * once, one pod per level, each symlink aimed at its own decoy outside R) and at `<root>/pods`, a
 * symlink is in place before `kubevol run` starts; the pods come, go, `kubevol gc` runs, the agent
 * starts again (reconstruction). Promise: set-up as tear-down never writes, mounts or deletes
 * through a symlink it did not make; the pods fail with an error instead.
 */
import { expect, it } from 'vitest'
import type { HostileNode } from '../harness/node.js'
import { type Attack, pause } from './common.js'
import { POD_LEVELS, type Workload, allGone, allMounted, allSettled, decoyFindings, decoySnapshot, plant, prepare, settle, workloadYaml } from './levels.js'

/** Plants, starts through `kubevol run` (a refusal to start is fine), adds and removes the pods, gc, restarts; what the decoys show. */
export async function plantedRun(n: HostileNode, levels: readonly { template: string; w: Workload; target?: string }[], extra: readonly string[] = []): Promise<void> {
  const ws = [...new Map(levels.map((l) => [l.w.uid, l.w])).values()]
  prepare(n, ws)
  const planted = plant(n, levels)
  const before = planted.map((p) => decoySnapshot(p.decoy))
  let story: string
  try {
    await n.start({ entry: 'cli', extra })
    for (const w of ws) n.write(`${w.uid}.yaml`, workloadYaml(n, w))
    // Mounted, or refused with an error (then a moment for the refusals' retries, which must not follow the symlink either).
    await settle(allSettled(n, ws), 5_000)
    await pause(500)
    const mounted = await allMounted(n, ws)()
    for (const w of ws) n.remove(`${w.uid}.yaml`)
    const gone = await settle(allGone(n, ws), 4_000)
    await n.stop()
    const gc = await n.kubevol('gc', '--pod-manifest-path', n.manifests)
    expect(gc.stderr).not.toMatch(/TypeError|RangeError|at .*\.js:\d+/)
    await n.start()
    await pause(1_000)
    story = `pods ${mounted ? 'mounted' : 'not all mounted (refused)'}, ${gone ? 'torn down' : 'not torn down'}; gc exit ${gc.code}`
  } catch (err) {
    story = `the agent refused to start: ${(err as Error).message.split('\n').slice(0, 3).join(' ')}`
  }
  console.log(`[hostile-node] planted ${planted.map((p) => p.template).join(', ')}: ${story}`)
  const findings = planted.flatMap((p, i) => decoyFindings(p.decoy, before[i] as ReturnType<typeof decoySnapshot>).map((f) => `${p.template}: ${f}`))
  expect(findings, 'what kubevol did through the planted symlinks').toEqual([])
}

export const plantedSymlinks: Attack = (node) => {
  it(`issue 36: a symlink to outside R planted before start at every level of a pod directory (${POD_LEVELS.length}, one pod each): set-up, tear-down, gc and a restart never follow it, through kubevol run`, async () => {
    const levels = POD_LEVELS.map((template, i) => ({ template, w: { uid: `plant-${i + 1}`, pv: `pv-plant-${i + 1}`, disk: i < 2 || template.includes('file-disk') } }))
    await plantedRun(node(), levels)
  }, 90_000)

  it('issue 36: <root>/pods a symlink to outside R before start: set-up, tear-down, gc and a restart never follow it, through kubevol run', async () => {
    await plantedRun(node(), [{ template: 'pods', w: { uid: 'plant', pv: 'pv-plant', disk: true } }])
  }, 90_000)
}
