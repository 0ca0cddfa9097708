/**
 * The image runs the agent as one bundle (`dist/bundle/main.js`, made by scripts/bundle.mjs after
 * `tsc -b`). It must be the same agent: it sets up a pod's volumes and stops on SIGTERM, on the
 * memory host and (as root) on the Linux host, whose code, I/O worker and koffi come from the
 * bundle. A resolve hook lists every module the process loads: the bundle's own chunks and node's
 * modules only, so neither a second copy of @kubevol/core (one beside the bundle's would not share
 * its classes and state) nor the Kubernetes client is loaded. And every file the bundled code finds
 * next to itself (adapter-linux's proto directory, koffi's path) is where it looks.
 */
import { execFileSync, spawn } from 'node:child_process'
import { existsSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { get, tempDir, until } from '../test/helpers.js'

const bundleDir = fileURLToPath(new URL('../dist/bundle/', import.meta.url))
const main = join(bundleDir, 'main.js')
const built = existsSync(main)
if (!built) {
  if (process.env.CI === 'true') throw new Error('bundle test: dist/bundle is not built (npm run build)')
  console.warn('[agent] skipping the bundle test: dist/bundle/main.js is not built (npm run build)')
}
const isRoot = process.platform === 'linux' && process.getuid?.() === 0

const work = tempDir('kubevol-bundle-')
afterAll(() => work.cleanup())
// biome-ignore lint/suspicious/noTemplateCurlyInString: source text of another module
work.write('hooks.mjs', "import { appendFileSync } from 'node:fs'\nlet out\nexport function initialize(data) { out = data.out }\nexport async function resolve(specifier, context, next) {\n  const result = await next(specifier, context)\n  appendFileSync(out, `${result.url}\\n`)\n  return result\n}\n")
work.write('register.mjs', "import { register } from 'node:module'\nregister(new URL('./hooks.mjs', import.meta.url), { data: { out: process.env.KUBEVOL_LOADED_OUT } })\n")

const MANIFEST = `apiVersion: v1
kind: ConfigMap
metadata: { name: settings, namespace: default }
data: { app.conf: "setting=1" }
---
apiVersion: v1
kind: Pod
metadata: { name: web, namespace: default, uid: uid-web }
spec:
  nodeName: node-1
  containers: [{ name: c, image: busybox, volumeMounts: [{ name: shm, mountPath: /dev/shm }, { name: config, mountPath: /etc/app }] }]
  volumes:
    - { name: shm, emptyDir: { medium: Memory, sizeLimit: 1Mi } }
    - { name: config, configMap: { name: settings } }
`

/** Mount points under `dir`, from this process's mount table (the test's private namespace, which the agent shares). */
function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter((target) => target.startsWith(`${dir}/`))
}

interface State {
  readonly sourcesReady: boolean
  readonly pendingOperations: readonly unknown[]
  readonly actual: { readonly mounted: readonly unknown[] }
  readonly manifests?: { readonly errors: readonly unknown[] }
}

describe.runIf(built)('the bundled agent (the image runs it)', () => {
  it.each([
    { host: 'mock', run: true },
    { host: 'linux', run: isRoot },
  ])('sets up and tears down a pod on the $host host, loads nothing but the bundle, and exits 0 on SIGTERM', async ({ host, run }) => {
    if (!run) return
    const d = tempDir()
    try {
      d.write('pod.yaml', MANIFEST)
      // A pod without containers: refused with zod's English message (zod/mini has none of its own).
      d.write('broken.yaml', 'apiVersion: v1\nkind: Pod\nmetadata: { name: broken }\nspec: {}\n')
      const root = join(d.dir, 'root')
      const loaded = join(d.dir, 'loaded.txt')
      writeFileSync(loaded, '')
      const args = ['--import', join(work.dir, 'register.mjs'), main, '--mode=static', `--host=${host}`, '--node-name=node-1', '--port=0', `--root-dir=${root}`, `--pod-manifest-path=${d.dir}`, '--logging-format=json']
      const child = spawn(process.execPath, args, { env: { ...process.env, KUBEVOL_LOADED_OUT: loaded }, stdio: ['ignore', 'pipe', 'pipe'] })
      let output = ''
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
      child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
      const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
      try {
        await until('started', () => /"url":"(http:[^"]+)"/.test(output) || child.exitCode !== null, 20_000)
        const url = /"url":"(http:[^"]+)"/.exec(output)?.[1]
        expect(url, output).toBeDefined()
        let state: State | undefined
        await until(
          'both volumes set up',
          async () => {
            state = (await get(`${url}/v1/state`)).json() as State
            return state.sourcesReady && state.actual.mounted.length === 2 && state.pendingOperations.length === 0
          },
          20_000,
        )
        expect(state?.manifests?.errors).toEqual([{ file: join(d.dir, 'broken.yaml'), line: 4, reason: 'Pod broken: spec.containers: Invalid input: expected array, received undefined' }])
        if (host === 'linux') {
          // A real tmpfs, mounted by the bundle's Linux host through its I/O worker, and the configMap's file.
          expect(mountsUnder(root)).toEqual([`${root}/pods/uid-web/volumes/kubernetes.io~empty-dir/shm`])
          expect(readFileSync(`${root}/pods/uid-web/volumes/kubernetes.io~configmap/config/app.conf`, 'utf8')).toBe('setting=1')
        }
        // The pod's manifest goes: its volumes are torn down.
        rmSync(join(d.dir, 'pod.yaml'))
        await until(
          'both volumes torn down',
          async () => {
            state = (await get(`${url}/v1/state`)).json() as State
            return state.actual.mounted.length === 0 && state.pendingOperations.length === 0
          },
          20_000,
        )
        expect(mountsUnder(root)).toEqual([])
      } finally {
        child.kill('SIGTERM')
      }
      expect(await exited, output).toBe(0)
      const modules = readFileSync(loaded, 'utf8').split('\n').filter(Boolean)
      expect(modules).toContain(`file://${main}`)
      expect(modules.filter((url) => !url.startsWith('node:') && !url.startsWith(`file://${bundleDir}`))).toEqual([])
    } finally {
      // After a failure only: the agent leaves its mounts in place on SIGTERM (by design).
      for (const target of mountsUnder(d.dir).reverse()) execFileSync('umount', ['-l', target], { stdio: 'ignore' })
      d.cleanup()
    }
  })

  it('every file the bundled code finds next to itself is there', () => {
    const urls = new Set<string>()
    for (const file of readdirSync(bundleDir).filter((f) => f.endsWith('.js'))) {
      for (const m of readFileSync(join(bundleDir, file), 'utf8').matchAll(/new URL\("([^"]+)", ?import\.meta\.url\)/g)) urls.add(m[1] as string)
    }
    // adapter-linux's files that find koffi, gRPC and the CSI protos from where they are.
    expect([...urls].some((u) => u.includes('adapter-linux/dist/'))).toBe(true)
    for (const u of urls) expect(existsSync(fileURLToPath(new URL(u, `file://${bundleDir}`))), u).toBe(true)
  })
})
