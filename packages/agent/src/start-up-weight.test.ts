/**
 * @kubernetes/client-node costs about 0.6 s and 90 MB of start-up, so only API mode may load it: the
 * main entry, the agent's `--help`, static mode and the CLI's help must not. Each case runs the
 * built code in a child Node process whose resolve hook writes down every module it loads (dynamic
 * imports included), and the list is checked. The API-mode case shows the hook does see the client.
 */
import { spawnSync } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { tempDir } from '../test/helpers.js'

const repo = fileURLToPath(new URL('../../../', import.meta.url))
const agentDist = join(repo, 'packages/agent/dist')
const cliMain = join(repo, 'packages/cli/dist/main.js')
const built = existsSync(join(agentDist, 'index.js')) && existsSync(join(agentDist, 'kube/index.js')) && existsSync(cliMain)
if (!built) {
  // CI builds before testing (npm test); a CI run without a build is a failure, not a skip.
  if (process.env.CI === 'true') throw new Error('start-up weight test: the packages are not built (npm run build)')
  console.warn('[agent] skipping the start-up weight test: packages/agent/dist or packages/cli/dist is not built (npm run build)')
}

const work = tempDir('kubevol-loaded-')
afterAll(() => work.cleanup())
// The hook's own source, written to a file: its `${...}` is the hook's template literal, not this file's.
// biome-ignore lint/suspicious/noTemplateCurlyInString: source text of another module
work.write('hooks.mjs', "import { appendFileSync } from 'node:fs'\nlet out\nexport function initialize(data) { out = data.out }\nexport async function resolve(specifier, context, next) {\n  const result = await next(specifier, context)\n  appendFileSync(out, `${result.url}\\n`)\n  return result\n}\n")
work.write('register.mjs', "import { register } from 'node:module'\nregister(new URL('./hooks.mjs', import.meta.url), { data: { out: process.env.KUBEVOL_LOADED_OUT } })\n")

let runs = 0
/** Runs `node <args>` from the repository root; returns the module URLs it loaded and its exit status. */
function loadedModules(args: readonly string[]): { modules: string[]; status: number | null; output: string } {
  const out = join(work.dir, `loaded-${++runs}.txt`)
  writeFileSync(out, '')
  const child = spawnSync(process.execPath, ['--import', join(work.dir, 'register.mjs'), ...args], {
    cwd: repo,
    env: { ...process.env, KUBEVOL_LOADED_OUT: out, NO_COLOR: '1' },
    encoding: 'utf8',
    timeout: 60_000,
  })
  return { modules: readFileSync(out, 'utf8').split('\n').filter(Boolean), status: child.status, output: `${child.stdout}${child.stderr}` }
}

const isKubeClient = (url: string) => url.includes('/node_modules/@kubernetes/client-node/')

describe.runIf(built)('start-up weight: @kubernetes/client-node is loaded only in API mode', () => {
  it.each([
    { name: "@kubevol/agent's main entry", args: ['--input-type=module', '-e', "await import('@kubevol/agent')"] },
    { name: "the agent's --help", args: ['packages/agent/dist/main.js', '--help'] },
    { name: 'kubevol --help', args: [cliMain, '--help'] },
    { name: 'kubevol run --once on the examples (static mode)', args: [cliMain, 'run', '--once', '--pod-manifest-path', 'examples/manifests'] },
  ])('$name does not load it', ({ args }) => {
    const run = loadedModules(args)
    expect(run.status, run.output).toBe(0)
    // The hook saw the agent's own modules, so an empty list cannot pass for a clean one.
    expect(run.modules.some((url) => url.includes('/packages/agent/dist/'))).toBe(true)
    expect(run.modules.filter(isKubeClient)).toEqual([])
  })

  it('@kubevol/agent/kube, the API-mode entry, does load it', () => {
    const run = loadedModules(['--input-type=module', '-e', "await import('@kubevol/agent/kube')"])
    expect(run.status, run.output).toBe(0)
    expect(run.modules.filter(isKubeClient).length).toBeGreaterThan(0)
  })
})
