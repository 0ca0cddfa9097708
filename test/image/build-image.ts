/**
 * `buildah bud` of deploy/Dockerfile as shipped, from the repository root, with `--pull=never` (its
 * `FROM node:22-slim` is the base image made here) and this machine's npm configuration as the
 * `npmrc` build secret, made by deploy/npmrc-secret.mjs as the README tells operators behind a
 * registry mirror. `--layers` keeps each step's layer in the machine's storage, so a later run
 * rebuilds only from the first step whose input changed (usually `COPY packages`); dangling layers
 * older than a week are pruned so that the storage does not grow without end.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { run } from './tools.js'

export const repoRoot = fileURLToPath(new URL('../../', import.meta.url))
export const DOCKERFILE = join(repoRoot, 'deploy/Dockerfile')

export interface BuiltImage {
  readonly id: string
  readonly seconds: number
  /** Steps taken from the layer cache, of all steps. */
  readonly cachedSteps: number
  readonly steps: number
}

export async function buildImage(work: string, env: NodeJS.ProcessEnv, tag: string): Promise<BuiltImage> {
  const started = Date.now()
  const secret = join(work, 'npmrc')
  writeFileSync(secret, await run(process.execPath, [join(repoRoot, 'deploy/npmrc-secret.mjs')], { cwd: repoRoot }), { mode: 0o600 })
  const iidfile = join(work, 'image-id')
  const output = await run(
    'buildah',
    ['bud', '--pull=never', '--layers', '--force-rm', '--ignorefile', join(repoRoot, 'deploy/Dockerfile.dockerignore'), '--secret', `id=npmrc,src=${secret}`, '--iidfile', iidfile, '-f', DOCKERFILE, '-t', tag, repoRoot],
    { cwd: repoRoot, env, timeoutMs: 20 * 60_000 },
  )
  await run('podman', ['image', 'prune', '--force', '--filter', 'until=168h'], { env })
  const id = readFileSync(iidfile, 'utf8').trim().replace(/^sha256:/, '')
  return {
    id,
    seconds: Math.round((Date.now() - started) / 100) / 10,
    cachedSteps: output.split('\n').filter((line) => line.startsWith('--> Using cache')).length,
    steps: output.split('\n').filter((line) => /^\[\d+\/\d+\] STEP /.test(line) || /^STEP /.test(line)).length,
  }
}
