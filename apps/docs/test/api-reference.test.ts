// The API reference lists exactly each entry point's deliberate surface: the names its checked-in
// API report (packages/<pkg>/api/<entry>.api.md) declares, no more and no fewer.
import { execFile } from 'node:child_process'
import { readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { beforeAll, describe, expect, it } from 'vitest'

const DOCS = fileURLToPath(new URL('..', import.meta.url))
const REPO = join(DOCS, '..', '..')
const REFERENCE = join(DOCS, 'pages', 'reference')

/** The names a report declares at the top level of its entry point. */
function reportNames(file: string): string[] {
  const text = readFileSync(file, 'utf8')
  const names = [...text.matchAll(/^export (?:declare )?(?:abstract )?(?:function|class|interface|type|const|let|var|enum|namespace) (\w+)/gm)].map((m) => m[1] ?? '')
  return [...new Set(names)].sort()
}

const pageNames = (file: string) => [...readFileSync(file, 'utf8').matchAll(/^### (\S+)$/gm)].map((m) => m[1] ?? '').sort()

const reports = readdirSync(join(REPO, 'packages'))
  .flatMap((pkg) => {
    try {
      return readdirSync(join(REPO, 'packages', pkg, 'api')).map((f) => ({ pkg, entry: f.replace(/\.api\.md$/, '') }))
    } catch {
      return []
    }
  })
  .map(({ pkg, entry }) => ({ report: `packages/${pkg}/api/${entry}.api.md`, page: `api-${pkg}${entry === 'index' ? '' : `-${entry}`}.md` }))

describe('the API reference', () => {
  beforeAll(async () => {
    await promisify(execFile)(process.execPath, ['scripts/generate-reference.mjs'], { cwd: DOCS })
  }, 120_000)

  it('has a page for every checked-in API report, and none other', () => {
    expect(reports.length).toBeGreaterThanOrEqual(12)
    const pages = readdirSync(REFERENCE).filter((f) => f.startsWith('api-'))
    expect(pages.sort()).toEqual(reports.map((r) => r.page).sort())
  })

  it.each(reports)('$page lists exactly the names of $report', ({ report, page }) => {
    const names = reportNames(join(REPO, report))
    expect(names.length).toBeGreaterThan(0)
    expect(pageNames(join(REFERENCE, page))).toEqual(names)
  })
})
