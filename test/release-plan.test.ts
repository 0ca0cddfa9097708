/**
 * What `changeset version` would release: runs it on a copy of the repository (the tracked files, a
 * fresh git repository) and reads the versions it writes. The published packages move together (one
 * fixed group) by the largest bump their changesets ask; private packages (the docs app, the bench,
 * the examples) are never versioned; a peer dependency between workspace packages must not turn a
 * patch or a minor into a major.
 */
import { existsSync } from 'node:fs'
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { copyRepository, repoRoot, run } from './copy-repository.js'

const changesetBin = join(repoRoot, 'node_modules/@changesets/cli/bin.js')

const published = ['@kubevol/core', '@kubevol/adapter-mock', '@kubevol/adapter-linux', '@kubevol/agent', '@kubevol/cli']
const privates = ['@kubevol/docs', '@kubevol/bench', '@kubevol/example-csi-hostpath-driver', '@kubevol/example-oci-runner']

type Bump = 'patch' | 'minor' | 'major'
const order: readonly Bump[] = ['patch', 'minor', 'major']

let work: string
let manifests: Map<string, string>

/** name → package.json path (relative), from the workspaces the root declares. */
async function findManifests(root: string): Promise<Map<string, string>> {
  const found = new Map<string, string>()
  const { stdout } = await run('git', ['ls-files', '*package.json'], { cwd: root })
  for (const path of stdout.split('\n').filter((p) => p.endsWith('package.json') && p !== 'package.json')) {
    const manifest = JSON.parse(await readFile(join(root, path), 'utf8')) as { name?: string }
    if (manifest.name) found.set(manifest.name, path)
  }
  return found
}

/** Versions after `changeset version`, run on a fresh copy with `changesets` replacing .changeset/*.md when given. */
async function versionsAfter(name: string, changesets?: Readonly<Record<string, string>>): Promise<Map<string, string>> {
  const copy = join(work, name)
  await copyRepository(copy)
  if (changesets) {
    for (const file of await readdir(join(copy, '.changeset'))) if (file.endsWith('.md') && file !== 'README.md') await rm(join(copy, '.changeset', file))
    for (const [file, text] of Object.entries(changesets)) await writeFile(join(copy, '.changeset', file), text)
  }
  await run(process.execPath, [changesetBin, 'version'], { cwd: copy })
  const versions = new Map<string, string>()
  for (const [pkg, path] of manifests) versions.set(pkg, (JSON.parse(await readFile(join(copy, path), 'utf8')) as { version: string }).version)
  versions.set('#docs-changelog', existsSync(join(copy, dirname(manifests.get('@kubevol/docs') ?? ''), 'CHANGELOG.md')) ? 'written' : 'none')
  // The release headings of each published package's changelog, newest first.
  for (const pkg of published) {
    const changelog = join(copy, dirname(manifests.get(pkg) ?? ''), 'CHANGELOG.md')
    const text = existsSync(changelog) ? await readFile(changelog, 'utf8') : ''
    versions.set(`#changelog ${pkg}`, [...text.matchAll(/^## (\S+)$/gm)].map((m) => m[1]).join(' '))
  }
  return versions
}

/** The largest bump the repository's own changesets ask for, or undefined with none. */
async function largestBumpAsked(): Promise<Bump | undefined> {
  let largest: Bump | undefined
  for (const file of await readdir(join(repoRoot, '.changeset'))) {
    if (!file.endsWith('.md') || file === 'README.md') continue
    const front = (await readFile(join(repoRoot, '.changeset', file), 'utf8')).split(/^---$/m)[1] ?? ''
    for (const match of front.matchAll(/:\s*(patch|minor|major)\s*$/gm)) {
      const bump = match[1] as Bump
      if (!largest || order.indexOf(bump) > order.indexOf(largest)) largest = bump
    }
  }
  return largest
}

function next(version: string, bump: Bump | undefined): string {
  const [major = 0, minor = 0, patch = 0] = version.split('.').map(Number)
  if (bump === 'major') return `${major + 1}.0.0`
  if (bump === 'minor') return `${major}.${minor + 1}.0`
  if (bump === 'patch') return `${major}.${minor}.${patch + 1}`
  return version
}

const changeset = (pkg: string, bump: Bump) => `---\n'${pkg}': ${bump}\n---\n\nA ${bump} change.\n`

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'kubevol-release-plan-'))
  manifests = await findManifests(repoRoot)
})

afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true })
})

describe('changeset version', () => {
  it('knows every published and private package', () => {
    expect([...manifests.keys()].sort()).toEqual([...published, ...privates].sort())
  })

  it("plans the repository's changesets as one release of the published packages, by the bump they ask", async () => {
    const before = new Map<string, string>()
    for (const [pkg, path] of manifests) before.set(pkg, (JSON.parse(await readFile(join(repoRoot, path), 'utf8')) as { version: string }).version)
    const bump = await largestBumpAsked()
    const after = await versionsAfter('repository')
    for (const pkg of published) expect(after.get(pkg), pkg).toBe(next(before.get('@kubevol/core') ?? '', bump))
    for (const pkg of privates) expect(after.get(pkg), pkg).toBe(before.get(pkg))
    expect(after.get('#docs-changelog')).toBe('none')
    if (bump !== 'major') for (const pkg of published) expect(after.get(pkg), pkg).not.toMatch(/^1\./)
  })

  it.each([
    { case: 'a patch to the core', files: { 'a.md': changeset('@kubevol/core', 'patch') }, expected: '0.1.1' },
    // adapter-linux is a peer of the agent and the CLI: a peer's minor must not make them major.
    { case: 'a minor to a peer (adapter-linux)', files: { 'a.md': changeset('@kubevol/adapter-linux', 'minor') }, expected: '0.2.0' },
    { case: 'a patch to the CLI only', files: { 'a.md': changeset('@kubevol/cli', 'patch') }, expected: '0.1.1' },
  ])('releases every published package at $expected for $case, private ones untouched', async ({ case: name, files, expected }) => {
    const after = await versionsAfter(name.replace(/\W+/g, '-'), files)
    expect(Object.fromEntries(published.map((p) => [p, after.get(p)]))).toEqual(Object.fromEntries(published.map((p) => [p, expected])))
    expect(Object.fromEntries(privates.map((p) => [p, after.get(p)]))).toEqual({
      '@kubevol/docs': '0.1.0',
      '@kubevol/bench': '0.0.0',
      '@kubevol/example-csi-hostpath-driver': '0.0.0',
      '@kubevol/example-oci-runner': '0.0.0',
    })
    expect(after.get('#docs-changelog')).toBe('none')
    // The first release's changelog stays, below the new release.
    for (const pkg of published) expect(after.get(`#changelog ${pkg}`), pkg).toBe(`${expected} 0.1.0`)
  })
})
