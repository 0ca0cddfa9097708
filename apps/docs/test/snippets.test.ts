// The READMEs cannot drift from the code either: every TypeScript or JavaScript block in README.md and
// packages/*/README.md is type-checked against the packages (skipLibCheck off), and run unless the
// table below says why not. The site's pages inline no code at all (pages.test.ts), and their
// examples are run by examples.test.ts.
//
// A block is a module of its own. A fragment that reads names an earlier block or its page defined
// says so with `prelude` (declarations and imports put before it): the fragment itself is what the
// reader sees. A new block fails this test until it is listed here.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { inspect } from 'node:util'
import ts from 'typescript'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'

const DOCS = fileURLToPath(new URL('..', import.meta.url))
const REPO = join(DOCS, '..', '..')

interface Check {
  /** `run`: imported (after the type check) and must settle without error; `typecheck`: compiled only. */
  readonly mode: 'run' | 'typecheck'
  /** Why a block is only type-checked. */
  readonly reason?: string
  /** What the block must print with console.log, when it prints. */
  readonly prints?: readonly string[]
  readonly prelude?: string
}

const mockHostPrelude = `import { createMemoryHost } from '@kubevol/adapter-mock'\nconst host = createMemoryHost()\n`

/** `file#n`: the n-th TypeScript/JavaScript block of the file, from 1. */
const checks: Readonly<Record<string, Check>> = {
  'README.md#1': { mode: 'run', prints: ["[ 'cache' ]"] },
  'packages/core/README.md#1': { mode: 'run', prints: ['true'] },
  'packages/adapter-linux/README.md#1': { mode: 'typecheck', reason: 'mounts a tmpfs on the machine: needs root (its own tests run it as root)' },
  'packages/adapter-mock/README.md#1': { mode: 'run' },
  'packages/adapter-mock/README.md#2': {
    mode: 'run',
    prelude: `import { expect } from 'vitest'\n${mockHostPrelude}await host.mkdir('/var/lib/kubevol/pods/u1/volumes/kubernetes.io~empty-dir/cache', { recursive: true })\nawait host.mount({ source: 'tmpfs', target: '/var/lib/kubevol/pods/u1/volumes/kubernetes.io~empty-dir/cache', fstype: 'tmpfs' })\n`,
  },
  'packages/adapter-mock/README.md#3': {
    mode: 'run',
    prelude: `import { expect } from 'vitest'\nimport { HostError } from '@kubevol/core'\nimport { createFakeClock } from '@kubevol/core/testing'\nimport { createMemoryHost } from '@kubevol/adapter-mock'\nconst clock = createFakeClock()\nconst host = createMemoryHost({ clock })\nconst target = '/var/lib/kubevol/pods/u1/volumes/kubernetes.io~empty-dir/cache'\nawait host.mkdir(target, { recursive: true })\nawait host.mount({ source: 'tmpfs', target, fstype: 'tmpfs' })\n`,
  },
  'packages/adapter-mock/README.md#4': {
    mode: 'typecheck',
    reason: 'registers a vitest hook: it belongs in a test file, not in a running test',
    prelude: `import { afterEach, expect } from 'vitest'\n${mockHostPrelude}`,
  },
  'packages/adapter-mock/README.md#5': {
    mode: 'typecheck',
    reason: 'declares a test suite (the docs run the same contract in examples/host-contract.test.ts)',
  },
  'packages/agent/README.md#1': {
    mode: 'typecheck',
    reason: "reads the machine's /etc/kubevol/manifests and serves HTTP (the agent's own tests run startAgent)",
  },
  'packages/agent/README.md#2': {
    mode: 'typecheck',
    reason: "starts the fake API server and an agent against it (the agent's API tests run exactly this)",
    prelude: `import { startAgent } from '@kubevol/agent'\nimport { startFakeApiServer } from '@kubevol/agent/testing'\n`,
  },
  'packages/cli/README.md#1': {
    mode: 'typecheck',
    reason: "a fragment: the CLI's own tests run runCli with these dependencies",
    prelude: `declare const stdout: Parameters<typeof runCli>[1]['stdout']\ndeclare const stderr: Parameters<typeof runCli>[1]['stderr']\ndeclare const host: import('@kubevol/core').Host\n`,
  },
}

