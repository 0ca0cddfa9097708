/**
 * One way to import, everywhere a reader looks: the in-memory PodSource and ObjectReader come from
 * `@kubevol/core` itself (embedding needs only the main entry), never from `@kubevol/core/testing`,
 * in the docs' examples and pages, the repository's examples and every README.
 */
import { readFileSync, readdirSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const REPO = fileURLToPath(new URL('../../../', import.meta.url))
const MAIN_ENTRY_NAMES = ['createMemoryPodSource', 'createMemoryObjectReader']

/** Files under `dir` (relative to the repository) whose names match `pattern`, subfolders included. */
function files(dir: string, pattern: RegExp): string[] {
  const found: string[] = []
  for (const entry of readdirSync(join(REPO, dir), { withFileTypes: true })) {
    const path = join(dir, entry.name)
    if (entry.isDirectory() && entry.name !== 'node_modules' && entry.name !== 'reference' && entry.name !== 'dist') found.push(...files(path, pattern))
    else if (entry.isFile() && pattern.test(entry.name)) found.push(path)
  }
  return found
}

const readerFacing = [
  ...files('apps/docs/examples', /\.ts$/),
  ...files('apps/docs/pages', /\.md$/),
  ...files('examples', /^(?!.*\.test\.).*\.(js|ts|md)$/),
  'README.md',
  ...readdirSync(join(REPO, 'packages')).map((p) => `packages/${p}/README.md`),
]

describe('imports in what a reader copies', () => {
  it.each(readerFacing.map((f) => [relative(REPO, join(REPO, f))]))('%s takes the in-memory sources from @kubevol/core', (file) => {
    const text = readFileSync(join(REPO, file), 'utf8')
    const fromTesting = [...text.matchAll(/import\s*\{([^}]*)\}\s*from\s*'@kubevol\/core\/testing'/g)].flatMap((m) => (m[1] ?? '').split(',').map((n) => n.trim()))
    expect(fromTesting.filter((name) => MAIN_ENTRY_NAMES.includes(name))).toEqual([])
  })
})
