/**
 * Crafted pod UIDs and container names on the real kernel (root, private mount namespace): through
 * the manifest directory of a static agent, and handed straight to the volume manager (the way an
 * API source would, past any manifest check) so the populator's own check is what stops them.
 * Nothing is written or mounted outside the root (every path outside it is compared by content),
 * a pod whose UID aliases a running pod's directory leaves that pod's data alone, and a good pod
 * beside them is mounted.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync, unlinkSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type Pod, createVolumeManager, silentLogger } from '@kubevol/core'
import { createBuiltinPlugins } from '@kubevol/core/plugins'
import { createMemoryObjectReader, createMemoryPodSource } from '@kubevol/core/testing'
import { afterAll, describe, expect, it } from 'vitest'
import { until } from '../test/helpers.js'
import { type Agent, startAgent } from './agent.js'

const installed = (() => {
  try {
    createRequire(import.meta.url).resolve('@kubevol/adapter-linux/package.json')
    return true
  } catch {
    return false
  }
})()
const reason = !installed
  ? '@kubevol/adapter-linux is not installed'
  : !(process.platform === 'linux' && process.getuid?.() === 0)
    ? `needs root on Linux (uid ${process.getuid?.() ?? 'unknown'})`
    : process.env.KUBEVOL_TEST_MOUNT_NAMESPACE !== 'private'
      ? 'the test process is not in a private mount namespace (test/mount-namespace.cjs did not run)'
      : undefined

/** Mount points under `dir`, from the kernel. */
function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter((target) => target.startsWith(`${dir}/`))
}

/** Every path below `dir` but those below `skip`, with the content of each file. */
function snapshot(dir: string, skip: readonly string[]): string[] {
  const out: string[] = []
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const path = join(d, e.name)
      if (skip.includes(path)) continue
      if (e.isDirectory()) {
        out.push(`${path}/`)
        walk(path)
      } else out.push(`${path}: ${e.isFile() ? readFileSync(path, 'utf8') : 'other'}`)
    }
  }
  walk(dir)
  return out
}

// The root is deep below the test directory, so that every traversal below lands inside it, where
// it is seen: pods/../../../x is <base>/n1/n2/x, where a canary waits.
const CRAFTED_UIDS = ['../../../x', 'victim/../victim', 'a/b', '..', '.']
const CRAFTED_CONTAINERS = ['../../../../tmp/x/target', '../../../../../../x/target']

const manifest = (name: string, uid: string | undefined, container = 'c', subPath = '') => `apiVersion: v1
kind: Pod
metadata: { name: ${name}${uid === undefined ? '' : `, uid: ${JSON.stringify(uid)}`} }
spec:
  containers: [{ name: ${JSON.stringify(container)}, volumeMounts: [{ name: shm, mountPath: /shm${subPath ? `, subPath: ${subPath}` : ''} }] }]
  volumes: [{ name: shm, emptyDir: { medium: Memory, sizeLimit: 4Mi } }]
`

const pod = (name: string, uid: string, container = 'c', subPath?: string): Pod => ({
  metadata: { name, namespace: 'default', uid },
  spec: {
    nodeName: 'n1',
    volumes: [{ name: 'shm', emptyDir: { medium: 'Memory', sizeLimit: '4Mi' } }],
    containers: [{ name: container, volumeMounts: [{ name: 'shm', mountPath: '/shm', ...(subPath ? { subPath } : {}) }] }],
  },
})

