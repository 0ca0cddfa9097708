/**
 * SLOW (about a minute: two `npm ci` and a build). No image can be built where the tests run, so
 * this runs deploy/Dockerfile's steps on a clean copy of the repository: each stage is a temporary
 * folder standing for the image's file system; COPY, WORKDIR, ENV and RUN are applied in order
 * (COPY from the build context takes the files git would commit, less Dockerfile.dockerignore;
 * `--from=<stage>` from that stage's folder). The one step not run is the Debian packages' apt-get
 * (OS tools; it needs the Debian mirrors and root over /). `npm ci` runs with the Dockerfile's own
 * flags plus prefer-offline (the npm cache; the Dockerfile's cache mount stands for it). Then the
 * ENTRYPOINT's `--help`, `kubevol --help` through the image's PATH, and a real start of the agent
 * must work from the final folder, with no vitest installed there.
 *
 * Skipped, with the reason printed, only without git or a git checkout; never when CI=true.
 */
import { type SpawnSyncReturns, spawn, spawnSync } from 'node:child_process'
import { cpSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, statSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join, posix } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'

const repo = fileURLToPath(new URL('../../../', import.meta.url))
const dockerfile = readFileSync(join(repo, 'deploy/Dockerfile'), 'utf8')
const dockerignore = readFileSync(join(repo, 'deploy/Dockerfile.dockerignore'), 'utf8')

function gitFiles(): string[] | string {
  const git = spawnSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: repo, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 })
  if (git.error) return `git cannot run (${git.error.message})`
  if (git.status !== 0) return `not a git checkout (${git.stderr.trim()})`
  return git.stdout.split('\0').filter(Boolean)
}
const files = gitFiles()
const impossible = typeof files === 'string' ? files : undefined
if (impossible) {
  if (process.env.CI === 'true') throw new Error(`the Dockerfile steps test cannot run in CI: ${impossible}`)
  console.warn(`[agent] skipping the Dockerfile steps test: ${impossible}`)
}

// ---- the Dockerfile, parsed ----
interface Step {
  readonly instruction: string
  readonly args: string
}
interface Stage {
  readonly name: string | undefined
  readonly steps: Step[]
}

function parseDockerfile(text: string): Stage[] {
  const lines: string[] = []
  let pending = ''
  for (const raw of text.split('\n')) {
    if (!pending && /^\s*(#|$)/.test(raw)) continue
    if (pending && /^\s*#/.test(raw)) continue
    // A backslash at the end joins the next line (Docker drops both; comment lines inside are dropped).
    if (raw.endsWith('\\')) pending += raw.slice(0, -1)
    else {
      lines.push(pending + raw)
      pending = ''
    }
  }
  const stages: Stage[] = []
  for (const line of lines) {
    const m = /^\s*([A-Za-z]+)\s+([\s\S]*)$/.exec(line)
    if (!m) throw new Error(`cannot read Dockerfile line: ${line}`)
    const instruction = (m[1] as string).toUpperCase()
    const args = (m[2] as string).trim()
    if (instruction === 'FROM') stages.push({ name: /\s+AS\s+(\S+)$/i.exec(args)?.[1], steps: [] })
    else stages.at(-1)?.steps.push({ instruction, args })
  }
  return stages
}

/** Dockerfile.dockerignore's patterns: `**\/x` anywhere, else a path prefix. */
function ignored(path: string): boolean {
  return dockerignore
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'))
    .some((pattern) => {
      if (pattern.startsWith('**/')) return path.split('/').includes(pattern.slice(3))
      return path === pattern || path.startsWith(`${pattern}/`)
    })
}

// ---- applying it ----
const work = impossible ? '' : mkdtempSync(join(tmpdir(), 'kubevol-dockerfile-'))
// The copy holds an installed node_modules: removing it takes a while on a loaded machine.
afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true })
}, 180_000)

interface StageFs {
  readonly root: string
  workdir: string
  env: Record<string, string>
}
/** A container path in a stage's folder. */
const inStage = (fs: StageFs, path: string): string => join(fs.root, posix.resolve(fs.workdir, path))

