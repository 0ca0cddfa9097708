/**
 * The linter over the whole repository (config: biome.json) must report nothing: a finding fails
 * here, in the suite CI runs, rather than only when someone runs `npm run lint`.
 */
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { expect, it } from 'vitest'

const repoRoot = fileURLToPath(new URL('..', import.meta.url))

it('biome lint finds nothing (run `npm run lint` to see it)', async () => {
  const result = await promisify(execFile)(join(repoRoot, 'node_modules/.bin/biome'), ['lint', '--max-diagnostics=50', '.'], { cwd: repoRoot, maxBuffer: 16 * 1024 * 1024 }).then(
    ({ stdout, stderr }) => ({ code: 0, output: `${stdout}${stderr}` }),
    (err: { code?: number; stdout?: string; stderr?: string }) => ({ code: err.code ?? 1, output: `${err.stdout ?? ''}${err.stderr ?? ''}` }),
  )
  expect(result.code, result.output).toBe(0)
  // Warnings do not change the exit code; they are findings too.
  expect(result.output, result.output).not.toMatch(/Found \d+ warnings?/)
}, 120_000)