const SOURCES = ['README.md', 'packages/core/README.md', 'packages/adapter-mock/README.md', 'packages/adapter-linux/README.md', 'packages/agent/README.md', 'packages/cli/README.md']

interface Block {
  readonly id: string
  readonly lang: string
  readonly body: string
  readonly check: Check | undefined
}

function blocksOf(file: string): Block[] {
  const text = readFileSync(join(REPO, file), 'utf8')
  const code = [...text.matchAll(/^```(\w*)[^\n]*\n([\s\S]*?)^```/gm)].filter((m) => /^(ts|js|typescript|javascript|tsx|jsx|mjs)$/.test(m[1] ?? ''))
  return code.map((m, i) => ({ id: `${file}#${i + 1}`, lang: m[1] ?? '', body: m[2] ?? '', check: checks[`${file}#${i + 1}`] }))
}

const blocks = SOURCES.flatMap(blocksOf)
let dir: string
const files = new Map<string, string>()

beforeAll(async () => {
  // Inside the docs app, so the workspace packages resolve as they do for the examples.
  await mkdir(join(DOCS, 'test-artifacts'), { recursive: true })
  dir = await mkdtemp(join(DOCS, 'test-artifacts', 'snippets-'))
  for (const block of blocks) {
    const file = join(dir, `${block.id.replace(/[^\w]+/g, '-')}.ts`)
    // `export {}`: every block is a module (top-level await, no globals shared between blocks).
    await writeFile(file, `${block.check?.prelude ?? ''}${block.body}\nexport {}\n`)
    files.set(block.id, file)
  }
})

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true })
})

describe('the README code blocks', () => {
  it('are all listed, and every listed one exists', () => {
    expect(blocks.length).toBeGreaterThanOrEqual(10)
    expect(blocks.filter((b) => !b.check).map((b) => b.id)).toEqual([])
    expect(Object.keys(checks).filter((id) => !blocks.some((b) => b.id === id))).toEqual([])
    for (const b of blocks) if (b.check?.mode === 'typecheck') expect(b.check.reason, b.id).toBeTruthy()
  })

  it('type-check against the packages, with skipLibCheck off', () => {
    const { config } = ts.readConfigFile(join(DOCS, 'tsconfig.json'), ts.sys.readFile)
    const parsed = ts.parseJsonConfigFileContent(config, ts.sys, DOCS)
    const options = { ...parsed.options, skipLibCheck: false, noUnusedLocals: false }
    const program = ts.createProgram([...files.values()], options)
    const problems = ts
      // Our blocks, and the declarations they reach: a package's types must compile for a reader too.
      .getPreEmitDiagnostics(program)
      .map((d) => {
        const where = d.file && d.start !== undefined ? `${relative(REPO, d.file.fileName)}:${d.file.getLineAndCharacterOfPosition(d.start).line + 1}: ` : ''
        return `${where}${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`
      })
    expect(problems).toEqual([])
  })

  it.each(blocks.filter((b) => b.check?.mode === 'run').map((b) => ({ id: b.id, check: b.check as Check })))('$id runs', async ({ id, check }) => {
    const printed: string[] = []
    const log = vi.spyOn(console, 'log').mockImplementation((...args: unknown[]) => {
      printed.push(args.map((a) => (typeof a === 'string' ? a : inspect(a))).join(' '))
    })
    try {
      await import(pathToFileURL(files.get(id) ?? '').href)
    } finally {
      log.mockRestore()
    }
    expect(printed).toEqual(check.prints ?? [])
  })
})
