/**
 * Model-based convergence: random schedules of pod adds, updates, terminations and deletions over
 * random volume mixes (shared attachable devices, per-pod tmpfs, emptyDir on disk and in memory,
 * configMap), with faults injected into plugin steps (fail, transient, uncertain before or after the
 * work, hang then return) and host calls (EIO), and crashes with a restart through reconstruction.
 *
 * Invariants are checked at every call and after every step (see world.ts); when faults stop, the
 * actual state must equal the desired state within the backoff bounds.
 *
 * Replay: the seed is printed; `KUBEVOL_FC_SEED=<seed> npx vitest run --project integration
 * test/reliability/convergence.test.ts`. More schedules: `KUBEVOL_FC_RUNS=20000`.
 */
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { VOLUME_KINDS, type VolumeKind, World } from './world.js'

type Command =
  | { readonly kind: 'add'; readonly volumes: readonly VolumeKind[] }
  | { readonly kind: 'update'; readonly target: number }
  | { readonly kind: 'terminate'; readonly target: number }
  | { readonly kind: 'delete'; readonly target: number }
  | { readonly kind: 'advance'; readonly ms: number }
  | { readonly kind: 'crash'; readonly afterCalls: number }

const volumesArb = fc.uniqueArray(fc.constantFrom(...VOLUME_KINDS), { minLength: 1, maxLength: 4 })
const commandArb: fc.Arbitrary<Command> = fc.oneof(
  { weight: 4, arbitrary: volumesArb.map((volumes) => ({ kind: 'add' as const, volumes })) },
  { weight: 1, arbitrary: fc.nat(7).map((target) => ({ kind: 'update' as const, target })) },
  { weight: 1, arbitrary: fc.nat(7).map((target) => ({ kind: 'terminate' as const, target })) },
  { weight: 2, arbitrary: fc.nat(7).map((target) => ({ kind: 'delete' as const, target })) },
  { weight: 3, arbitrary: fc.integer({ min: 0, max: 5_000 }).map((ms) => ({ kind: 'advance' as const, ms })) },
  { weight: 1, arbitrary: fc.nat(8).map((afterCalls) => ({ kind: 'crash' as const, afterCalls })) },
)
const scheduleArb = fc.record({
  commands: fc.array(commandArb, { minLength: 1, maxLength: 12 }),
  faultSeed: fc.integer(),
  faultRate: fc.constantFrom(0, 0.05, 0.15, 0.3),
  hostFaultRate: fc.constantFrom(0, 0.02, 0.05),
})
type Schedule = typeof scheduleArb extends fc.Arbitrary<infer S> ? S : never

function describeCommand(c: Command): string {
  switch (c.kind) {
    case 'add':
      return `add [${c.volumes.join(',')}]`
    case 'advance':
      return `advance ${c.ms}ms`
    case 'crash':
      return `crash after ${c.afterCalls} calls`
    default:
      return `${c.kind} #${c.target}`
  }
}

/** Runs one schedule; resolves with what went wrong (empty: nothing). */
async function runSchedule(s: Schedule): Promise<string[]> {
  const world = new World({ faultSeed: s.faultSeed, faultRate: s.faultRate, hostFaultRate: s.hostFaultRate })
  const uids: string[] = []
  const pick = (target: number): string | undefined => (uids.length === 0 ? undefined : uids[target % uids.length])
  let revision = 0
  const problems: string[] = []
  try {
    for (const [i, command] of s.commands.entries()) {
      switch (command.kind) {
        case 'add': {
          const uid = `u${uids.length}`
          uids.push(uid)
          world.addPod(uid, command.volumes)
          break
        }
        case 'update': {
          const uid = pick(command.target)
          if (uid) world.updatePod(uid, ++revision)
          break
        }
        case 'terminate': {
          const uid = pick(command.target)
          if (uid) world.terminatePod(uid)
          break
        }
        case 'delete': {
          const uid = pick(command.target)
          if (uid) world.deletePod(uid)
          break
        }
        case 'advance':
          await world.clock.advance(command.ms)
          break
        case 'crash':
          await world.crash(command.afterCalls, 2_000)
          break
      }
      // Let what the step started run to its next timer.
      await world.clock.advance(100)
      world.checkAfterStep()
      if (world.violations.length > 0) {
        problems.push(`after step ${i} (${describeCommand(command)}):`, ...world.violations, ...world.log.slice(-30).map((l) => `  log: ${l}`))
        return problems
      }
    }
    // Within the bounds: one maximum backoff (2 min 2 s) and the longest injected hang (20 s).
    await world.quiesce(1)
    world.checkAfterStep()
    problems.push(...world.violations, ...world.convergenceErrors())
    return problems
  } finally {
    await world.stop()
  }
}

const seed = process.env.KUBEVOL_FC_SEED ? Number(process.env.KUBEVOL_FC_SEED) : (Date.now() ^ (Math.random() * 0x7fffffff)) | 0
const numRuns = process.env.KUBEVOL_FC_RUNS ? Number(process.env.KUBEVOL_FC_RUNS) : 2_000
const path = process.env.KUBEVOL_FC_PATH

describe('model-based convergence under faults', () => {
  it(`keeps the invariants and converges (${numRuns} schedules)`, async () => {
    const replay = `KUBEVOL_FC_SEED=${seed}${path ? ` KUBEVOL_FC_PATH=${path}` : ''} npx vitest run --project integration test/reliability/convergence.test.ts`
    console.log(`convergence: seed ${seed}, ${numRuns} schedules; replay with: ${replay}`)
    const started = Date.now()
    let last: string[] = []
    const result = await fc.check(
      fc.asyncProperty(scheduleArb, async (schedule) => {
        last = await runSchedule(schedule)
        return last.length === 0
      }),
      { seed, numRuns, ...(path ? { path } : {}), endOnFailure: process.env.KUBEVOL_FC_SHRINK !== '1' },
    )
    console.log(`convergence: ${result.numRuns} schedules in ${Date.now() - started} ms`)
    if (result.failed) {
      const schedule = result.counterexample?.[0] as Schedule | undefined
      const report = [
        `schedule failed (seed ${seed}, path ${result.counterexamplePath}); replay with:`,
        `  KUBEVOL_FC_SEED=${seed} KUBEVOL_FC_PATH=${result.counterexamplePath} npx vitest run --project integration test/reliability/convergence.test.ts`,
        `faults: seed ${schedule?.faultSeed}, plugin rate ${schedule?.faultRate}, host rate ${schedule?.hostFaultRate}`,
        ...(schedule?.commands ?? []).map((c, i) => `  ${i}: ${describeCommand(c)}`),
        ...(result.errorInstance ? [`error: ${String(result.errorInstance)}`] : []),
        ...last,
      ]
      expect.fail(report.join('\n'))
    }
  }, 600_000)
})
