/**
 * The runtime's half on the real kernel: containers run by crun (a busybox-static root file system)
 * on the volumes the manager mounted with the Linux host, given to them by `containerMounts` and
 * written as OCI mounts by examples/oci-runner. Each case asserts what a process inside the pod's
 * container sees. The process is in a private mount namespace (test/mount-namespace preload); this
 * machine's cgroups are hybrid, which crun refuses, so `/sys/fs/cgroup/unified` is unmounted in that
 * namespace (crun then uses cgroup v1).
 */
import { execFileSync } from 'node:child_process'
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, readSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type Container, type Pod, type VolumeManager, containerMounts, createMemoryObjectReader, createMemoryPodSource, createVolumeManager, silentLogger } from '@kubevol/core'
import { FILE_DISK_DRIVER, createBuiltinPlugins } from '@kubevol/core/plugins'
import { buildClaim } from '@kubevol/core/testing'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type ContainerExit, busyboxRootfs, runManifest, runPod, startContainer, writeBundle } from '../../examples/oci-runner/src/index.js'

const BUSYBOX = '/bin/busybox'

function which(tool: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

function adapterLinuxInstalled(): boolean {
  try {
    createRequire(import.meta.url).resolve('@kubevol/adapter-linux/package.json')
    return true
  } catch {
    return false
  }
}

const reason =
  process.platform !== 'linux' || process.getuid?.() !== 0
    ? `needs root on Linux (uid ${process.getuid?.() ?? 'unknown'})`
    : process.env.KUBEVOL_TEST_MOUNT_NAMESPACE !== 'private'
      ? `the test process is not in a private mount namespace (${process.env.KUBEVOL_TEST_MOUNT_NAMESPACE_SKIP ?? 'the preload did not run'})`
      : !adapterLinuxInstalled()
        ? '@kubevol/adapter-linux is not installed'
        : !which('crun')
          ? 'crun is not installed (Debian: apt-get install crun)'
          : !existsSync(BUSYBOX)
            ? `${BUSYBOX} is missing (Debian: apt-get install busybox-static)`
            : undefined

/** Mount points at or under `dir`, deepest first. */
function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => (line.split(' ')[4] ?? '').replace(/\\040/g, ' '))
    .filter((target) => target === dir || target.startsWith(`${dir}/`))
    .reverse()
}

