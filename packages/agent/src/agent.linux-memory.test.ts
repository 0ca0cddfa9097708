/**
 * Memory-backed emptyDirs through the agent on the real kernel (private mount namespace, see
 * test/mount-namespace.cjs): with no limit the tmpfs is the node's memory, not a fixed 8 GiB; a
 * fractional sizeLimit is rounded up to whole bytes as Kubernetes rounds it, where tmpfs refused
 * `size=1.5` with EINVAL.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir, totalmem } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { until } from '../test/helpers.js'
import { type Agent, startAgent } from './agent.js'

function adapterLinuxInstalled(): boolean {
  try {
    createRequire(import.meta.url).resolve('@kubevol/adapter-linux/package.json')
    return true
  } catch {
    return false
  }
}

const isRoot = process.platform === 'linux' && process.getuid?.() === 0
const inPrivateNamespace = process.env.KUBEVOL_TEST_MOUNT_NAMESPACE === 'private'
const installed = adapterLinuxInstalled()
const reason = !installed
  ? '@kubevol/adapter-linux is not installed'
  : !isRoot
    ? `needs root on Linux (uid ${process.getuid?.() ?? 'unknown'})`
    : !inPrivateNamespace
      ? `the test process is not in a private mount namespace (${process.env.KUBEVOL_TEST_MOUNT_NAMESPACE_SKIP ?? 'test/mount-namespace.cjs did not run'})`
      : undefined

/** The tmpfs `size=` the kernel reports for each mount under `root`, in KiB, by target. */
function tmpfsSizesUnder(root: string): Map<string, number> {
  const sizes = new Map<string, number>()
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const fields = line.split(' ')
    const target = fields[4] ?? ''
    const dash = fields.indexOf('-')
    if (!target.startsWith(`${root}/`) || fields[dash + 1] !== 'tmpfs') continue
    const size = /(?:^|,)size=(\d+)k(?:,|$)/.exec(fields[dash + 3] ?? '')
    if (size) sizes.set(target, Number(size[1]))
  }
  return sizes
}

const PAGE = 4096
/** What tmpfs keeps of `bytes`: whole pages, shown in KiB. */
const kib = (bytes: number): number => (Math.ceil(bytes / PAGE) * PAGE) / 1024

const POD = `apiVersion: v1
kind: Pod
metadata: { name: mem, uid: linux-mem }
spec:
  containers:
    - name: c
      volumeMounts: [{ name: unlimited, mountPath: /unlimited }, { name: one-and-a-half, mountPath: /one-and-a-half }, { name: half, mountPath: /half }, { name: milli, mountPath: /milli }, { name: plain-number, mountPath: /plain-number }, { name: tenth-kib, mountPath: /tenth-kib }]
  volumes:
    - { name: unlimited, emptyDir: { medium: Memory } }
    - { name: one-and-a-half, emptyDir: { medium: Memory, sizeLimit: 1.5Gi } }
    - { name: half, emptyDir: { medium: Memory, sizeLimit: 0.5Gi } }
    - { name: milli, emptyDir: { medium: Memory, sizeLimit: 100m } }
    - { name: plain-number, emptyDir: { medium: Memory, sizeLimit: 1.5 } }
    - { name: tenth-kib, emptyDir: { medium: Memory, sizeLimit: 1000.5Ki } }
`

if (reason !== undefined && process.env.CI === 'true' && installed) {
  describe('memory emptyDir sizes on the Linux host', () => {
    it(`cannot run: ${reason}`, () => {
      throw new Error(`${reason}; CI must run this test as root`)
    })
  })
} else if (reason !== undefined) {
  console.warn(`[agent] skipping the memory emptyDir test: ${reason}`)
  describe.skip('memory emptyDir sizes on the Linux host', () => {
    it(`mounts tmpfs for real (skipped: ${reason}; CI runs it as root)`, () => {})
  })
} else {
  describe('memory emptyDir sizes on the Linux host', () => {
    const base = realpathSync(mkdtempSync(join(tmpdir(), 'kubevol-agent-memory-')))
    const rootDir = join(base, 'root')
    const manifestDir = join(base, 'manifests')
    let agent: Agent | undefined
    afterAll(async () => {
      await agent?.stop()
      for (const target of [...tmpfsSizesUnder(base).keys()].reverse()) execFileSync('umount', ['-l', target], { stdio: 'ignore' })
      rmSync(base, { recursive: true, force: true })
    })

    it('sizes an unlimited one at the node memory and rounds fractional limits up to whole bytes', async () => {
      mkdirSync(manifestDir, { recursive: true })
      writeFileSync(join(manifestDir, 'mem.yaml'), POD)
      agent = await startAgent(
        { nodeName: 'n1', host: 'linux', rootDir, manifestDir, port: 0, manifestRescanMs: 200, statsPeriodMs: 0, shutdownGraceMs: 2_000 },
        { log: { silent: true }, manager: { backoff: { initialMs: 20, maxMs: 500 }, housekeepingPeriodMs: 0 } as object },
      )
      const started = agent
      await until('all six mounted', () => started.manager.getMountedVolumesForPod('linux-mem').size === 6, 20_000).catch(async (err: Error) => {
        const events = (await fetch(`${started.url}/v1/events?pod=linux-mem`).then((r) => r.json())) as { message: string }[]
        throw new Error(`${err.message}: ${events.map((e) => e.message).join('; ')}`)
      })
      const dir = (name: string) => join(rootDir, 'pods/linux-mem/volumes/kubernetes.io~empty-dir', name)
      expect(Object.fromEntries(tmpfsSizesUnder(rootDir))).toEqual({
        [dir('unlimited')]: kib(totalmem()),
        [dir('one-and-a-half')]: kib(1.5 * 2 ** 30),
        [dir('half')]: kib(2 ** 29),
        // 100m is 0.1 byte, 1.5 one and a half: each rounds up to a whole byte, which tmpfs keeps as one page.
        [dir('milli')]: kib(1),
        [dir('plain-number')]: kib(2),
        [dir('tenth-kib')]: kib(1000.5 * 1024),
      })
    }, 40_000)
  })
}
