// The page's editor, in Node: every example runs through the same compile-and-run path as an edit
// in the page and prints what the example itself prints; edits change the output; problems are
// named; and the in-memory type checker finds the errors of the real packages' declarations.
import { readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'
import { pageFiles } from '../editor/page-files.js'
import { loadPageModules } from '../editor/page-modules.js'
import { ExampleError, runSource } from '../editor/run-source.js'
import { createChecker } from '../editor/type-check.js'

const DOCS = fileURLToPath(new URL('..', import.meta.url))
const source = (name: string): string => readFileSync(join(DOCS, 'examples', `${name}.ts`), 'utf8')
/** The examples the pages run with <RunExample>, found in the pages themselves. */
const runnable = readdirSync(join(DOCS, 'pages'), { recursive: true, encoding: 'utf8' })
  .filter((f) => f.endsWith('.md'))
  .flatMap((f) => [...readFileSync(join(DOCS, 'pages', f), 'utf8').matchAll(/<RunExample name="([^"]+)"/g)].map((m) => m[1] as string))
  .sort()

describe('examples edited in the page', () => {
  it('finds the runnable examples in the pages', () => {
    expect(runnable.length).toBeGreaterThanOrEqual(10)
  })

  it.each(runnable)('%s runs from its source as it runs from its module', async (name) => {
    const modules = await loadPageModules()
    const edited = await runSource(ts, source(name), modules)
    const own = (await import(`../examples/${name}.ts`)) as { run(): Promise<{ lines: readonly string[] }> }
    expect(edited.lines).toEqual((await own.run()).lines)
  })

  it('runs an edit: four failures become two, and the output shows two retries', async () => {
    const original = source('backoff')
    const edited = original.replace('times: 4,', 'times: 2,')
    expect(edited).not.toBe(original)
    const { lines } = await runSource(ts, edited, await loadPageModules())
    expect(lines.filter((l) => l.includes('retry'))).toHaveLength(2)
    expect(lines.at(-1)).toContain('mounted')
  })

  it.each([
    ['a syntax error', 'export async function run( {', 'compile', /line 1: /],
    ['an import the page lacks', "import { readFileSync } from 'node:fs'\nexport async function run() { return { lines: [String(readFileSync)] } }", 'import', /cannot import 'node:fs' here/],
    ['a throw', "export async function run() { throw new RangeError('too far') }", 'run', /run\(\) threw RangeError: too far/],
    ['no run()', 'export const lines = []', 'run', /must export a function run\(\)/],
    ['no lines', 'export async function run() { return 42 }', 'run', /must return an object with lines/],
  ])('names %s', async (_, code, phase, message) => {
    const failure = await runSource(ts, code, await loadPageModules()).catch((err: unknown) => err)
    expect(failure).toBeInstanceOf(ExampleError)
    expect((failure as ExampleError).phase).toBe(phase)
    expect((failure as ExampleError).message).toMatch(message)
  })
})

describe('the type checker of the page', () => {
  const checker = createChecker(ts, pageFiles())

  it.each(runnable)('finds no problem in %s', (name) => {
    expect(checker.check(source(name))).toEqual([])
  })

  it("reports a wrong argument with the packages' own types, on its line", () => {
    const original = source('backoff')
    const edited = original.replace("h.plugin.fail('setUp'", "h.plugin.fail('setup'")
    const problems = checker.check(edited)
    const line = edited.split('\n').findIndex((l) => l.includes("fail('setup'")) + 1
    expect(problems).toEqual([expect.objectContaining({ line, severity: 'error', message: expect.stringContaining('"setup"') })])
    expect(edited.slice(problems[0]?.from, problems[0]?.to)).toBe("'setup'")
  })

  it('reports a name no package exports', () => {
    const problems = checker.check("import { createVolumeManagr } from '@kubevol/core'\nexport const x = createVolumeManagr")
    expect(problems.map((p) => p.message)).toEqual([expect.stringMatching(/has no exported member named 'createVolumeManagr'/)])
  })
})
