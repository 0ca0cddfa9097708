/**
 * The public surface of every published package is checked in as API Extractor reports
 * (`packages/<pkg>/api/<entry>.api.md`, one per entry point in `exports`). This test regenerates
 * them from the built declarations into a temporary folder and fails, naming the stale reports,
 * when one differs from what is checked in: a change to the surface must show in review.
 */
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { beforeAll, describe, expect, it } from 'vitest'
// @ts-expect-error: a plain ES module script without declarations
import { entryPoints, PACKAGES, runApiReports } from '../scripts/api-report.mjs'

const repoRoot = fileURLToPath(new URL('..', import.meta.url))

interface EntryPoint {
  readonly name: string
  readonly subpath: string
  readonly report: string
}

describe('API reports', () => {
  let result: { stale: string[]; problems: string[] }
  beforeAll(() => {
    const missing = PACKAGES.filter((pkg: string) => !existsSync(join(repoRoot, 'packages', pkg, 'dist/index.d.ts')))
    if (missing.length > 0) throw new Error(`build first (npm run build): no declarations for ${missing.join(', ')}`)
    result = runApiReports({ check: true, quiet: true })
  }, 170_000)

  it.each(PACKAGES)('has a checked-in report for every entry point of %s', (pkg: string) => {
    const points: EntryPoint[] = entryPoints(pkg)
    expect(points.length).toBeGreaterThan(0)
    for (const point of points) expect(existsSync(join(repoRoot, 'packages', pkg, 'api', point.report)), `${point.name}${point.subpath.slice(1)}`).toBe(true)
  })

  it('matches the built declarations (run `npm run build && npm run api` to refresh, then commit the reports)', () => {
    expect(result.stale, 'stale API reports: run `npm run build && npm run api` and commit packages/*/api').toEqual([])
  })

  it('raises no API Extractor warning', () => {
    expect(result.problems).toEqual([])
  })
})
