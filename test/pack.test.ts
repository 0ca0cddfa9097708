/**
 * What a user gets from npm: packs each published package, lints the tarballs (publint, and attw
 * for the types each resolution mode sees), installs them into an empty folder the way a consumer
 * would (first without @kubernetes/client-node, an optional peer only API mode needs), type-checks a consumer with `skipLibCheck: false` under `node16` and `bundler` resolution,
 * and with the oldest and newest TypeScript and `@types/node` a consumer may have, and runs the
 * README's embedding example from the installed packages.
 *
 * The tarballs' own dependencies (the Kubernetes client, gRPC, koffi, ...) come from the npm cache
 * (`--prefer-offline`), and from the registry only for what the cache lacks.
 */
import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

const run = promisify(execFile)
const repoRoot = fileURLToPath(new URL('..', import.meta.url))
const bin = (name: string) => join(repoRoot, 'node_modules/.bin', name)

interface Packed {
  readonly name: string
  readonly filename: string
  readonly files: readonly string[]
}

const packages = [
  { dir: 'packages/core', name: '@kubevol/core' },
  { dir: 'packages/adapter-mock', name: '@kubevol/adapter-mock' },
  { dir: 'packages/adapter-linux', name: '@kubevol/adapter-linux' },
  { dir: 'packages/agent', name: '@kubevol/agent' },
  { dir: 'packages/cli', name: '@kubevol/cli' },
] as const

/** Names some entry points must export: the ones the READMEs and the examples use. */
const expectedExports: Readonly<Record<string, readonly string[]>> = {
  '@kubevol/core': ['createVolumeManager', 'createMemoryPodSource', 'createMemoryObjectReader', 'systemClock', 'ConfigError', 'WaitError'],
  '@kubevol/core/plugins': ['createBuiltinPlugins', 'createCsiPlugin', 'createCsiDriverRegistry'],
  '@kubevol/core/engine': ['ActualStateOfWorld', 'DesiredStateOfWorld', 'Reconciler', 'OperationExecutor', 'reconstructVolumes', 'VolumeJournal'],
  '@kubevol/core/host': ['joinPath', 'removeUnmounted'],
  '@kubevol/core/testing': ['createMemoryPodSource', 'createMemoryObjectReader', 'createFakePlugin', 'createFakeClock', 'createHarness', 'buildPod', 'fakeVolume'],
  '@kubevol/adapter-mock': ['createMemoryHost'],
  '@kubevol/adapter-linux': ['createLinuxHost'],
  '@kubevol/agent': ['startAgent'],
  '@kubevol/cli': ['runCli', 'renderReference'],
}

/**
 * Entry points left out of the consumer's import and type check: `./testing/host-contract` declares
 * a vitest suite, and vitest is an optional peer dependency a consumer installs only to use it.
 */
const needsOptionalPeer = new Set(['@kubevol/core/testing/host-contract'])

/**
 * Entry points that load @kubernetes/client-node, an optional peer of the agent and the CLI that only
 * API mode needs: the consumer gets it installed after the checks of what a static-mode or embedding
 * user has without it.
 */
const needsKubeClient = new Set(['@kubevol/agent/kube', '@kubevol/agent/testing'])

/** What a consumer without @kubernetes/client-node found (probed before it is installed). */
interface WithoutKubeClient {
  readonly installed: boolean
  readonly once: { readonly code: number; readonly stdout: string }
  readonly api: { readonly code: number; readonly stderr: string }
  readonly typeCheck: string
}
let withoutKubeClient: WithoutKubeClient

/**
 * attw's `esm-only` profile: the packages are ES modules only (`"type": "module"`, a `default`
 * condition, Node 20 and later), so two of its resolution modes are expected to fail and are not
 * checked: `node10` (cannot read `exports`) and `node16` from CommonJS (a `require` gets an ES
 * module; CommonJS consumers use `import()`). Every other problem fails the test.
 */
const ignoredResolutions = new Set(['node10', 'node16-cjs'])