async function until(what: string, check: () => boolean, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

const sh = (script: string): Partial<Container> & { command: string[] } => ({ command: ['/bin/sh', '-c', script] })

if (reason !== undefined && process.env.CI === 'true') {
  describe('containers on their volumes with crun', () => {
    it(`cannot run: ${reason}`, () => {
      throw new Error(`${reason}; CI must run these tests as root with crun and busybox-static installed`)
    })
  })
} else if (reason !== undefined) {
  console.warn(`[integration] skipping the crun tests: ${reason}`)
  describe.skip('containers on their volumes with crun', () => {
    it(`runs containers (skipped: ${reason})`, () => {})
  })
} else {
  describe('containers on their volumes with crun', () => {
    const base = realpathSync(mkdtempSync(join(tmpdir(), 'kubevol-crun-')))
    const rootDir = join(base, 'root')
    const hostDir = join(base, 'host')
    const bundlesDir = join(base, 'bundles')
    const stateDir = join(base, 'crun-state')
    const runtime = { stateDir }
    const pods = createMemoryPodSource()
    const objects = createMemoryObjectReader()
    let manager: VolumeManager
    let rootfs: string
    const stop = new AbortController()
    let running: Promise<void>
    let host: { close(): void }

    beforeAll(async () => {
      // crun refuses hybrid cgroups; in this process's own mount namespace, v1 alone is left.
      if (mountsUnder('/sys/fs/cgroup/unified').length > 0) execFileSync('umount', ['/sys/fs/cgroup/unified'])
      for (const dir of [rootDir, hostDir, bundlesDir, stateDir]) mkdirSync(dir, { recursive: true })
      rootfs = busyboxRootfs(join(base, 'rootfs'), BUSYBOX)
      const { createLinuxHost } = await import('@kubevol/adapter-linux')
      const linux = createLinuxHost({ callTimeoutMs: 20_000 })
      host = linux
      manager = createVolumeManager({
        host: linux,
        plugins: createBuiltinPlugins(),
        podSource: pods,
        objects,
        nodeName: 'node-1',
        rootDir,
        // No attach/detach controller here: the manager attaches (a fileDisk's loop device) itself.
        controllerAttachDetach: false,
        logger: silentLogger,
        tokens: { getToken: async (r) => ({ token: `token-for-${r.serviceAccountName}-${r.audience}`, issuedAt: Date.now(), expiresAt: Date.now() + 3_600_000 }) },
      })
      running = manager.run(stop.signal)
    })

    afterAll(async () => {
      // Every pod is gone: the manager unmounts their devices and detaches their loop devices (which,
      // unlike mounts, outlive this mount namespace) before it stops.
      if (manager) await until('every volume detached', () => manager.snapshot().attached.length === 0, 30_000).catch((err) => console.warn(String(err)))
      stop.abort()
      await running?.catch(() => undefined)
      host?.close()
      for (let round = 0; round < 5 && mountsUnder(base).length > 0; round++) {
        for (const target of mountsUnder(base)) execFileSync('umount', ['-l', target], { stdio: 'ignore' })
      }
      if (mountsUnder(base).length === 0) rmSync(base, { recursive: true, force: true })
    })

    const podOf = (uid: string, spec: Pod['spec']): Pod => ({ metadata: { namespace: 'default', name: uid, uid, labels: { app: 'web', tier: 'front' } }, spec: { nodeName: 'node-1', ...spec } })
    const run = (pod: Pod) => runPod(pod, { manager, pods, rootfs, bundlesDir, runtime })
    const outputOf = (exits: readonly ContainerExit[], id: string) => exits.find((e) => e.id.endsWith(`-${id}`))

    /** Starts one container of a pod whose volumes are mounted, as runPod does, and returns it running. */
    const start = (pod: Pod, name: string) => {
      const { mounts, devices } = containerMounts(pod, name, manager.getMountedVolumesForPod(pod), { runtimeSupportsRecursiveReadOnly: true })
      const container = [...(pod.spec?.containers ?? [])].find((c) => c.name === name) as Container & { command: string[] }
      const bundle = writeBundle(join(bundlesDir, pod.metadata.uid as string, name), { rootfs, args: container.command, mounts, devices })
      return { container: startContainer(`${pod.metadata.uid}-${name}`, bundle, runtime), mounts }
    }
    const finish = async (pod: Pod) => {
      pods.deletePod(pod.metadata.uid as string)
      await manager.waitForUnmount(pod, { timeoutMs: 30_000 })
      expect(mountsUnder(join(rootDir, 'pods', pod.metadata.uid as string))).toEqual([])
    }

    it('an emptyDir on disk and in memory is writable and shared by the pod init container and its two containers; all unmounted after', async () => {
      const pod = podOf('shared', {
        volumes: [
          { name: 'cache', emptyDir: {} },
          { name: 'shm', emptyDir: { medium: 'Memory', sizeLimit: '8Mi' } },
        ],
        initContainers: [{ name: 'init', ...sh('echo from-init > /cache/init'), volumeMounts: [{ name: 'cache', mountPath: '/cache' }] }],
        containers: [
          {
            name: 'writer',
            ...sh('echo disk-data > /cache/shared && echo memory-data > /shm/shared && grep -E "^[^ ]+ /shm tmpfs" /proc/mounts | cut -d" " -f3'),
            volumeMounts: [
              { name: 'cache', mountPath: '/cache' },
              { name: 'shm', mountPath: '/shm' },
            ],
          },
          {
            name: 'reader',
            ...sh('i=0; while [ ! -s /data/shared ] || [ ! -s /mem/shared ]; do i=$((i+1)); [ $i -gt 200 ] && exit 9; sleep 0.1; done; cat /data/init /data/shared /mem/shared'),
            volumeMounts: [
              { name: 'cache', mountPath: '/data' },
              { name: 'shm', mountPath: '/mem' },
            ],
          },
        ],
      })
      const exits = await run(pod)
      expect(exits.map((e) => [e.id, e.exitCode])).toEqual([
        ['shared-init', 0],
        ['shared-writer', 0],
        ['shared-reader', 0],
      ])
      expect(outputOf(exits, 'writer')?.stdout).toBe('tmpfs\n')
      expect(outputOf(exits, 'reader')?.stdout).toBe('from-init\ndisk-data\nmemory-data\n')
      expect(mountsUnder(join(rootDir, 'pods', 'shared'))).toEqual([])
    }, 60_000)

    it('a configMap changed while the container runs shows the new content through ..data; a key mounted with subPath keeps the old', async () => {
      objects.put('ConfigMap', { metadata: { namespace: 'default', name: 'settings' }, data: { 'app.conf': 'v1' } })
      const pod = podOf('config', {
        volumes: [
          { name: 'config', configMap: { name: 'settings' } },
          { name: 'scratch', emptyDir: {} },
        ],
        containers: [
          {
            name: 'app',
            ...sh(
              'touch /scratch/started; i=0; until grep -q v2 /etc/config/app.conf; do i=$((i+1)); [ $i -gt 300 ] && exit 9; sleep 0.1; done; ' +
                'echo "dir=$(cat /etc/config/app.conf) subPath=$(cat /etc/app.conf) data=$(readlink /etc/config/..data | cut -c1-2)"; touch /etc/config/x 2>&1 | cut -d: -f3',
            ),
            volumeMounts: [
              { name: 'config', mountPath: '/etc/config' },
              { name: 'config', mountPath: '/etc/app.conf', subPath: 'app.conf' },
              { name: 'scratch', mountPath: '/scratch' },
            ],
          },
        ],
      })
      pods.setPod(pod)
      await manager.waitForAttachAndMount(pod, { timeoutMs: 30_000 })
      const { container, mounts } = start(pod, 'app')
      const scratch = mounts.find((m) => m.name === 'scratch')?.hostPath as string
      await until('the container to start', () => existsSync(join(scratch, 'started')))
      objects.put('ConfigMap', { metadata: { namespace: 'default', name: 'settings' }, data: { 'app.conf': 'v2' } })
      const exit = await container.exited
      expect(exit.exitCode, exit.stderr).toBe(0)
      expect(exit.stdout).toBe('dir=v2 subPath=v1 data=..\n Read-only file system\n')
      await finish(pod)
    }, 60_000)

    it('secret modes, downwardAPI labels and a projected service account token, as files in the container', async () => {
      objects.put('Secret', { metadata: { namespace: 'default', name: 'creds' }, data: { user: btoa('admin'), password: btoa('s3cr3t') } })
      const pod = podOf('files', {
        serviceAccountName: 'builder',
        volumes: [
          { name: 'creds', secret: { secretName: 'creds', defaultMode: 0o400, items: [{ key: 'user', path: 'user' }, { key: 'password', path: 'password', mode: 0o440 }] } },
          { name: 'info', downwardAPI: { items: [{ path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } }] } },
          { name: 'token', projected: { sources: [{ serviceAccountToken: { path: 'token', audience: 'vault', expirationSeconds: 3600 } }] } },
        ],
        containers: [
          {
            name: 'app',
            ...sh('stat -L -c "%n %a" /creds/user /creds/password; cat /creds/user; echo; cat /info/labels; echo; cat /token/token'),
            volumeMounts: [
              { name: 'creds', mountPath: '/creds' },
              { name: 'info', mountPath: '/info' },
              { name: 'token', mountPath: '/token' },
            ],
          },
        ],
      })
      const [exit] = await run(pod)
      expect(exit?.exitCode, exit?.stderr).toBe(0)
      expect(exit?.stdout).toBe('/creds/user 400\n/creds/password 440\nadmin\napp="web"\ntier="front"\ntoken-for-builder-vault')
    }, 60_000)

    it('a hostPath is the host directory; readOnly refuses writes with EROFS, and recursiveReadOnly in a submount too', async () => {
      const shared = join(hostDir, 'shared')
      const nested = join(hostDir, 'nested')
      mkdirSync(shared, { recursive: true })
      mkdirSync(join(nested, 'sub'), { recursive: true })
      writeFileSync(join(shared, 'hello'), 'from the host')
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'submount', join(nested, 'sub')])
      const pod = podOf('hostpath', {
        volumes: [
          { name: 'shared', hostPath: { path: shared, type: 'Directory' } },
          { name: 'nested', hostPath: { path: nested } },
        ],
        containers: [
          {
            name: 'app',
            ...sh(
              'cat /shared/hello; echo; echo from-the-container > /shared/written; touch /ro/x 2>&1 | cut -d: -f3; ' +
                'touch /ro-parent/sub/plain && echo "submount of a read-only mount: writable"; touch /rro/sub/x 2>&1 | cut -d: -f3; touch /rro/y 2>&1 | cut -d: -f3',
            ),
            volumeMounts: [
              { name: 'shared', mountPath: '/shared' },
              { name: 'shared', mountPath: '/ro', readOnly: true },
              { name: 'nested', mountPath: '/ro-parent', readOnly: true },
              { name: 'nested', mountPath: '/rro', readOnly: true, recursiveReadOnly: 'Enabled' },
            ],
          },
        ],
      })
      const [exit] = await run(pod)
      execFileSync('umount', [join(nested, 'sub')])
      expect(exit?.exitCode, exit?.stderr).toBe(0)
      expect(exit?.stdout).toBe('from the host\n Read-only file system\nsubmount of a read-only mount: writable\n Read-only file system\n Read-only file system\n')
      expect(readFileSync(join(shared, 'written'), 'utf8')).toBe('from-the-container\n')
    }, 60_000)

    it('HostToContainer shows a mount the host makes afterwards; a private mount of the same directory does not', async () => {
      const dir = join(hostDir, 'propagated')
      mkdirSync(join(dir, 'late'), { recursive: true })
      // As a kubelet's root directory is: a shared mount, so that the host's later mounts propagate.
      execFileSync('mount', ['--bind', dir, dir])
      execFileSync('mount', ['--make-shared', dir])
      const pod = podOf('propagation', {
        volumes: [
          { name: 'host', hostPath: { path: dir } },
          { name: 'scratch', emptyDir: {} },
        ],
        containers: [
          {
            name: 'app',
            ...sh('touch /scratch/started; i=0; until [ -f /slave/late/seen ]; do i=$((i+1)); [ $i -gt 300 ] && exit 9; sleep 0.1; done; cat /slave/late/seen; [ -f /private/late/seen ] || echo "private: not seen"'),
            volumeMounts: [
              { name: 'host', mountPath: '/slave', mountPropagation: 'HostToContainer' },
              { name: 'host', mountPath: '/private' },
              { name: 'scratch', mountPath: '/scratch' },
            ],
          },
        ],
      })
      pods.setPod(pod)
      await manager.waitForAttachAndMount(pod, { timeoutMs: 30_000 })
      const { container, mounts } = start(pod, 'app')
      expect(mounts.map((m) => m.propagation)).toEqual(['PROPAGATION_HOST_TO_CONTAINER', 'PROPAGATION_PRIVATE', 'PROPAGATION_PRIVATE'])
      await until('the container to start', () => existsSync(join(mounts[2]?.hostPath as string, 'started')))
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'late', join(dir, 'late')])
      writeFileSync(join(dir, 'late', 'seen'), 'mounted on the host after the container started\n')
      const exit = await container.exited
      execFileSync('umount', ['-R', dir])
      expect(exit.exitCode, exit.stderr).toBe(0)
      expect(exit.stdout).toBe('mounted on the host after the container started\nprivate: not seen\n')
      await finish(pod)
    }, 60_000)

    it('Bidirectional: a mount a privileged container makes shows on the host', async () => {
      const dir = join(hostDir, 'bidirectional')
      mkdirSync(dir, { recursive: true })
      execFileSync('mount', ['--bind', dir, dir])
      execFileSync('mount', ['--make-shared', dir])
      const pod = podOf('bidirectional', {
        volumes: [{ name: 'host', hostPath: { path: dir } }],
        containers: [
          {
            name: 'app',
            securityContext: { privileged: true },
            ...sh('mkdir -p /b/inner && mount -t tmpfs -o size=1m from-the-container /b/inner && echo made in the container > /b/inner/file'),
            volumeMounts: [{ name: 'host', mountPath: '/b', mountPropagation: 'Bidirectional' }],
          },
        ],
      })
      const [exit] = await run(pod)
      expect(exit?.exitCode, exit?.stderr).toBe(0)
      // The container is gone; its mount stays on the host, as with the kubelet.
      expect(readFileSync(join(dir, 'inner', 'file'), 'utf8')).toBe('made in the container\n')
      expect(mountsUnder(join(dir, 'inner'))).toEqual([join(dir, 'inner')])
      execFileSync('umount', ['-R', dir])
    }, 60_000)

    it('a fileDisk claim in volumeDevices is a block device the container writes and reads', async () => {
      const image = join(hostDir, 'raw.img')
      execFileSync('truncate', ['-s', '16M', image])
      const { pvc, pv } = buildClaim({ claim: 'raw', pv: 'pv-raw', volumeMode: 'Block', pvSource: { csi: { driver: FILE_DISK_DRIVER, volumeHandle: image } } })
      objects.put('PersistentVolumeClaim', pvc)
      objects.put('PersistentVolume', pv)
      const pod = podOf('block', {
        volumes: [{ name: 'raw', persistentVolumeClaim: { claimName: 'raw' } }],
        containers: [
          {
            name: 'app',
            ...sh('[ -b /dev/xvda ] && echo block; printf kubevol-block | dd of=/dev/xvda conv=notrunc 2>/dev/null; dd if=/dev/xvda bs=13 count=1 2>/dev/null; echo'),
            volumeDevices: [{ name: 'raw', devicePath: '/dev/xvda' }],
          },
        ],
      })
      const [exit] = await run(pod)
      expect(exit?.exitCode, exit?.stderr).toBe(0)
      expect(exit?.stdout).toBe('block\nkubevol-block\n')
      await until('the image detached', () => execFileSync('losetup', ['-j', image], { encoding: 'utf8' }) === '')
      const bytes = Buffer.alloc(13)
      const fd = openSync(image, 'r')
      readSync(fd, bytes, 0, 13, 0)
      closeSync(fd)
      expect(bytes.toString()).toBe('kubevol-block')
    }, 60_000)

    it("after a pod is deleted, a persistent volume's data is there for the next pod", async () => {
      const image = join(hostDir, 'disk.img')
      execFileSync('truncate', ['-s', '64M', image])
      const { pvc, pv } = buildClaim({ claim: 'disk', pv: 'pv-disk', pvSource: { csi: { driver: FILE_DISK_DRIVER, volumeHandle: image, fsType: 'ext4' } } })
      objects.put('PersistentVolumeClaim', pvc)
      objects.put('PersistentVolume', pv)
      const podWith = (uid: string, script: string) =>
        podOf(uid, { volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'disk' } }], containers: [{ name: 'db', ...sh(script), volumeMounts: [{ name: 'data', mountPath: '/var/lib/db' }] }] })
      const [first] = await run(podWith('first', 'echo rows-from-the-first-pod > /var/lib/db/table'))
      expect(first?.exitCode, first?.stderr).toBe(0)
      const [second] = await run(podWith('second', 'cat /var/lib/db/table'))
      expect(second?.exitCode, second?.stderr).toBe(0)
      expect(second?.stdout).toBe('rows-from-the-first-pod\n')
      await until('the image detached', () => execFileSync('losetup', ['-j', image], { encoding: 'utf8' }) === '')
    }, 90_000)

    it('the example runs its two-container pod from the manifest, and leaves nothing mounted', async () => {
      const manifest = readFileSync(new URL('../../examples/oci-runner/two-containers.yaml', import.meta.url), 'utf8')
      const exampleRoot = join(base, 'example-root')
      const results = await runManifest(manifest, { rootDir: exampleRoot, workDir: join(base, 'example-work'), runtime: { stateDir } })
      const exits = results.get('default/two-containers') ?? []
      expect(exits.map((e) => [e.id.replace(/^.*-(producer|consumer)$/, '$1'), e.exitCode, e.stdout])).toEqual([
        ['producer', 0, ''],
        ['consumer', 0, 'consumer read: hello from a configMap\nand cannot write it\n'],
      ])
      expect(mountsUnder(exampleRoot)).toEqual([])
    }, 60_000)
  })
}