function expand(value: string, env: Record<string, string>): string {
  return value.replace(/\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?/g, (_, name: string) => env[name] ?? '')
}

/** The environment a RUN or the final checks see: container paths in PATH mapped into the folder. */
function processEnv(fs: StageFs): NodeJS.ProcessEnv {
  const path = (fs.env.PATH ?? '')
    .split(':')
    .map((entry) => (entry.startsWith('/') && existsSync(join(fs.root, entry)) ? join(fs.root, entry) : entry))
    .join(':')
  return { ...process.env, ...fs.env, PATH: path, npm_config_prefer_offline: 'true', npm_config_update_notifier: 'false' }
}

function copy(from: string, to: string): void {
  const isDir = statSync(from).isDirectory()
  mkdirSync(isDir ? to : dirname(to), { recursive: true })
  cpSync(from, to, { recursive: true, verbatimSymlinks: true })
}

const log: string[] = []
function run(stages: Stage[], context: string): StageFs {
  const done = new Map<string, StageFs>()
  let fs: StageFs | undefined
  stages.forEach((stage, i) => {
    const current: StageFs = { root: join(work, `stage-${i}`), workdir: '/', env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } }
    fs = current
    mkdirSync(current.root, { recursive: true })
    for (const step of stage.steps) {
      if (step.instruction === 'WORKDIR') {
        current.workdir = posix.resolve(current.workdir, step.args)
        mkdirSync(join(current.root, current.workdir), { recursive: true })
      } else if (step.instruction === 'ENV') {
        const m = /^([A-Za-z_][A-Za-z0-9_]*)[= ](.*)$/.exec(step.args)
        if (!m) throw new Error(`cannot read ENV ${step.args}`)
        current.env[m[1] as string] = expand(m[2] as string, current.env)
      } else if (step.instruction === 'COPY') {
        const words = step.args.split(/\s+/)
        const fromName = words.find((w) => w.startsWith('--from='))?.slice('--from='.length)
        const paths = words.filter((w) => !w.startsWith('--'))
        const dest = paths.pop() as string
        const source = fromName === undefined ? undefined : done.get(fromName)
        if (fromName !== undefined && !source) throw new Error(`COPY --from=${fromName}: no such stage`)
        const destIsDir = dest.endsWith('/') || paths.length > 1
        for (const src of paths) {
          const from = source ? join(source.root, src) : join(context, src)
          const target = inStage(current, dest)
          copy(from, destIsDir && !statSync(from).isDirectory() ? join(target, posix.basename(src)) : target)
        }
      } else if (step.instruction === 'RUN') {
        // RUN flags (--mount=type=cache,...) are BuildKit's; the machine's npm cache stands for the cache mount.
        const command = step.args.replace(/^(--\S+\s+)+/, '')
        if (/\bapt-get\b/.test(command)) {
          log.push(`skipped: RUN ${command.split('\n')[0]} (Debian packages)`)
          continue
        }
        const started = Date.now()
        const result = spawnSync('sh', ['-c', command], { cwd: join(current.root, current.workdir), env: processEnv(current), encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 })
        log.push(`RUN ${command.replace(/\s+/g, ' ')} (${((Date.now() - started) / 1000).toFixed(1)} s)`)
        if (result.status !== 0) throw new Error(`RUN ${command} exited ${result.status}:\n${result.stdout.slice(-4000)}\n${result.stderr.slice(-4000)}`)
      }
      // FROM's image, STOPSIGNAL, ENTRYPOINT, CMD: nothing to apply to the folder.
    }
    if (stage.name) done.set(stage.name, current)
  })
  if (!fs) throw new Error('the Dockerfile has no stage')
  return fs
}

/** Directories named `name` inside any node_modules under `dir` (symlinks not followed). */
function installed(dir: string, name: string, found: string[] = []): string[] {
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry)
    if (lstatSync(path).isSymbolicLink() || !lstatSync(path).isDirectory()) continue
    if (entry === name && dir.endsWith('node_modules')) found.push(path)
    else installed(path, name, found)
  }
  return found
}

