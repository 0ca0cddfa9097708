/**
 * What a user gets from npm: packs each public package, installs the tarballs into an empty folder
 * (offline: the packages have no external dependencies), and imports them from a plain Node ESM
 * process, the way an embedder would.
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

interface Packed {
  readonly name: string
  readonly filename: string
  readonly files: readonly string[]
}

const packages = [
  { dir: 'packages/core', name: '@kubevol/core' },
  { dir: 'packages/adapter-mock', name: '@kubevol/adapter-mock' },
] as const

/** Names each entry point must export: the ones the README and the examples use. */
const expectedExports: Readonly<Record<string, readonly string[]>> = {
  '@kubevol/core': ['createVolumeManager', 'systemClock', 'createPluginManager', 'DesiredStateOfWorld', 'ActualStateOfWorld', 'ConfigError', 'WaitError'],
  '@kubevol/core/testing': ['createMemoryPodSource', 'createMemoryObjectReader', 'createFakePlugin', 'createFakeClock', 'createHarness', 'buildPod', 'fakeVolume'],
  '@kubevol/adapter-mock': ['createMemoryHost'],
}

// One npm process at a time is plenty; the cache must not be the user's real one, and the
// workspace's npm_config_* settings must not leak into the empty install folder.
function npmEnv(cache: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {}
  for (const [key, value] of Object.entries(process.env)) if (!key.toLowerCase().startsWith('npm_')) env[key] = value
  return { ...env, npm_config_cache: cache, npm_config_update_notifier: 'false' }
}

let work: string
let app: string
const packed = new Map<string, Packed>()

beforeAll(async () => {
  // `npm test` builds first; a bare `vitest run --project pack` may not have.
  if (!packages.every((p) => existsSync(join(repoRoot, p.dir, 'dist/index.js')))) {
    await run('npm', ['run', 'build'], { cwd: repoRoot })
  }
  work = await mkdtemp(join(tmpdir(), 'kubevol-pack-'))
  const env = npmEnv(join(work, 'npm-cache'))
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
  await run('npm', ['install', '--offline', '--no-audit', '--no-fund', ...tarballs], { cwd: app, env })
})

afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true })
})

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

  it('has a package.json fit for publishing', async () => {
    const manifest = JSON.parse(await readFile(join(app, 'node_modules', p.name, 'package.json'), 'utf8'))
    expect(manifest).toMatchObject({ name: p.name, type: 'module', sideEffects: false, license: 'Apache-2.0' })
    expect(Array.isArray(manifest.files)).toBe(true)
    expect(manifest.exports['.']).toMatchObject({ types: expect.any(String), default: expect.any(String) })
  })

  it('exports every entry point with types, and every target is in the tarball', async () => {
    const manifest = JSON.parse(await readFile(join(app, 'node_modules', p.name, 'package.json'), 'utf8'))
    const files = packed.get(p.name)?.files ?? []
    const entries = Object.entries(manifest.exports as Record<string, string | Record<string, string>>)
    for (const [entry, conditions] of entries) {
      if (entry === './package.json') continue
      expect(conditions, entry).toMatchObject({ types: expect.any(String), default: expect.any(String) })
      if (typeof conditions === 'string') continue
      // `types` must come before `default`: resolvers take the first condition that matches.
      const keys = Object.keys(conditions)
      expect(keys.indexOf('types'), entry).toBeLessThan(keys.indexOf('default'))
      for (const target of [conditions.types, conditions.default]) expect(files, entry).toContain(target?.replace(/^\.\//, ''))
    }
  })
})

it('imports from a plain Node ESM process', async () => {
  const script = `
    const names = {}
    for (const id of ${JSON.stringify(Object.keys(expectedExports))}) names[id] = Object.keys(await import(id))
    console.log(JSON.stringify(names))
  `
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: app })
  const names = JSON.parse(stdout) as Record<string, string[]>
  for (const [id, expected] of Object.entries(expectedExports)) {
    expect(names[id], id).toEqual(expect.arrayContaining([...expected]))
  }
})

it('runs a volume manager from the installed packages', async () => {
  // The smallest embedding: one pod, one volume, mounted on the memory host.
  const script = `
    import { createVolumeManager } from '@kubevol/core'
    import { createMemoryPodSource, createMemoryObjectReader, createFakePlugin, buildPod, fakeVolume } from '@kubevol/core/testing'
    import { createMemoryHost } from '@kubevol/adapter-mock'
    const host = createMemoryHost()
    const podSource = createMemoryPodSource()
    const manager = createVolumeManager({
      host, plugins: [createFakePlugin()], podSource, objects: createMemoryObjectReader(), nodeName: 'node-1',
    })
    const stop = new AbortController()
    const running = manager.run(stop.signal)
    const pod = buildPod({ volumes: [fakeVolume('data')] })
    podSource.setPod(pod)
    await manager.waitForAttachAndMount(pod, { timeoutMs: 5000 })
    const mounted = [...manager.getMountedVolumesForPod(pod.metadata.uid).keys()]
    stop.abort()
    await running
    console.log(JSON.stringify(mounted))
  `
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: app })
  expect(JSON.parse(stdout)).toEqual(['data'])
})
