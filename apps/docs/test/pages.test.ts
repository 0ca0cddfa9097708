// The pages cannot drift from the code: every TypeScript example is a file the test suite runs
// (pages include it, they never inline it), every example a page runs exists and is tested, every
// `kubevol` command line shown parses with the CLI's own parser, and every file a page names exists.
import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseCommandLine } from '@kubevol/cli'
import { describe, expect, it } from 'vitest'
import { sidebar } from '../.vitepress/sidebar.js'

const DOCS = fileURLToPath(new URL('..', import.meta.url))
const REPO = join(DOCS, '..', '..')
const PAGES = join(DOCS, 'pages')
// Generated before each build by scripts/generate-reference.mjs.
// One API page per entry point of each package (see the API_PAGES table there).
const API_PAGES = ['core', 'core-plugins', 'core-engine', 'core-host', 'core-testing', 'core-testing-host-contract', 'adapter-mock', 'adapter-linux', 'agent', 'agent-kube', 'agent-testing', 'cli'].map((n) => `api-${n}`)
const GENERATED = [...API_PAGES, 'cli', 'configuration', 'metrics-and-events'].map((n) => `reference/${n}.md`)

const pages = readdirSync(PAGES, { recursive: true, encoding: 'utf8' })
  .filter((f) => f.endsWith('.md') && !GENERATED.includes(f))
  .map((file) => ({ file, text: readFileSync(join(PAGES, file), 'utf8') }))

/** Fenced code blocks: language and body. */
function fences(text: string): { lang: string; body: string }[] {
  return [...text.matchAll(/^```(\w*)[^\n]*\n([\s\S]*?)^```/gm)].map((m) => ({ lang: m[1] ?? '', body: m[2] ?? '' }))
}

describe('the pages', () => {
  it('are all in the sidebar, and every sidebar entry has a page', () => {
    const linked = new Set(sidebar.flatMap((g) => g.items.map((i) => `${i.link.slice(1)}.md`)))
    const written = new Set([...pages.map((p) => p.file).filter((f) => f !== 'index.md'), ...GENERATED])
    expect([...written].sort()).toEqual([...linked].sort())
  })

  it.each(pages)('$file inlines no TypeScript or JavaScript: examples come from tested files', ({ text }) => {
    expect(fences(text).filter((f) => /^(ts|js|typescript|javascript|tsx|jsx|vue)$/.test(f.lang))).toEqual([])
  })

  it('include only example files that exist, and run only examples the test suite runs', () => {
    const tested = readFileSync(join(DOCS, 'test', 'examples.test.ts'), 'utf8')
    let includes = 0
    for (const { file, text } of pages) {
      for (const m of text.matchAll(/^<<< @\/(\S+)/gm)) {
        includes++
        expect(existsSync(join(PAGES, m[1]!)), `${file} includes ${m[1]}`).toBe(true)
        // A file of one of the repository's example packages (examples/*) is run by that package's tests.
        if (m[1]!.startsWith('../../../examples/')) continue
        const name = m[1]!.replace(/^\.\.\/examples\//, '').replace(/\.ts$/, '')
        // A test file runs itself; any other example is imported by examples.test.ts.
        if (!name.endsWith('.test')) expect(tested, `${name} is not run by examples.test.ts`).toContain(`'../examples/${name}.js'`)
      }
      for (const m of text.matchAll(/<RunExample name="([^"]+)"/g)) {
        expect(existsSync(join(DOCS, 'examples', `${m[1]}.ts`)), `${file} runs ${m[1]}`).toBe(true)
        expect(text, `${file} runs ${m[1]} without showing its code`).toContain(`<<< @/../examples/${m[1]}.ts`)
      }
    }
    expect(includes).toBeGreaterThanOrEqual(10)
  })

  it('show only kubevol command lines the CLI accepts, under the flags\' current names', () => {
    const lines = pages.flatMap(({ file, text }) =>
      fences(text)
        .filter((f) => f.lang === 'sh')
        .flatMap((f) => f.body.split('\n'))
        .map((line) => line.replace(/\s+#.*$/, '').trim())
        .filter((line) => /^(sudo )?kubevol /.test(line))
        .map((line) => ({ file, line })),
    )
    expect(lines.length).toBeGreaterThan(10)
    for (const { file, line } of lines) {
      const argv = line.replace(/^sudo /, '').split(/\s+/).slice(1)
      expect(() => parseCommandLine(argv), `${file}: ${line}`).not.toThrow()
      const parsed = parseCommandLine(argv)
      expect(parsed.kind, `${file}: ${line}`).toBe('command')
      // The flags' own names, never a deprecated spelling.
      if (parsed.kind === 'command') expect(parsed.parsed.warnings, `${file}: ${line}`).toEqual([])
    }
  })

  it('name only repository files and diagrams that exist', () => {
    for (const { file, text } of pages) {
      for (const m of text.matchAll(/kubectl apply -f (\S+)/g)) expect(existsSync(join(REPO, m[1]!)), `${file}: ${m[1]}`).toBe(true)
      for (const m of text.matchAll(/\]\((\/diagrams\/[^)]+)\)/g)) expect(existsSync(join(PAGES, 'public', m[1]!)), `${file}: ${m[1]}`).toBe(true)
    }
  })
})