if (reason !== undefined && process.env.CI === 'true' && installed) {
  describe('crafted pods on the Linux host', () => {
    it(`cannot run: ${reason}`, () => {
      throw new Error(`${reason}; CI must run this test as root`)
    })
  })
} else if (reason !== undefined) {
  console.warn(`[agent] skipping the crafted-pods Linux test: ${reason}`)
  describe.skip('crafted pods on the Linux host', () => {
    it(`(skipped: ${reason}; CI runs it as root)`, () => {})
  })
} else {
  describe('crafted pods on the Linux host', () => {
    const bases: string[] = []
    const agents: Agent[] = []
    afterAll(async () => {
      for (const agent of agents) await agent.stop()
      for (const base of bases) {
        for (let round = 0; round < 5 && mountsUnder(base).length > 0; round++) {
          for (const target of mountsUnder(base).reverse()) execFileSync('umount', ['-l', target], { stdio: 'ignore' })
        }
        rmSync(base, { recursive: true, force: true })
      }
    })

    const layout = () => {
      const base = realpathSync(mkdtempSync(join(tmpdir(), 'kubevol-crafted-')))
      bases.push(base)
      const rootDir = join(base, 'n1/n2/n3/root')
      const manifestDir = join(base, 'manifests')
      mkdirSync(join(rootDir, 'pods'), { recursive: true })
      mkdirSync(manifestDir)
      mkdirSync(join(base, 'n1/n2/x'), { recursive: true })
      writeFileSync(join(base, 'n1/n2/x/canary'), 'canary')
      writeFileSync(join(base, 'n1/n2/n3/canary'), 'canary')
      return { base, rootDir, manifestDir, outside: () => snapshot(base, [rootDir, manifestDir]) }
    }

    /** Only the good and victim pods' directories and mounts exist under the root. */
    const expectContained = (base: string, rootDir: string, before: string[], outside: () => string[]) => {
      expect(outside()).toEqual(before)
      expect(readdirSync(join(rootDir, 'pods')).sort()).toEqual(['good', 'victim'])
      expect(mountsUnder(base).sort()).toEqual([join(rootDir, 'pods/good/volumes/kubernetes.io~empty-dir/shm'), join(rootDir, 'pods/victim/volumes/kubernetes.io~empty-dir/shm')])
      expect(readFileSync(join(base, 'n1/n2/x/canary'), 'utf8')).toBe('canary')
    }

    it('from a manifest directory: each crafted pod is refused alone, the victim keeps its data', async () => {
      const { base, rootDir, manifestDir, outside } = layout()
      const before = outside()
      writeFileSync(join(manifestDir, 'good.yaml'), manifest('good', 'good'))
      writeFileSync(join(manifestDir, 'victim.yaml'), manifest('victim', 'victim'))
      for (const [i, uid] of CRAFTED_UIDS.entries()) writeFileSync(join(manifestDir, `uid-${i}.yaml`), manifest(`uid-${i}`, uid))
      for (const [i, name] of CRAFTED_CONTAINERS.entries()) writeFileSync(join(manifestDir, `container-${i}.yaml`), manifest(`container-${i}`, undefined, name, 'sub'))
      const agent = await startAgent(
        { nodeName: 'n1', host: 'linux', rootDir, manifestDir, port: 0, manifestRescanMs: 100, statsPeriodMs: 0, shutdownGraceMs: 2_000 },
        { log: { silent: true }, manager: { backoff: { initialMs: 20, maxMs: 500 }, housekeepingPeriodMs: 0 } as object },
      )
      agents.push(agent)
      await until('good and victim mounted', () => agent.manager.getMountedVolumesForPod('good').size === 1 && agent.manager.getMountedVolumesForPod('victim').size === 1, 20_000)
      const data = join(rootDir, 'pods/victim/volumes/kubernetes.io~empty-dir/shm/data')
      writeFileSync(data, 'precious')

      const errors = (agent.state() as { manifests: { errors: { file: string; reason: string }[] } }).manifests.errors
      expect(errors.map((e) => e.reason).sort()).toEqual([
        expect.stringMatching(/^Pod container-0: spec\.containers\[0\]\.name: Invalid value: "\.\.\/\.\.\/\.\.\/\.\.\/tmp\/x\/target": a lowercase RFC 1123 label/),
        expect.stringMatching(/^Pod container-1: spec\.containers\[0\]\.name: Invalid value: /),
        ...CRAFTED_UIDS.map((_, i) => expect.stringMatching(new RegExp(`^Pod uid-${i}: metadata\\.uid: Invalid value: .*: a pod UID must not`))),
      ])
      expect(agent.pods.getPods().map((p) => p.metadata.name).sort()).toEqual(['good', 'victim'])

      // The aliasing pod goes: nothing of the victim's goes with it.
      unlinkSync(join(manifestDir, 'uid-1.yaml'))
      await until('the alias error gone', () => (agent.state() as { manifests: { errors: unknown[] } }).manifests.errors.length === errors.length - 1, 10_000)
      expect(agent.manager.getMountedVolumesForPod('victim').size).toBe(1)
      expect(readFileSync(data, 'utf8')).toBe('precious')
      expectContained(base, rootDir, before, outside)
    }, 60_000)

    it('handed to the volume manager directly (as an API source would): the populator refuses them', async () => {
      const { base, rootDir, outside } = layout()
      const before = outside()
      const { createLinuxHost } = await import('@kubevol/adapter-linux')
      const host = createLinuxHost({ callTimeoutMs: 20_000 })
      const pods = createMemoryPodSource()
      const manager = createVolumeManager({ host, plugins: createBuiltinPlugins(), podSource: pods, objects: createMemoryObjectReader(), nodeName: 'n1', rootDir, logger: silentLogger })
      const stop = new AbortController()
      const running = manager.run(stop.signal)
      try {
        pods.setPod(pod('good', 'good'))
        pods.setPod(pod('victim', 'victim'))
        await manager.waitForAttachAndMount(pod('victim', 'victim'), { timeoutMs: 20_000 })
        const data = join(rootDir, 'pods/victim/volumes/kubernetes.io~empty-dir/shm/data')
        writeFileSync(data, 'precious')
        const crafted = [
          ...CRAFTED_UIDS.map((uid, i) => ({ pod: pod(`uid-${i}`, uid), error: /metadata\.uid: Invalid value: .*: a pod UID must not/ })),
          ...CRAFTED_CONTAINERS.map((name, i) => ({ pod: pod(`container-${i}`, `container-${i}`, name, 'sub'), error: /spec\.containers\[0\]\.name: Invalid value: .*: must not contain '\/'/ })),
        ]
        for (const c of crafted) pods.setPod(c.pod)
        for (const c of crafted) await expect(manager.waitForAttachAndMount(c.pod, { timeoutMs: 3_000 })).rejects.toThrow(c.error)
        await manager.waitForAttachAndMount(pod('good', 'good'), { timeoutMs: 20_000 })
        for (const c of crafted) pods.deletePod(c.pod.metadata.uid as string)
        await new Promise((resolve) => setTimeout(resolve, 500))
        expect(readFileSync(data, 'utf8')).toBe('precious')
        expectContained(base, rootDir, before, outside)
      } finally {
        stop.abort()
        await running.catch(() => undefined)
        host.close()
      }
    }, 60_000)
  })
}
