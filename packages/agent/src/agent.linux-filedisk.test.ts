/**
 * kubevol's own attachable volume against the attach/detach controller's protocol, on the real
 * Linux host: the fake API server runs its model of the controller, kubevol registers its Node with
 * the controller-managed annotation, and the deploy's CSIDriver object (`attachRequired: false`)
 * says there is nothing to attach through the API. A pod whose claim is bound to a
 * `filedisk.kubevol.io` PV then starts: kubevol attaches the image to a loop device itself in the
 * device-mount step, formats and mounts it under the CSI unique name
 * `kubernetes.io/csi/filedisk.kubevol.io^<handle>` (not attachable, so not in `volumesInUse`, as
 * with the kubelet); no VolumeAttachment is ever made.
 */
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parse as parseYaml } from 'yaml'
import { afterAll, describe, expect, it } from 'vitest'
import { until } from '../test/helpers.js'
import { type Agent, startAgent } from './agent.js'
import { type FakeApiServer, startFakeApiServer } from './testing/index.js'

const NODE = 'edge-1'
const DRIVER = 'filedisk.kubevol.io'

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

const mountsUnder = (root: string): string[] =>
  readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter((target) => target.startsWith(`${root}/`))

/** Loop devices backed by the image (`losetup -j`). */
const loopsOf = (image: string): string[] =>
  execFileSync('losetup', ['-j', image], { encoding: 'utf8' })
    .split('\n')
    .filter(Boolean)
    .map((line) => line.split(':')[0] as string)

const csiDriverObject = (): Record<string, unknown> => parseYaml(readFileSync(fileURLToPath(new URL('../../../deploy/csidriver-filedisk.yaml', import.meta.url)), 'utf8'))

if (reason !== undefined && process.env.CI === 'true' && installed) {
  describe('fileDisk with controller attach/detach on the Linux host', () => {
    it(`cannot run: ${reason}`, () => {
      throw new Error(`${reason}; CI must run this test as root`)
    })
  })
} else if (reason !== undefined) {
  console.warn(`[agent] skipping the fileDisk controller attach/detach test: ${reason}`)
  describe.skip('fileDisk with controller attach/detach on the Linux host', () => {
    it(`mounts for real (skipped: ${reason}; CI runs it as root)`, () => {})
  })
} else {
  describe('fileDisk with controller attach/detach on the Linux host', () => {
    const base = realpathSync(mkdtempSync(join(tmpdir(), 'kubevol-agent-filedisk-')))
    const rootDir = join(base, 'root')
    const image = join(base, 'disk.img')
    let api: FakeApiServer | undefined
    let agent: Agent | undefined
    afterAll(async () => {
      await agent?.stop()
      await api?.close()
      for (let round = 0; round < 5 && mountsUnder(base).length > 0; round++) {
        for (const target of mountsUnder(base).reverse()) execFileSync('umount', ['-l', target], { stdio: 'ignore' })
      }
      for (const loop of loopsOf(image)) execFileSync('losetup', ['-d', loop], { stdio: 'ignore' })
      rmSync(base, { recursive: true, force: true })
    })

    it('starts a pod with a filedisk.kubevol.io claim: no VolumeAttachment, the loop attach on the node, the CSI unique name', async () => {
      execFileSync('truncate', ['-s', '64M', image])
      api = await startFakeApiServer({ attachDetachController: true })
      api.create('CSIDriver', csiDriverObject())
      const pvc = api.create('PersistentVolumeClaim', { metadata: { name: 'disk', namespace: 'default' }, spec: { volumeName: 'pv-disk', accessModes: ['ReadWriteOnce'] } })
      api.create('PersistentVolume', {
        metadata: { name: 'pv-disk' },
        spec: { capacity: { storage: '64Mi' }, accessModes: ['ReadWriteOnce'], csi: { driver: DRIVER, volumeHandle: image, fsType: 'ext4' }, claimRef: { name: 'disk', namespace: 'default', uid: pvc.metadata.uid } },
      })
      api.patch('PersistentVolumeClaim', 'default', 'disk', { status: { phase: 'Bound', capacity: { storage: '64Mi' } } }, { subresource: 'status' })

      // No Node yet: kubevol registers it, annotated for the controller (the API mode default).
      agent = await startAgent(
        { nodeName: NODE, mode: 'api', host: 'linux', rootDir, port: 0, nodeStatusPeriodMs: 100, watchRetryMs: 20, podSyncRetryMs: 100, objectCacheTtlMs: 0, statsPeriodMs: 0, shutdownGraceMs: 2_000 },
        { kubeConfig: api.kubeConfig(api.nodeToken(NODE)), log: { silent: true }, manager: { backoff: { initialMs: 20, maxMs: 500 }, housekeepingPeriodMs: 0 } as object },
      )
      await until('the Node registered', () => api?.get('Node', undefined, NODE)?.metadata.annotations?.['volumes.kubernetes.io/controller-managed-attach-detach'] === 'true')

      const web = api.create('Pod', {
        metadata: { name: 'web', namespace: 'default' },
        spec: { nodeName: NODE, containers: [{ name: 'c', image: 'busybox', volumeMounts: [{ name: 'data', mountPath: '/data' }] }], volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'disk' } }] },
      })
      const uid = web.metadata.uid as string
      const running = agent
      await until('web mounted', () => running.manager.getMountedVolumesForPod(uid).size === 1, 40_000)
      const volumes = join(rootDir, 'pods', uid, 'volumes')
      const [target] = mountsUnder(volumes)
      expect(target).toBeDefined()
      writeFileSync(join(target as string, 'hello'), 'from the pod')
      expect(loopsOf(image)).toHaveLength(1)

      // The name the controller and the kubelet use; not attachable, so not in volumesInUse (SPEC §2).
      const unique = `kubernetes.io/csi/${DRIVER}^${image}`
      expect(agent.manager.snapshot().mounted.map((v) => v.volumeName)).toEqual([unique])
      expect(agent.manager.getVolumesInUse()).toEqual([])
      expect(api.list('VolumeAttachment')).toEqual([])

      api.delete('Pod', 'default', 'web', { gracePeriodSeconds: 0 })
      await until('unmounted and detached', () => mountsUnder(rootDir).length === 0 && loopsOf(image).length === 0, 40_000)
      expect(api.list('VolumeAttachment')).toEqual([])
      // What the pod wrote is on the image's file system.
      expect(execFileSync('blkid', ['-o', 'value', '-s', 'TYPE', image], { encoding: 'utf8' }).trim()).toBe('ext4')
      expect(execFileSync('debugfs', ['-R', 'cat /hello', image], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })).toBe('from the pod')
    }, 90_000)
  })
}
