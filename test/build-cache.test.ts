/**
 * Turbo's cache must miss when what a build reads changes. `tsconfig.base.json` is outside every
 * package, so it must be a global dependency: editing it (a stricter flag, another target) has to
 * rebuild and re-typecheck every package, not replay cached output. Runs `turbo --dry=json` on a copy
 * of the repository before and after such an edit, and compares the task hashes.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { copyRepository, run } from './copy-repository.js'

let work: string

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'kubevol-build-cache-'))
  await copyRepository(work)
})

afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true })
})

async function taskHashes(): Promise<Map<string, string>> {
  const env = { ...process.env, TURBO_TELEMETRY_DISABLED: '1', TURBO_NO_UPDATE_NOTIFIER: '1' }
  const { stdout } = await run(join(work, 'node_modules/.bin/turbo'), ['run', 'build', 'typecheck', '--dry=json'], { cwd: work, env, maxBuffer: 64 * 1024 * 1024 })
  const plan = JSON.parse(stdout) as { tasks: { taskId: string; hash: string; command: string }[] }
  return new Map(plan.tasks.filter((t) => t.command !== '<NONEXISTENT>').map((t) => [t.taskId, t.hash]))
}

it('rebuilds and re-typechecks every package when tsconfig.base.json changes', async () => {
  const before = await taskHashes()
  const base = join(work, 'tsconfig.base.json')
  const config = JSON.parse(await readFile(base, 'utf8')) as { compilerOptions: Record<string, unknown> }
  config.compilerOptions.noImplicitReturns = !config.compilerOptions.noImplicitReturns
  await writeFile(base, JSON.stringify(config, null, 2))
  const after = await taskHashes()

  expect([...before.keys()]).toEqual(expect.arrayContaining(['@kubevol/core#build', '@kubevol/core#typecheck', '@kubevol/cli#build']))
  expect([...after.keys()].sort()).toEqual([...before.keys()].sort())
  expect([...before].filter(([task, hash]) => after.get(task) === hash).map(([task]) => task)).toEqual([])
})
