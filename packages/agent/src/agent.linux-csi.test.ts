/**
 * The agent on the real Linux host with a real CSI driver (the reference driver of
 * examples/csi-hostpath-driver, over gRPC on a unix socket) that registers itself through
 * `<rootDir>/plugins_registry` as node-driver-registrar does: a raw block claim on a loop device is
 * mapped into a manifest pod and unmapped when the manifest goes; the driver unregisters when its
 * registration socket goes. Inside the private mount namespace of the preload.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, readlinkSync, realpathSync, rmSync, statSync, unlinkSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Host } from '@kubevol/core'
import { afterAll, describe, expect, it } from 'vitest'
import { until } from '../test/helpers.js'
import { type Agent, startAgent } from './agent.js'

const DRIVER = 'hostpath.csi.kubevol.io'

function installed(name: string): boolean {
  try {
    createRequire(import.meta.url).resolve(`${name}/package.json`)
    return true
  } catch {
    return false
  }
}

const isRoot = process.platform === 'linux' && process.getuid?.() === 0
const inPrivateNamespace = process.env.KUBEVOL_TEST_MOUNT_NAMESPACE === 'private'
const haveAdapter = installed('@kubevol/adapter-linux') && installed('@kubevol/example-csi-hostpath-driver')
const reason = !haveAdapter
  ? '@kubevol/adapter-linux or the example CSI driver is not installed'
  : !isRoot
    ? `needs root on Linux (uid ${process.getuid?.() ?? 'unknown'})`
    : !inPrivateNamespace
      ? 'the test process is not in a private mount namespace (test/mount-namespace.cjs did not run)'
      : undefined

const mountsUnder = (root: string): string[] =>
  readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter((target) => target.startsWith(`${root}/`))

const MANIFESTS = `apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: { name: ${DRIVER} }
spec: { attachRequired: false }
---
apiVersion: v1
kind: PersistentVolume
metadata: { name: pv-raw }
spec:
  capacity: { storage: 8Mi }
  accessModes: [ReadWriteOnce]
  volumeMode: Block
  csi: { driver: ${DRIVER}, volumeHandle: raw-1, volumeAttributes: { size: "8388608" } }
  claimRef: { name: raw, namespace: default }
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: { name: raw }
spec: { volumeName: pv-raw, accessModes: [ReadWriteOnce], volumeMode: Block, resources: { requests: { storage: 8Mi } } }
status: { phase: Bound, capacity: { storage: 8Mi } }
`

const POD = `apiVersion: v1
kind: Pod
metadata: { name: db, uid: linux-db }
spec:
  containers: [{ name: c, volumeDevices: [{ name: raw, devicePath: /dev/xvda }] }]
  volumes: [{ name: raw, persistentVolumeClaim: { claimName: raw } }]
`

if (reason !== undefined && process.env.CI === 'true' && installed('@kubevol/adapter-linux')) {
  describe('the agent with a registered CSI driver on the Linux host', () => {
    it(`cannot run: ${reason}`, () => {
      throw new Error(`${reason}; CI must run this test as root`)
    })
  })
} else if (reason !== undefined) {
  console.warn(`[agent] skipping the Linux-host CSI test: ${reason}`)
  describe.skip('the agent with a registered CSI driver on the Linux host', () => {
    it(`maps a raw block volume for real (skipped: ${reason}; CI runs it as root)`, () => {})
  })
} else {
  describe('the agent with a registered CSI driver on the Linux host', () => {
    const base = realpathSync(mkdtempSync(join(tmpdir(), 'kubevol-agent-csi-')))
    const rootDir = join(base, 'root')
    const manifestDir = join(base, 'manifests')
    const stops: (() => Promise<void> | void)[] = []
    afterAll(async () => {
      for (const stop of stops.reverse()) await stop()
      for (let round = 0; round < 5 && mountsUnder(base).length > 0; round++) {
        for (const target of mountsUnder(base).reverse()) execFileSync('umount', ['-l', target], { stdio: 'ignore' })
      }
      rmSync(base, { recursive: true, force: true })
    })

    it('registers the driver through plugins_registry, maps a raw block claim for real, unmaps it, and unregisters the driver', async () => {
      // Loaded here: neither is a dependency of the agent (adapter-linux is an optional peer).
      const linux = await import('@kubevol/adapter-linux')
      const example = await import('@kubevol/example-csi-hostpath-driver')
      const host: Host & { close(): void } = linux.createLinuxHost()
      stops.push(() => host.close())
      mkdirSync(manifestDir, { recursive: true })
      writeFileSync(join(manifestDir, 'objects.yaml'), MANIFESTS)
      const endpoint = join(base, 'csi.sock')
      const server = await example.startHostpathCsiDriver({ host, endpoint, dataDir: join(base, 'data'), nodeId: 'n1' })
      stops.push(() => server.stop())

      const agent: Agent = await startAgent(
        { nodeName: 'n1', host: 'linux', rootDir, manifestDir, port: 0, manifestRescanMs: 200, statsPeriodMs: 0, shutdownGraceMs: 2_000 },
        { log: { silent: true }, manager: { backoff: { initialMs: 20, maxMs: 500 }, housekeepingPeriodMs: 0 } as object },
      )
      stops.push(() => agent.stop())
      expect(agent.config.pluginRegistration).toBe(true)
      const statuses: boolean[] = []
      const registrar = await example.startRegistrar({ dir: join(rootDir, 'plugins_registry'), name: DRIVER, endpoint, onStatus: (s) => statuses.push(s.pluginRegistered) })
      await until('the driver registered', () => statuses.includes(true), 20_000)
      expect(agent.csiDrivers.get(DRIVER)?.endpoint).toBe(endpoint)

      writeFileSync(join(manifestDir, 'db.yaml'), POD)
      await until('db mapped', () => agent.manager.getMountedVolumesForPod('linux-db').size === 1, 30_000)
      const devices = join(rootDir, 'plugins/kubernetes.io/csi/volumeDevices')
      const link = join(rootDir, 'pods/linux-db/volumeDevices/kubernetes.io~csi/pv-raw')
      expect(readlinkSync(link)).toBe(join(devices, 'publish/pv-raw/linux-db'))
      expect(statSync(link).isBlockDevice()).toBe(true)
      expect(mountsUnder(rootDir).sort()).toEqual([join(devices, 'publish/pv-raw/linux-db'), join(devices, 'pv-raw/dev/linux-db')].sort())
      expect(await host.loopDevices?.find(join(base, 'data/raw-1.img'))).toHaveLength(1)

      unlinkSync(join(manifestDir, 'db.yaml'))
      await until('unmapped', async () => mountsUnder(rootDir).length === 0 && ((await host.loopDevices?.find(join(base, 'data/raw-1.img'))) ?? []).length === 0, 30_000)

      registrar.stop()
      await until('the driver unregistered', () => agent.csiDrivers.get(DRIVER) === undefined, 20_000)
    }, 90_000)
  })
}
