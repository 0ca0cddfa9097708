/**
 * SIGTERM while a host call is blocked in the kernel. The real agent process (dist/main.js) on the
 * Linux host, in the test's private mount namespace: one pod's hostPath is on a FUSE filesystem
 * whose daemon is stopped (bindfs, SIGSTOP), another pod has a Memory emptyDir. The agent must exit
 * within its grace period (`--shutdown-grace-period` plus the margin), say why it did not wait, and
 * leave the other pod's mount in place. node's own exit would join the blocked thread forever.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { until } from '../test/helpers.js'
import { SHUTDOWN_MARGIN_MS } from './process.js'

const main = fileURLToPath(new URL('../dist/main.js', import.meta.url))
const GRACE_MS = 2_000

function installed(name: string): boolean {
  try {
    createRequire(import.meta.url).resolve(`${name}/package.json`)
    return true
  } catch {
    return false
  }
}
const bindfs = ['/usr/bin/bindfs', '/bin/bindfs'].some((p) => existsSync(p))
const isRoot = process.platform === 'linux' && process.getuid?.() === 0
const reason = !installed('@kubevol/adapter-linux')
  ? '@kubevol/adapter-linux is not installed'
  : !isRoot
    ? `needs root on Linux (uid ${process.getuid?.() ?? 'unknown'})`
    : process.env.KUBEVOL_TEST_MOUNT_NAMESPACE !== 'private'
      ? `the test process is not in a private mount namespace (${process.env.KUBEVOL_TEST_MOUNT_NAMESPACE_SKIP ?? 'test/mount-namespace.cjs did not run'})`
      : !bindfs
        ? 'bindfs is not installed (apt-get install bindfs)'
        : !existsSync(main)
          ? `${main} is not built (npx tsc -b packages/agent packages/adapter-linux)`
          : undefined

const mountTargets = () =>
  readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => (line.split(' ')[4] ?? '').replace(/\\040/g, ' '))

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
  console.warn(`[agent] skipping the stuck-shutdown test: ${reason}`)
  describe.skip('SIGTERM with a host call stuck in the kernel', () => {
    it(`exits in time (skipped: ${reason})`, () => {})
  })
} else {
  describe('SIGTERM with a host call stuck in the kernel', () => {
    const base = realpathSync(mkdtempSync(join(tmpdir(), 'kubevol-agent-stuck-')))
    const children: ChildProcess[] = []
    let daemon: number | undefined
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

    it('exits within the grace period, saying why, with the other volume still mounted', { timeout: 60_000 }, async () => {
      const rootDir = join(base, 'root')
      const manifests = join(base, 'manifests')
      for (const dir of [rootDir, manifests, join(base, 'src/data'), join(base, 'mnt')]) mkdirSync(dir, { recursive: true })
      writeFileSync(join(base, 'src/data/kept'), 'data on the FUSE filesystem')
      const fuse = spawn('bindfs', ['-f', '-o', 'attr_timeout=0,entry_timeout=0,negative_timeout=0', join(base, 'src'), join(base, 'mnt')], { stdio: 'ignore' })
      children.push(fuse)
      daemon = fuse.pid
      await until('bindfs mounted', () => mountTargets().includes(join(base, 'mnt')), 10_000)
      process.kill(fuse.pid as number, 'SIGSTOP')
      writeFileSync(join(manifests, 'pods.yaml'), pods(join(base, 'mnt/data')))

      const agent = spawn(
        process.execPath,
        [main, '--node-name=n1', '--port=0', '--host=linux', `--root-dir=${rootDir}`, `--pod-manifest-path=${manifests}`, `--shutdown-grace-period=${GRACE_MS}ms`, '--logging-format=json'],
        { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, UV_THREADPOOL_SIZE: '8' } },
      )
      children.push(agent)
      let output = ''
      agent.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()))
      agent.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()))
      const exited = new Promise<number | null>((resolve) => agent.on('exit', (code) => resolve(code)))
      const shm = join(rootDir, 'pods/plain/volumes/kubernetes.io~empty-dir/shm')
      await until('the plain pod mounted', () => mountTargets().includes(shm), 20_000)
      // Give the call on the stopped filesystem time to be made and to block.
      await new Promise((resolve) => setTimeout(resolve, 500))

      const signalled = Date.now()
      agent.kill('SIGTERM')
      const code = await Promise.race([exited, new Promise<'still running'>((resolve) => setTimeout(() => resolve('still running'), GRACE_MS + SHUTDOWN_MARGIN_MS + 5_000))])
      expect(code, output).toBe(0)
      expect(Date.now() - signalled).toBeLessThan(GRACE_MS + SHUTDOWN_MARGIN_MS)
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
