/**
 * The suite's results file, `results.json` beside the suite: one entry per attack with its outcome,
 * written after a full run. The docs site's "What kubevol never does" page is generated from it, so
 * the page shows what the last recorded run found, never a result typed by hand.
 */
import { writeFileSync } from 'node:fs'
import { release } from 'node:os'
import { fileURLToPath } from 'node:url'
import type { Tally } from './teardown.js'

export const RESULTS_FILE = fileURLToPath(new URL('../results.json', import.meta.url))

/** One attack (one `it`) and what the run found. */
interface AttackResult {
  /** `<attack class>#<n>`: the class is the file in attacks/, n counts its attacks from 1. */
  readonly id: string
  readonly title: string
  readonly outcome: 'pass' | 'fail'
  readonly durationMs: number
  /** What the audit found after the attack (empty when nothing). */
  readonly audit: readonly string[]
}

interface HostileNodeResults {
  readonly suite: 'hostile-node'
  readonly date: string
  readonly machine: { readonly node: string; readonly kernel: string; readonly arch: string }
  readonly summary: { readonly attacks: number; readonly escaped: number; readonly lostBytes: number; readonly leaked: number }
  readonly attacks: readonly AttackResult[]
}

/** The subset of vitest's task tree read here. */
interface TaskLike {
  readonly type: string
  readonly name: string
  readonly mode?: string
  readonly tasks?: readonly TaskLike[]
  readonly result?: { readonly state?: string; readonly duration?: number }
}

/**
 * Writes results.json from the finished suite's tasks, one describe per attack class. Returns why
 * it did not write, when the run was partial (`-t`, a skipped or unfinished attack): a partial run
 * must not replace the record of a full one.
 */
export function writeResults(suite: TaskLike, tally: Tally): string | undefined {
  const attacks: AttackResult[] = []
  for (const group of suite.tasks ?? []) {
    const tests = flatten(group)
    tests.forEach((test, i) => {
      const state = test.result?.state
      if (state !== 'pass' && state !== 'fail') return
      const audit = tally.results.find((r) => r.attack === test.name)
      attacks.push({
        id: `${group.name}#${i + 1}`,
        title: test.name,
        outcome: state,
        durationMs: Math.round(test.result?.duration ?? 0),
        audit: audit ? [...audit.escapes.map((e) => `escaped: ${e}`), ...audit.lost.map((l) => `lost: ${l}`), ...audit.leakedMounts, ...audit.leakedLoops] : [],
      })
    })
  }
  const all = (suite.tasks ?? []).flatMap(flatten)
  if (attacks.length !== all.length) return `${all.length - attacks.length} of ${all.length} attacks did not run`
  const results: HostileNodeResults = {
    suite: 'hostile-node',
    date: new Date().toISOString(),
    machine: { node: process.version, kernel: release(), arch: process.arch },
    summary: { attacks: tally.attacks, escaped: tally.escaped, lostBytes: tally.lostBytes, leaked: tally.leaked },
    attacks,
  }
  writeFileSync(RESULTS_FILE, `${JSON.stringify(results, null, 2)}\n`)
  return undefined
}

function flatten(task: TaskLike): TaskLike[] {
  return task.type === 'test' ? [task] : (task.tasks ?? []).flatMap(flatten)
}
