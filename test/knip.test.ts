/**
 * No unused file, dependency or export: knip over the whole repository (config: knip.jsonc) must
 * find nothing. When it does, remove what is unused, or, for what is used only in a way knip cannot
 * see, say why in knip.jsonc.
 */
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { expect, it } from 'vitest'

const repoRoot = fileURLToPath(new URL('..', import.meta.url))

it('knip finds no unused files, dependencies or exports (run `npx knip` to see them)', async () => {
  const result = await promisify(execFile)(join(repoRoot, 'node_modules/.bin/knip'), ['--no-progress', '--reporter', 'compact'], { cwd: repoRoot, maxBuffer: 16 * 1024 * 1024 }).then(
    ({ stdout, stderr }) => ({ code: 0, output: `${stdout}${stderr}` }),
    (err: { code?: number; stdout?: string; stderr?: string }) => ({ code: err.code ?? 1, output: `${err.stdout ?? ''}${err.stderr ?? ''}` }),
  )
  // knip exits 1 on any issue; its configuration hints (an ignore that is no longer needed) are
  // printed but do not fail, so a dependency that comes into use does not break the build.
  expect(result.code, result.output).toBe(0)
}, 170_000)
