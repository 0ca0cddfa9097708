/**
 * The agent in static mode on the real Linux host, inside the private mount namespace the preload
 * (test/mount-namespace.cjs) made: pod volumes are really mounted, stay mounted across a stop and a
 * restart, and are unmounted when the pod's manifest goes.
 */
import { execFileSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync, unlinkSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
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

/** Mount points under `root`, from the kernel. */
function mountsUnder(root: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter((target) => target.startsWith(`${root}/`))
}

const POD = `apiVersion: v1
kind: Pod
metadata: { name: web, uid: linux-web }
spec:
  containers: [{ name: c, volumeMounts: [{ name: shm, mountPath: /shm }, { name: creds, mountPath: /creds }, { name: scratch, mountPath: /scratch }] }]
  volumes:
    - { name: shm, emptyDir: { medium: Memory, sizeLimit: 8Mi } }
    - { name: creds, secret: { secretName: creds } }
    - { name: scratch, emptyDir: {} }
---
apiVersion: v1
kind: Secret
metadata: { name: creds }
data: { password: czNjcjN0 }
`

if (reason !== undefined && process.env.CI === 'true' && installed) {
  describe('the agent on the Linux host', () => {
    it(`cannot run: ${reason}`, () => {
      throw new Error(`${reason}; CI must run this test as root`)
    })
  })
} else if (reason !== undefined) {
  console.warn(`[agent] skipping the Linux-host test: ${reason}`)
  describe.skip('the agent on the Linux host', () => {
    it(`mounts for real (skipped: ${reason}; CI runs it as root)`, () => {})
  })
} else {
  describe('the agent on the Linux host', () => {
    const base = realpathSync(mkdtempSync(join(tmpdir(), 'kubevol-agent-linux-')))
    const rootDir = join(base, 'root')
    const manifestDir = join(base, 'manifests')
    const agents: Agent[] = []
    afterAll(async () => {
      for (const agent of agents) await agent.stop()
      for (let round = 0; round < 5 && mountsUnder(base).length > 0; round++) {
        for (const target of mountsUnder(base).reverse()) execFileSync('umount', ['-l', target], { stdio: 'ignore' })
      }
      rmSync(base, { recursive: true, force: true })
    })

    const start = async (): Promise<Agent> => {
      const agent = await startAgent(
        { nodeName: 'n1', host: 'linux', rootDir, manifestDir, port: 0, manifestRescanMs: 200, statsPeriodMs: 0, shutdownGraceMs: 2_000 },
        { log: { silent: true }, manager: { backoff: { initialMs: 20, maxMs: 500 }, housekeepingPeriodMs: 0 } as object },
      )
      agents.push(agent)
      return agent
    }

    it('mounts a manifest pod for real, keeps the mounts over a restart, unmounts when the manifest goes', async () => {
      execFileSync('mkdir', ['-p', manifestDir])
      writeFileSync(join(manifestDir, 'web.yaml'), POD)
      const first = await start()
      await until('web mounted', () => first.manager.getMountedVolumesForPod('linux-web').size === 3, 20_000)
      const volumes = join(rootDir, 'pods/linux-web/volumes')
      const mounted = mountsUnder(volumes).sort()
      expect(mounted).toEqual([join(volumes, 'kubernetes.io~empty-dir/shm'), join(volumes, 'kubernetes.io~secret/creds')])
      expect(readFileSync(join(volumes, 'kubernetes.io~secret/creds/password'), 'utf8')).toBe('s3cr3t')
      writeFileSync(join(volumes, 'kubernetes.io~empty-dir/shm/kept'), 'yes')

      await first.stop()
      agents.length = 0
      expect(mountsUnder(volumes).sort()).toEqual(mounted)

      const second = await start()
      await until('web mounted again', () => second.manager.getMountedVolumesForPod('linux-web').size === 3, 20_000)
      expect(mountsUnder(volumes).sort()).toEqual(mounted)
      expect(readFileSync(join(volumes, 'kubernetes.io~empty-dir/shm/kept'), 'utf8')).toBe('yes')

      unlinkSync(join(manifestDir, 'web.yaml'))
      await until('unmounted', () => mountsUnder(rootDir).length === 0 && !second.manager.hasPossiblyMountedVolumesForPod('linux-web'), 20_000)
      expect(existsSync(join(volumes, 'kubernetes.io~empty-dir/shm'))).toBe(false)
    }, 60_000)
  })
}