/**
 * The TypeScript and `@types/node` a consumer may have, at the ends of what the packages support (the
 * packages' READMEs say the same): TypeScript 5.4 (the oldest that reads zod's types, which the
 * agent's carry) with the oldest Node's types, and the newest TypeScript with the oldest and newest
 * Node types. @types/node 24 and later type built-in iterators as disposable (`MapIterator` has
 * `[Symbol.dispose]`), which a class implementing `ReadonlyMap` must follow. TypeScript 5.4 cannot
 * read @types/node 26 at all (it needs 5.6), so that pair is not one anybody has. Pinned, so a run is
 * the same tomorrow: raise the newest when a new major of either is out.
 */
const typeMatrix = [
  { typescript: '5.4.5', typesNode: '20.19.43' },
  { typescript: '5.9.3', typesNode: '24.19.4' },
  { typescript: '7.0.2', typesNode: '20.19.43' },
  { typescript: '7.0.2', typesNode: '26.6.11' },
] as const

// The workspace's npm_config_* settings (set when vitest runs under `npm test`) must not leak into
// the empty install folder.
function npmEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {}
  for (const [key, value] of Object.entries(process.env)) if (!key.toLowerCase().startsWith('npm_')) env[key] = value
  return { ...env, npm_config_update_notifier: 'false', npm_config_fund: 'false', npm_config_audit: 'false' }
}

let work: string
let app: string
const packed = new Map<string, Packed>()
/** Every entry point (`name` or `name/subpath`) of the installed packages. */
const entries: string[] = []

beforeAll(async () => {
  // `npm test` builds first; a bare `vitest run test/pack.test.ts` may not have.
  if (!packages.every((p) => existsSync(join(repoRoot, p.dir, 'dist/index.js')))) {
    await run('npm', ['run', 'build'], { cwd: repoRoot })
  }
  work = await mkdtemp(join(tmpdir(), 'kubevol-pack-'))
  const env = npmEnv()
  for (const p of packages) {
    const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', work], { cwd: join(repoRoot, p.dir), env })
    const [info] = JSON.parse(stdout) as { name: string; filename: string; files: { path: string }[] }[]
    if (!info) throw new Error(`npm pack printed nothing for ${p.name}`)
    packed.set(p.name, { name: info.name, filename: join(work, info.filename), files: info.files.map((f) => f.path) })
  }
  app = join(work, 'app')
  await mkdir(app)
  await writeFile(join(app, 'package.json'), JSON.stringify({ name: 'pack-check', private: true, type: 'module' }))
  const tarballs = packages.map((p) => packed.get(p.name)?.filename ?? '')
  // A consumer's own tools: the repository's TypeScript and Node types, at the versions it pins.
  const root = JSON.parse(await readFile(join(repoRoot, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> }
  const agent = JSON.parse(await readFile(join(repoRoot, 'packages/agent/package.json'), 'utf8')) as { devDependencies: Record<string, string> }
  const tools = [`typescript@${root.devDependencies.typescript}`, `@types/node@${agent.devDependencies['@types/node']}`]
  await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', ...tarballs, ...tools], { cwd: app, env, maxBuffer: 16 * 1024 * 1024 })
  for (const p of packages) {
    const manifest = JSON.parse(await readFile(join(app, 'node_modules', p.name, 'package.json'), 'utf8')) as { exports: Record<string, unknown> }
    for (const entry of Object.keys(manifest.exports)) if (entry !== './package.json') entries.push(entry === '.' ? p.name : `${p.name}/${entry.slice(2)}`)
  }
  withoutKubeClient = await probeWithoutKubeClient()
  // API mode's client, as its install docs say to add it.
  const kubeClient = `@kubernetes/client-node@${agent.devDependencies['@kubernetes/client-node']}`
  await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', kubeClient], { cwd: app, env, maxBuffer: 16 * 1024 * 1024 })
}, 300_000)

/** The exit code and output of a command in the consumer's folder (no throw on a non-zero exit). */
async function outcome(file: string, args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return run(file, args, { cwd: app, timeout: 60_000 }).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (err: { code?: number; stdout?: string; stderr?: string }) => ({ code: typeof err.code === 'number' ? err.code : -1, stdout: err.stdout ?? '', stderr: err.stderr ?? '' }),
  )
}

/** Static mode, API mode's refusal and the types of every other entry, with no @kubernetes/client-node installed. */
async function probeWithoutKubeClient(): Promise<WithoutKubeClient> {
  const kubevol = join(app, 'node_modules/.bin/kubevol')
  const once = await outcome(kubevol, ['run', '--once', '--pod-manifest-path', join(repoRoot, 'examples/manifests')])
  const api = await outcome(kubevol, ['run', '--once', '--kubeconfig', join(app, 'kubeconfig'), '--node-name', 'n1'])
  const ids = entries.filter((id) => !needsOptionalPeer.has(id) && !needsKubeClient.has(id))
  const typeCheck = await typeCheckConsumer({ name: 'without-kube-client', tsc: join(app, 'node_modules/.bin/tsc'), module: 'node16', resolution: 'node16', ids })
  return { installed: existsSync(join(app, 'node_modules/@kubernetes/client-node')), once, api, typeCheck }
}

describe('without @kubernetes/client-node (an optional peer only API mode loads)', () => {
  it('is not installed with the CLI and the agent', () => {
    expect(withoutKubeClient.installed).toBe(false)
  })

  it("runs static mode, types every other entry and the README's example", () => {
    expect(withoutKubeClient.once).toMatchObject({ code: 0, stdout: expect.stringMatching(/^converged: 2 pods, 9 volumes mounted/m) })
    expect(withoutKubeClient.typeCheck).toBe('')
  })

  it('refuses API mode saying what to install', () => {
    expect(withoutKubeClient.api.code).toBe(2)
    expect(withoutKubeClient.api.stderr).toMatch(/"api" once @kubernetes\/client-node is installed beside kubevol \(npm install @kubernetes\/client-node@1\.4\.0\)/)
  })
})

afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true })
})

