/**
 * SIGTERM while a host call is blocked in the kernel, through every entry point as a real process on
 * the Linux host, in the test's private mount namespace: the agent's main (`dist/main.js`), the
 * image's entry (deploy/Dockerfile's ENTRYPOINT, the bundle, with its node flags) and `kubevol run`.
 * One pod's hostPath is on a FUSE filesystem whose daemon is stopped (bindfs, SIGSTOP), another pod
 * has a Memory emptyDir. Each must exit 0 within its grace period (`--shutdown-grace-period` plus
 * the margin), say why it did not wait, and leave the other pod's mount in place. node's own exit
 * would join the blocked thread forever.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { SHUTDOWN_MARGIN_MS } from '@kubevol/agent'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

const repo = fileURLToPath(new URL('..', import.meta.url))
const GRACE_MS = 2_000

/** The image's ENTRYPOINT, its paths moved from /opt/kubevol to this checkout and `node` to this one. */
function imageEntry(): string[] {
  const dockerfile = readFileSync(join(repo, 'deploy/Dockerfile'), 'utf8')
  const line = dockerfile.split('\n').find((l) => l.startsWith('ENTRYPOINT '))
  if (!line) throw new Error('deploy/Dockerfile has no ENTRYPOINT')
  const [node, ...rest] = JSON.parse(line.slice('ENTRYPOINT '.length)) as string[]
  if (node !== 'node') throw new Error(`the image's entry runs ${node}, not node`)
  return rest.map((arg) => arg.replace(/^\/opt\/kubevol\//, repo))
}

/** Each entry point: the node arguments before the agent's flags, and how they are written. */
const ENTRY_POINTS: { name: string; argv: () => string[]; program: string; flags: (f: Record<string, string>) => string[] }[] = [
  { name: "the agent's main", argv: () => [join(repo, 'packages/agent/dist/main.js')], program: 'packages/agent/dist/main.js', flags: (f) => Object.entries(f).map(([k, v]) => `--${k}=${v}`) },
  { name: "the image's entry (bundle)", argv: imageEntry, program: 'packages/agent/dist/bundle/main.js', flags: (f) => Object.entries(f).map(([k, v]) => `--${k}=${v}`) },
  { name: 'kubevol run', argv: () => [join(repo, 'packages/cli/bin/kubevol.js'), 'run'], program: 'packages/cli/dist/main.js', flags: (f) => Object.entries(f).flatMap(([k, v]) => [`--${k}`, v]) },
]

const bindfs = ['/usr/bin/bindfs', '/bin/bindfs'].some((p) => existsSync(p))
const isRoot = process.platform === 'linux' && process.getuid?.() === 0
const unbuilt = ['packages/adapter-linux/dist/index.js', ...ENTRY_POINTS.map((e) => e.program)].filter((p) => !existsSync(join(repo, p)))
const reason = !isRoot
  ? `needs root on Linux (uid ${process.getuid?.() ?? 'unknown'})`
  : process.env.KUBEVOL_TEST_MOUNT_NAMESPACE !== 'private'
    ? `the test process is not in a private mount namespace (${process.env.KUBEVOL_TEST_MOUNT_NAMESPACE_SKIP ?? 'packages/agent/test/mount-namespace.cjs did not run'})`
    : !bindfs
      ? 'bindfs is not installed (apt-get install bindfs)'
      : unbuilt.length > 0
        ? `not built (npm run build): ${unbuilt.join(', ')}`
        : undefined

const mountTargets = () =>
  readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => (line.split(' ')[4] ?? '').replace(/\\040/g, ' '))

/** Polls `check` every 25 ms until it holds, failing after `timeoutMs` with `what`. */
async function until(what: string | (() => string), check: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${typeof what === 'string' ? what : what()}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

const pods = (hostPath: string) => `apiVersion: v1
kind: Pod
metadata: { name: on-fuse, uid: on-fuse }
spec:
  containers: [{ name: c, volumeMounts: [{ name: data, mountPath: /data }] }]
  volumes: [{ name: data, hostPath: { path: ${hostPath}, type: Directory } }]
---
apiVersion: v1
kind: Pod
metadata: { name: plain, uid: plain }
spec:
  containers: [{ name: c, volumeMounts: [{ name: shm, mountPath: /shm }] }]
  volumes: [{ name: shm, emptyDir: { medium: Memory, sizeLimit: 8Mi } }]
`

if (reason !== undefined && process.env.CI === 'true') {
  describe('SIGTERM with a host call stuck in the kernel', () => {
    it(`cannot run: ${reason}`, () => {
      throw new Error(`${reason}; CI must run this test as root`)
    })
  })
} else if (reason !== undefined) {
  console.warn(`[integration] skipping the stuck-shutdown tests: ${reason}`)
  describe.skip('SIGTERM with a host call stuck in the kernel', () => {
    it(`exits in time (skipped: ${reason})`, () => {})
  })
} else {
  describe('SIGTERM with a host call stuck in the kernel', () => {
    const base = realpathSync(mkdtempSync(join(tmpdir(), 'kubevol-sigterm-stuck-')))
    const children: ChildProcess[] = []
    let daemon: number | undefined
    // One FUSE filesystem for every entry point, its daemon stopped for good once mounted.
    beforeAll(async () => {
      for (const dir of [join(base, 'src/data'), join(base, 'mnt')]) mkdirSync(dir, { recursive: true })
      writeFileSync(join(base, 'src/data/kept'), 'data on the FUSE filesystem')
      const fuse = spawn('bindfs', ['-f', '-o', 'attr_timeout=0,entry_timeout=0,negative_timeout=0', join(base, 'src'), join(base, 'mnt')], { stdio: 'ignore' })
      children.push(fuse)
      daemon = fuse.pid
      await until('bindfs mounted', () => mountTargets().includes(join(base, 'mnt')), 10_000)
      process.kill(fuse.pid as number, 'SIGSTOP')
    })
    afterAll(() => {
      for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
      const ours = mountTargets().filter((t) => t.startsWith(`${base}/`))
      for (const target of ours.reverse()) execFileSync('umount', ['-l', target], { stdio: 'ignore' })
      if (daemon !== undefined) {
        for (const signal of ['SIGCONT', 'SIGKILL'] as const) {
          try {
            process.kill(daemon, signal)
          } catch {}
        }
      }
      rmSync(base, { recursive: true, force: true })
    })

    it.each(ENTRY_POINTS)('$name exits within the grace period, saying why, with the other volume still mounted', { timeout: 60_000 }, async (entry) => {
      const dir = join(base, entry.name.replace(/\W+/g, '-'))
      const rootDir = join(dir, 'root')
      const manifests = join(dir, 'manifests')
      for (const d of [rootDir, manifests]) mkdirSync(d, { recursive: true })
      writeFileSync(join(manifests, 'pods.yaml'), pods(join(base, 'mnt/data')))
      const flags = entry.flags({
        'node-name': 'n1',
        port: '0',
        host: 'linux',
        'root-dir': rootDir,
        'pod-manifest-path': manifests,
        'shutdown-grace-period': `${GRACE_MS}ms`,
        'logging-format': 'json',
      })
      const child = spawn(process.execPath, [...entry.argv(), ...flags], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, UV_THREADPOOL_SIZE: '8' } })
      children.push(child)
      let output = ''
      child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()))
      child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()))
      const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
      const shm = join(rootDir, 'pods/plain/volumes/kubernetes.io~empty-dir/shm')
      await until(() => `the plain pod mounted; the output:\n${output}`, () => mountTargets().includes(shm), 20_000)
      // Give the call on the stopped filesystem time to be made and to block.
      await new Promise((resolve) => setTimeout(resolve, 500))

      const signalled = Date.now()
      child.kill('SIGTERM')
      const code = await Promise.race([exited, new Promise<'still running'>((resolve) => setTimeout(() => resolve('still running'), GRACE_MS + SHUTDOWN_MARGIN_MS + 5_000))])
      const ms = Date.now() - signalled
      console.log(`[integration] ${entry.name}: exit ${code} ${ms} ms after SIGTERM`)
      expect(code, output).toBe(0)
      expect(ms).toBeLessThan(GRACE_MS + SHUTDOWN_MARGIN_MS)
      expect(output).toContain('"msg":"Stopped"')
      const exiting = output.split('\n').find((line) => line.includes('"msg":"Exiting without waiting; mounts stay in place"'))
      expect(exiting, output).toMatch(/"reason":"\d+ host call\(s\) have not returned \(blocked in the kernel\), and a normal exit would wait for them forever"/)
      // The other pod's volume stays mounted, and nothing was done to the FUSE filesystem's data.
      expect(mountTargets()).toContain(shm)
      expect(mountTargets()).toContain(join(base, 'mnt'))
      expect(readFileSync(join(base, 'src/data/kept'), 'utf8')).toBe('data on the FUSE filesystem')
    })
  })
}