const ok = (r: SpawnSyncReturns<string>) => ({ status: r.status, output: r.status === 0 ? '' : `${r.stdout}${r.stderr}`.slice(-3000) })

describe.skipIf(impossible !== undefined)('deploy/Dockerfile, its steps run on a clean copy (slow)', () => {
  it('installs, builds and starts: the entry point, kubevol on PATH, no test tooling', { timeout: 240_000 }, async () => {
    const context = join(work, 'context')
    for (const file of files as string[]) {
      if (ignored(file) || !existsSync(join(repo, file))) continue
      mkdirSync(dirname(join(context, file)), { recursive: true })
      cpSync(join(repo, file), join(context, file), { verbatimSymlinks: true })
    }
    const image = run(parseDockerfile(dockerfile), context)
    console.log(`[agent] Dockerfile steps:\n  ${log.join('\n  ')}`)
    const cwd = join(image.root, image.workdir)
    const env = processEnv(image)

    const entrypoint = JSON.parse(/^ENTRYPOINT\s+(\[.*\])\s*$/m.exec(dockerfile)?.[1] ?? '[]') as string[]
    // node, its flags, the agent's script.
    expect(entrypoint[0]).toBe('node')
    const entry = join(image.root, entrypoint.at(-1) as string)
    expect(existsSync(entry)).toBe(true)
    expect(ok(spawnSync(process.execPath, [...entrypoint.slice(1, -1), entry, '--help'], { cwd, env, encoding: 'utf8' }))).toEqual({ status: 0, output: '' })

    // `kubevol` found through the image's PATH, as `kubectl exec ... kubevol explain` finds it.
    const which = spawnSync('sh', ['-c', 'command -v kubevol'], { cwd, env, encoding: 'utf8' })
    expect(which.stdout.trim().startsWith(image.root)).toBe(true)
    const help = spawnSync('sh', ['-c', 'kubevol --help'], { cwd, env, encoding: 'utf8' })
    expect(ok(help)).toEqual({ status: 0, output: '' })
    expect(help.stdout).toMatch(/explain/)

    // API mode's client and the CSI .proto files are in the production install.
    expect(ok(spawnSync(process.execPath, ['--input-type=module', '-e', "await import('@kubevol/agent/kube'); const m = await import('@kubevol/adapter-linux'); m.csiProto()"], { cwd, env, encoding: 'utf8' }))).toEqual({ status: 0, output: '' })

    // No test tooling: vitest is an optional peer of @kubevol/core and a root devDependency.
    for (const name of ['vitest', '@vitest', 'vite']) expect({ name, found: installed(join(cwd, 'node_modules'), name) }).toEqual({ name, found: [] })
    // Nor the docs site's editor (CodeMirror and its Lezer parsers): the docs app's, not the agent's.
    for (const name of ['@codemirror', '@lezer']) expect({ name, found: installed(join(cwd, 'node_modules'), name) }).toEqual({ name, found: [] })
    expect(existsSync(join(cwd, 'node_modules/typescript'))).toBe(false)

    // The agent starts from there (static mode on the in-memory host) and stops on SIGTERM with 0.
    const agent = spawn(process.execPath, [...entrypoint.slice(1, -1), entry], {
      cwd,
      env: { ...env, KUBEVOL_MODE: 'static', KUBEVOL_HOST: 'mock', KUBEVOL_NODE_NAME: 'n1', KUBEVOL_PORT: '0', KUBEVOL_MANIFEST_DIR: join(repo, 'examples/manifests'), KUBEVOL_LOG_FORMAT: 'json' },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let output = ''
    agent.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
    agent.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
    const exited = new Promise<number | null>((resolve) => agent.on('exit', (code) => resolve(code)))
    const deadline = Date.now() + 30_000
    while (!output.includes('kubevol agent started') && agent.exitCode === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
    expect(output).toContain('kubevol agent started')
    agent.kill('SIGTERM')
    expect(await exited).toBe(0)
  })
})
