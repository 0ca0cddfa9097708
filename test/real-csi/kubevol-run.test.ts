/**
 * `kubevol run` as the README documents it (static mode, the Linux host, a manifest directory) with
 * the real CSI hostpath driver registering through the real node-driver-registrar in the agent's
 * `<root-dir>/plugins_registry`: a pod with a filesystem claim, a raw block claim and an inline
 * ephemeral volume is set up from its manifest and torn down when the manifest goes; SIGTERM stops
 * kubevol. Volumes are created first over the driver's Controller service, as an external-provisioner
 * would. The binaries come from `KUBEVOL_ENVTEST_ASSETS` (packages/adapter-linux/test/real-csi.ts);
 * `kubevol` runs from the built packages (`npm run build`).
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, realpathSync, statSync, unlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, expect, it } from 'vitest'
import { createControllerClient, describeWithRealCsi, type RealProcess, startHostpathPlugin, startProcess, startRegistrar } from '../../packages/adapter-linux/test/real-csi.js'
import { cleanupTempRoot } from '../../packages/adapter-linux/test/temp-root.js'

const DRIVER = 'hostpath.csi.k8s.io'
const MiB = 1 << 20
const CLI = fileURLToPath(new URL('../../packages/cli/bin/kubevol.js', import.meta.url))

const mountsUnder = (prefix: string): string[] =>
  readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter((target) => target.startsWith(`${prefix}/`))
    .sort()

async function until(what: string, check: () => boolean, proc: RealProcess, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!check()) {
    if (!proc.running()) throw new Error(`kubevol exited while waiting for ${what}; its log:\n${proc.tail(60)}`)
    if (Date.now() > deadline) throw new Error(`not reached in ${ms} ms: ${what}; kubevol's log:\n${proc.tail(60)}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

describeWithRealCsi('kubevol run with the real CSI hostpath driver and node-driver-registrar', (assets) => {
  const base = realpathSync(mkdtempSync(join(tmpdir(), 'kubevol-real-csi-')))
  const stops: (() => Promise<void> | void)[] = []
  afterAll(async () => {
    for (const stop of stops.reverse()) await stop()
    cleanupTempRoot(base)
  })

  it('sets up a manifest pod with a filesystem claim, a raw block claim and an inline volume, tears it down when the manifest goes, and stops on SIGTERM', async () => {
    const root = join(base, 'root')
    const manifests = join(base, 'manifests')
    const stateDir = join(base, 'csi-data-dir')
    const socket = join(root, 'plugins', DRIVER, 'csi.sock')
    mkdirSync(join(root, 'plugins', DRIVER), { recursive: true })
    mkdirSync(manifests)
    const driver = await startHostpathPlugin({ assets, socket, stateDir, driverName: DRIVER, nodeId: 'node-1', logFile: join(base, 'hostpathplugin.log') })
    stops.push(() => driver.stop())
    const controller = createControllerClient(socket)
    stops.push(() => controller.close())
    const files = await controller.createVolume('pvc-files', 8 * MiB, 'mount')
    const disk = await controller.createVolume('pvc-disk', 8 * MiB, 'block')

    const claim = (name: string, volumeHandle: string, mode: 'Filesystem' | 'Block') => `---
apiVersion: v1
kind: PersistentVolume
metadata: { name: pv-${name} }
spec:
  capacity: { storage: 8Mi }
  accessModes: [ReadWriteOnce]
  volumeMode: ${mode}
  csi: { driver: ${DRIVER}, volumeHandle: ${volumeHandle} }
  claimRef: { name: ${name}, namespace: default }
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: { name: ${name}, namespace: default }
spec: { volumeName: pv-${name}, accessModes: [ReadWriteOnce], volumeMode: ${mode}, resources: { requests: { storage: 8Mi } } }
status: { phase: Bound, capacity: { storage: 8Mi } }
`
    writeFileSync(
      join(manifests, 'objects.yaml'),
      `apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: { name: ${DRIVER} }
spec: { attachRequired: false, podInfoOnMount: true, volumeLifecycleModes: [Persistent, Ephemeral], fsGroupPolicy: File }
${claim('files', files.volumeId, 'Filesystem')}${claim('disk', disk.volumeId, 'Block')}`,
    )

    const kubevol = startProcess(
      'kubevol run',
      process.execPath,
      [CLI, 'run', '--host', 'linux', '--root-dir', root, '--pod-manifest-path', manifests, '--node-name', 'node-1', '--port', '0', '--file-check-frequency=200ms', '--shutdown-grace-period=5s'],
      { logFile: join(base, 'kubevol.log') },
    )
    stops.push(() => kubevol.stop('SIGTERM', 15_000))
    await until('plugins_registry made', () => existsSync(join(root, 'plugins_registry')), kubevol)
    const registrar = await startRegistrar({ assets, driverSocket: socket, driverName: DRIVER, registrationDir: join(root, 'plugins_registry'), logFile: join(base, 'registrar.log') })
    stops.push(() => registrar.stop())
    await until('registered', () => /PluginRegistered:true/.test(readFileSync(registrar.logFile, 'utf8')), kubevol)

    writeFileSync(
      join(manifests, 'db.yaml'),
      `apiVersion: v1
kind: Pod
metadata: { name: db, namespace: default, uid: real-csi-db }
spec:
  containers:
  - name: c
    image: busybox
    volumeMounts: [{ name: files, mountPath: /data }, { name: scratch, mountPath: /tmp }]
    volumeDevices: [{ name: disk, devicePath: /dev/xvda }]
  volumes:
  - { name: files, persistentVolumeClaim: { claimName: files } }
  - { name: disk, persistentVolumeClaim: { claimName: disk } }
  - { name: scratch, csi: { driver: ${DRIVER} } }
`,
    )
    const pod = join(root, 'pods/real-csi-db')
    const devices = join(root, 'plugins/kubernetes.io/csi/volumeDevices')
    const expected = [
      join(pod, 'volumes/kubernetes.io~csi/pv-files/mount'),
      join(pod, 'volumes/kubernetes.io~csi/scratch/mount'),
      join(devices, 'publish/pv-disk/real-csi-db'),
      join(devices, 'pv-disk/dev/real-csi-db'),
    ].sort()
    await until('every volume set up', () => mountsUnder(root).length === expected.length, kubevol)
    expect(mountsUnder(root)).toEqual(expected)
    writeFileSync(join(pod, 'volumes/kubernetes.io~csi/pv-files/mount/rows'), 'rows')
    expect(readFileSync(join(stateDir, files.volumeId, 'rows'), 'utf8')).toBe('rows')
    const link = join(pod, 'volumeDevices/kubernetes.io~csi/pv-disk')
    expect(readlinkSync(link)).toBe(join(devices, 'publish/pv-disk/real-csi-db'))
    expect(statSync(link).isBlockDevice()).toBe(true)

    unlinkSync(join(manifests, 'db.yaml'))
    await until('every volume torn down', () => mountsUnder(root).length === 0, kubevol)
    const state = () => (JSON.parse(readFileSync(join(stateDir, 'state.json'), 'utf8')) as { Volumes: { VolID: string; Staged: string[] | null; Published: string[] | null }[] }).Volumes
    await until('unstaged', () => {
      try {
        return state().every((v) => (v.Staged ?? []).length === 0 && (v.Published ?? []).length === 0)
      } catch {
        return false
      }
    }, kubevol)
    // The inline volume was deleted by the driver with its publication; the claims' volumes stay.
    expect(state().map((v) => v.VolID).sort()).toEqual([files.volumeId, disk.volumeId].sort())
    expect(readFileSync(join(stateDir, files.volumeId, 'rows'), 'utf8')).toBe('rows')

    await kubevol.stop('SIGTERM', 15_000)
    expect(kubevol.exit(), kubevol.tail()).toEqual({ code: 0, signal: null })
    await controller.deleteVolume(disk.volumeId)
    await controller.deleteVolume(files.volumeId)
  }, 120_000)
})