/** Installs `spec` (`name@version`) into a folder of its own under the work folder; returns the folder. */
const toolFolders = new Map<string, Promise<string>>()
function installTool(spec: string): Promise<string> {
  let folder = toolFolders.get(spec)
  if (!folder) {
    folder = (async () => {
      const dir = join(work, `tool-${spec.replace(/[@/]/g, '_')}`)
      await mkdir(dir)
      await writeFile(join(dir, 'package.json'), JSON.stringify({ name: 'tool', private: true }))
      await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', spec], { cwd: dir, env: npmEnv(), maxBuffer: 16 * 1024 * 1024 })
      return dir
    })()
    toolFolders.set(spec, folder)
  }
  return folder
}

/** Writes a consumer importing every entry point (and the README's example), and type-checks it with `tsc`. */
async function typeCheckConsumer(o: { name: string; tsc: string; module: string; resolution: string; typeRoots?: string; ids?: readonly string[] }): Promise<string> {
  const imports = (o.ids ?? entries.filter((id) => !needsOptionalPeer.has(id))).map((id, i) => `import * as entry${i} from '${id}'\nvoid entry${i}`)
  await writeFile(join(app, `entries-${o.name}.ts`), `${imports.join('\n')}\n`)
  await writeFile(join(app, `embedding-${o.name}.ts`), `${await readmeEmbedding()}\nexport {}\n`)
  const tsconfig = {
    compilerOptions: {
      module: o.module,
      moduleResolution: o.resolution,
      target: 'es2022',
      lib: ['es2023'],
      strict: true,
      skipLibCheck: false,
      noEmit: true,
      types: ['node'],
      ...(o.typeRoots ? { typeRoots: [o.typeRoots] } : {}),
    },
    files: [`entries-${o.name}.ts`, `embedding-${o.name}.ts`],
  }
  await writeFile(join(app, `tsconfig.${o.name}.json`), JSON.stringify(tsconfig))
  const result = await run(o.tsc, ['-p', `tsconfig.${o.name}.json`], { cwd: app, maxBuffer: 16 * 1024 * 1024 }).catch((err: { stdout: string; stderr: string }) => err)
  return `${result.stdout}${result.stderr}`.trim()
}

describe.each(packages)('$name tarball', (p) => {
  it('ships dist and the sources its maps point to, but no tests and no build info', () => {
    const files = packed.get(p.name)?.files ?? []
    expect(files).toContain('package.json')
    expect(files).toContain('dist/index.js')
    expect(files).toContain('dist/index.js.map')
    expect(files).toContain('src/index.ts')
    expect(files.filter((f) => f.includes('__snapshots__'))).toEqual([])
    expect(files.filter((f) => f.includes('.test.'))).toEqual([])
    expect(files.filter((f) => f.endsWith('.tsbuildinfo'))).toEqual([])
  })

  it("ships the repository's license and the package's changelog", async () => {
    const files = packed.get(p.name)?.files ?? []
    expect(files).toEqual(expect.arrayContaining(['LICENSE', 'CHANGELOG.md', 'README.md']))
    const installed = join(app, 'node_modules', p.name)
    expect(await readFile(join(installed, 'LICENSE'), 'utf8')).toBe(await readFile(join(repoRoot, 'LICENSE'), 'utf8'))
    expect(await readFile(join(installed, 'CHANGELOG.md'), 'utf8')).toMatch(new RegExp(`^# ${p.name.replace('/', '\\/')}\n\n## \\d+\\.\\d+\\.\\d+`))
  })

  it('has a package.json fit for publishing', async () => {
    const manifest = JSON.parse(await readFile(join(app, 'node_modules', p.name, 'package.json'), 'utf8'))
    expect(manifest).toMatchObject({ name: p.name, type: 'module', sideEffects: false, license: 'Apache-2.0' })
    expect(manifest.repository).toEqual({ type: 'git', url: expect.stringMatching(/^git\+https:\/\/.+\.git$/), directory: p.dir })
    expect(Array.isArray(manifest.files)).toBe(true)
    expect(manifest.exports['.']).toMatchObject({ types: expect.any(String), default: expect.any(String) })
    // Workspace packages between themselves: no exact pin on a peer (it would force a major release).
    for (const range of Object.values<string>(manifest.peerDependencies ?? {})) expect(range).not.toMatch(/^\d+\.\d+\.\d+$/)
  })

  it('exports every entry point with types, and every target is in the tarball', async () => {
    const manifest = JSON.parse(await readFile(join(app, 'node_modules', p.name, 'package.json'), 'utf8'))
    const files = packed.get(p.name)?.files ?? []
    for (const [entry, conditions] of Object.entries(manifest.exports as Record<string, string | Record<string, string>>)) {
      if (entry === './package.json') continue
      expect(conditions, entry).toMatchObject({ types: expect.any(String), default: expect.any(String) })
      if (typeof conditions === 'string') continue
      // `types` must come before `default`: resolvers take the first condition that matches.
      const keys = Object.keys(conditions)
      expect(keys.indexOf('types'), entry).toBeLessThan(keys.indexOf('default'))
      for (const target of [conditions.types, conditions.default]) expect(files, entry).toContain(target?.replace(/^\.\//, ''))
    }
  })

  it('passes publint, suggestions included', async () => {
    const result = await run(bin('publint'), ['run', packed.get(p.name)?.filename ?? '', '--level', 'suggestion', '--strict'], { cwd: work }).catch((err: { stdout: string; stderr: string }) => err)
    expect(`${result.stdout}${result.stderr}`).toContain('All good!')
  })

  it('has types every resolution mode of an ES module consumer finds (attw)', async () => {
    const args = [packed.get(p.name)?.filename ?? '', '--profile', 'esm-only', '--format', 'json']
    const { stdout } = await run(bin('attw'), args, { cwd: work, maxBuffer: 16 * 1024 * 1024 }).catch((err: { stdout: string }) => err)
    const report = JSON.parse(stdout) as { problems?: Record<string, { kind: string; entrypoint?: string; resolutionKind?: string }[]> }
    const problems = Object.values(report.problems ?? {})
      .flat()
      .filter((problem) => !problem.resolutionKind || !ignoredResolutions.has(problem.resolutionKind))
    expect(problems).toEqual([])
  })
})

it('imports every entry point from a plain Node ESM process', async () => {
  const importable = entries.filter((id) => !needsOptionalPeer.has(id))
  const script = `
    const names = {}
    for (const id of ${JSON.stringify(importable)}) names[id] = Object.keys(await import(id))
    console.log(JSON.stringify(names))
  `
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: app })
  const names = JSON.parse(stdout) as Record<string, string[]>
  expect(Object.keys(names).sort()).toEqual([...importable].sort())
  for (const id of importable) expect(names[id]?.length, id).toBeGreaterThan(0)
  for (const [id, expected] of Object.entries(expectedExports)) expect(names[id], id).toEqual(expect.arrayContaining([...expected]))
})

/** The README's "Embedding the core" block, as a reader copies it. */
async function readmeEmbedding(): Promise<string> {
  const readme = await readFile(join(repoRoot, 'README.md'), 'utf8')
  const section = readme.slice(readme.indexOf('## Embedding the core'))
  const block = /^```ts\n([\s\S]*?)^```/m.exec(section)?.[1]
  if (!block) throw new Error('README.md has no TypeScript block under "Embedding the core"')
  return block
}

describe.each([
  { resolution: 'node16', module: 'node16' },
  { resolution: 'bundler', module: 'esnext' },
])('a TypeScript consumer with moduleResolution $resolution and skipLibCheck false', ({ resolution, module }) => {
  it("type-checks every entry point's declarations and the README's embedding example", async () => {
    expect(await typeCheckConsumer({ name: resolution, tsc: join(app, 'node_modules/.bin/tsc'), module, resolution })).toBe('')
  })
})

describe.each(typeMatrix)('a TypeScript $typescript consumer with @types/node $typesNode and skipLibCheck false', ({ typescript, typesNode }) => {
  it("type-checks every entry point's declarations and the README's embedding example", async () => {
    const [compiler, types] = await Promise.all([installTool(`typescript@${typescript}`), installTool(`@types/node@${typesNode}`)])
    const name = `ts${typescript}-node${typesNode}`
    const output = await typeCheckConsumer({ name, tsc: join(compiler, 'node_modules/.bin/tsc'), module: 'node16', resolution: 'node16', typeRoots: join(types, 'node_modules/@types') })
    expect(output).toBe('')
  })
})

it("runs the README's embedding example from the installed packages", async () => {
  // The example holds no type annotations, so the TypeScript compiler only has to strip nothing.
  const { default: ts } = await import(join(app, 'node_modules/typescript/lib/typescript.js'))
  const { outputText } = (ts as typeof import('typescript')).transpileModule(await readmeEmbedding(), {
    compilerOptions: { module: 99 /* ESNext */, target: 9 /* ES2022 */ },
  })
  await writeFile(join(app, 'embedding.mjs'), outputText)
  const { stdout } = await run(process.execPath, ['embedding.mjs'], { cwd: app, timeout: 30_000 })
  expect(stdout.trim()).toBe("[ 'cache' ]")
})

it('runs a volume manager on a fake plugin from the testing entry', async () => {
  const script = `
    import { createVolumeManager } from '@kubevol/core'
    import { createMemoryPodSource, createMemoryObjectReader, createFakePlugin, buildPod, fakeVolume } from '@kubevol/core/testing'
    import { createMemoryHost } from '@kubevol/adapter-mock'
    const podSource = createMemoryPodSource()
    const manager = createVolumeManager({
      host: createMemoryHost(), plugins: [createFakePlugin()], podSource, objects: createMemoryObjectReader(), nodeName: 'node-1',
    })
    const stop = new AbortController()
    const running = manager.run(stop.signal)
    const pod = buildPod({ volumes: [fakeVolume('data')] })
    podSource.setPod(pod)
    await manager.waitForAttachAndMount(pod, { timeoutMs: 5000 })
    const mounted = [...manager.getMountedVolumesForPod(pod).keys()]
    stop.abort()
    await running
    console.log(JSON.stringify(mounted))
  `
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: app })
  expect(JSON.parse(stdout)).toEqual(['data'])
})
