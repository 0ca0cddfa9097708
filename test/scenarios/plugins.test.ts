import type { Volume } from '@kubevol/core'
import { createBuiltinPlugins, FILE_DISK_DRIVER } from '@kubevol/core/plugins'
import { buildClaim, buildPod } from '@kubevol/core/testing'
import { afterEach, describe, expect, it } from 'vitest'
import { podMounts, scenario, watchCalls } from './setup.js'

const ROOT = '/var/lib/kubevol'
let current: ReturnType<typeof scenario> | undefined
function start(options: Parameters<typeof scenario>[0] = {}) {
  current = scenario({ plugins: createBuiltinPlugins(), ...options })
  current.start()
  return current
}
afterEach(async () => {
  await current?.stop()
  current?.host.assertNoViolations()
  current = undefined
})

const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes)
const failure = (h: ReturnType<typeof scenario>) => h.events.find((e) => e.reason === 'FailedMount')?.message

describe('emptyDir', () => {
  it('on disk: a world-writable directory whose content goes with the pod', async () => {
    const h = start()
    await h.addPodAndWait(buildPod({ uid: 'a', volumes: [{ name: 'scratch', emptyDir: {} }] }))
    const dir = `${ROOT}/pods/a/volumes/kubernetes.io~empty-dir/scratch`
    expect(((await h.host.stat(dir))?.mode ?? 0) & 0o777).toBe(0o777)
    expect(podMounts(h.host)).toEqual([])
    await h.host.writeFile(`${dir}/data`, 'x')
    h.pods.deletePod('a')
    await h.manager.waitForIdle()
    expect(h.host.exists(dir)).toBe(false)
    expect(h.host.exists(`${ROOT}/pods/a/plugins/kubernetes.io~empty-dir/scratch`)).toBe(false)
  })

  it('in memory: a tmpfs sized by the smallest of sizeLimit, memory limits and the node', async () => {
    const h = start()
    const pod = buildPod({ uid: 'a', volumes: [{ name: 'shm', emptyDir: { medium: 'Memory', sizeLimit: '64Mi' } }] })
    await h.addPodAndWait(pod)
    const target = `${ROOT}/pods/a/volumes/kubernetes.io~empty-dir/shm`
    const entry = (await h.host.mounts()).find((m) => m.target === target)
    expect(entry?.fstype).toBe('tmpfs')
    expect(entry?.superOptions).toContain(`size=${64 * 2 ** 20}`)
    h.pods.deletePod('a')
    await h.manager.waitForIdle()
    expect(podMounts(h.host)).toEqual([])
    expect(h.host.exists(target)).toBe(false)
  })

  it('in memory: tear-down is one look for subPath binds, then one removal of the marker, its directory and the volume’s directory with its tmpfs unmounted first', async () => {
    const h = start()
    await h.addPodAndWait(buildPod({ uid: 'a', volumes: [{ name: 'shm', emptyDir: { medium: 'Memory' } }] }))
    const calls: string[] = []
    const subPathCalls: string[] = []
    // Only the plugin's own calls are listed, not those the memory host makes inside one.
    watchCalls(h.host, (call, outer) => {
      if (outer && call.path?.includes('empty-dir')) calls.push(`${call.method} ${call.path.replace(`${ROOT}/pods/a/`, '')}`)
      if (outer && call.path?.includes('volume-subpaths/')) subPathCalls.push(`${call.method} ${call.path.replace(`${ROOT}/pods/a/`, '')}`)
    })
    h.pods.deletePod('a')
    await h.manager.waitForIdle()
    // The host holds the root (no symlink beneath it is followed): no checks of the pod's
    // directories by name; the volume's subPath directory is looked at once, missing.
    expect(subPathCalls).toEqual(['lstat volume-subpaths/shm'])
    expect(calls).toEqual([
      // One call for the marker, its directory and the volume's directory, its tmpfs unmounted
      // before its remove (one round trip on Linux).
      'removeUnmounted plugins/kubernetes.io~empty-dir/shm/ready',
    ])
  })

  it.each([
    { medium: 'HugePages', error: 'emptyDir medium "HugePages" is not supported by kubevol' },
    { medium: 'Tape', error: 'unknown storage medium "Tape"' },
  ])('refuses medium $medium', async ({ medium, error }) => {
    const h = start()
    h.pods.setPod(buildPod({ uid: 'a', volumes: [{ name: 'v', emptyDir: { medium } }] }))
    await h.advanceUntil(() => failure(h) !== undefined)
    expect(failure(h)).toBe(`MountVolume.NewMounter initialization failed for volume "v" : ${error}`)
  })

  it.each([
    { case: 'on disk', emptyDir: {}, fsGroup: undefined, calls: ['fileSteps lstat,mkdir,setPermissions,mkdir,writeFile'] },
    { case: 'on disk with fsGroup', emptyDir: {}, fsGroup: 2000, calls: ['fileSteps lstat,mkdir,setPermissions', 'fileSteps mkdir,writeFile'] },
    // The memory host, with an interceptor set, makes the steps as calls of their own: the tmpfs's
    // check and mount are listed after the one fileSteps call they are made in.
    {
      case: 'in memory',
      emptyDir: { medium: 'Memory' },
      fsGroup: undefined,
      calls: ['fileSteps lstat,mkdir,mountUnlessMountPoint,setPermissions,mkdir,writeFile', 'isMountPoint', 'mount'],
    },
  ])('$case: the set-up is one host call for its file steps, the tmpfs included, split only at the fsGroup walk', async ({ emptyDir, fsGroup, calls }) => {
    const h = start()
    const seen: string[] = []
    h.host.intercept((call, next) => {
      if (call.method === 'fileSteps') seen.push(`fileSteps ${(call.args[0] as { op: string }[]).map((s) => s.op).join(',')}`)
      else if (['isMountPoint', 'mount'].includes(call.method) && call.path?.includes('empty-dir')) seen.push(call.method)
      return next()
    })
    await h.addPodAndWait(buildPod({ uid: 'a', volumes: [{ name: 'v', emptyDir }], fsGroup }))
    expect(seen).toEqual(calls)
    const dir = `${ROOT}/pods/a/volumes/kubernetes.io~empty-dir/v`
    expect(((await h.host.stat(dir))?.mode ?? 0) & 0o777).toBe(0o777)
    expect(h.host.exists(`${ROOT}/pods/a/plugins/kubernetes.io~empty-dir/v/ready`)).toBe(true)
  })

  it.each([{ medium: '' }, { medium: 'Memory' }])('a ready marker left without its volume (medium "$medium") is removed and the volume set up anew', async ({ medium }) => {
    const h = start()
    const plugin = `${ROOT}/pods/a/plugins/kubernetes.io~empty-dir/v`
    await h.host.mkdir(plugin, { recursive: true })
    await h.host.writeFile(`${plugin}/ready`, '')
    await h.host.writeFile(`${plugin}/fsgroup`, 'stale')
    await h.addPodAndWait(buildPod({ uid: 'a', volumes: [{ name: 'v', emptyDir: { medium } }] }))
    const dir = `${ROOT}/pods/a/volumes/kubernetes.io~empty-dir/v`
    expect(((await h.host.stat(dir))?.mode ?? 0) & 0o777).toBe(0o777)
    expect(podMounts(h.host).length).toBe(medium === 'Memory' ? 1 : 0)
    expect(await h.host.readdir(plugin)).toEqual(['ready'])
  })

  it('applies fsGroup: group, group rw and setgid on directories', async () => {
    const h = start()
    const pod = buildPod({ uid: 'a', volumes: [{ name: 'data', emptyDir: {} }], fsGroup: 2000 })
    await h.addPodAndWait(pod)
    const info = await h.host.stat(`${ROOT}/pods/a/volumes/kubernetes.io~empty-dir/data`)
    expect(info?.gid).toBe(2000)
    expect((info?.mode ?? 0) & 0o2000).toBe(0o2000)
  })
})

describe('hostPath', () => {
  const cases: { type: string; prepare?: (h: ReturnType<typeof scenario>) => Promise<void>; error?: string; made?: 'directory' | 'file' }[] = [
    { type: '', error: undefined },
    { type: 'DirectoryOrCreate', made: 'directory' },
    { type: 'Directory', error: 'hostPath type check failed: /srv/x is not a directory' },
    { type: 'FileOrCreate', prepare: (h) => h.host.mkdir('/srv', { recursive: true }), made: 'file' },
    { type: 'File', prepare: (h) => h.host.mkdir('/srv/x', { recursive: true }), error: 'hostPath type check failed: /srv/x is not a file' },
    { type: 'Socket', prepare: async (h) => h.host.mknod('/srv/x', 'socket') },
    { type: 'Socket', prepare: (h) => h.host.mkdir('/srv/x', { recursive: true }), error: 'hostPath type check failed: /srv/x is not a socket file' },
    { type: 'CharDevice', prepare: async (h) => h.host.mknod('/srv/x', 'char-device') },
    { type: 'BlockDevice', prepare: async (h) => h.host.mknod('/srv/x', 'char-device'), error: 'hostPath type check failed: /srv/x is not a block device' },
    { type: 'BlockDevice', prepare: async (h) => h.host.addBlockDevice('/srv/x', 1 << 20) },
    { type: 'FileOrCreate', prepare: (h) => h.host.symlink('/elsewhere/file', '/srv/x').catch(() => h.host.mkdir('/srv', { recursive: true }).then(() => h.host.symlink('/elsewhere/file', '/srv/x'))), error: 'hostPath type check failed: /srv/x is a dangling symbolic link' },
  ]
  it.each(cases)('type "$type" ($error)', async ({ type, prepare, error, made }) => {
    const h = start()
    await prepare?.(h)
    const pod = buildPod({ uid: 'a', volumes: [{ name: 'host', hostPath: { path: '/srv/x', type } }] })
    if (error) {
      h.pods.setPod(pod)
      await h.advanceUntil(() => failure(h) !== undefined)
      expect(failure(h)).toBe(`MountVolume.SetUp failed for volume "host" : ${error}`)
      expect(h.host.exists('/elsewhere/file')).toBe(false)
    } else {
      await h.addPodAndWait(pod)
      if (made) expect((await h.host.stat('/srv/x'))?.type).toBe(made)
      expect(h.manager.getMountedVolumesForPod('a').get('host')?.pluginName).toBe('kubernetes.io/host-path')
    }
  })

  it('refuses a path with ..', async () => {
    const h = start()
    h.pods.setPod(buildPod({ uid: 'a', volumes: [{ name: 'host', hostPath: { path: '/srv/../etc' } }] }))
    await h.advanceUntil(() => failure(h) !== undefined)
    expect(failure(h)).toContain("invalid HostPath `/srv/../etc`: must not contain '..'")
  })
})

function claimed(h: ReturnType<typeof scenario>, claim: string, pvSource: Record<string, unknown>, extra: { volumeMode?: 'Block' | 'Filesystem'; capacity?: string; mountOptions?: string[] } = {}) {
  const { pvc, pv } = buildClaim({ claim, pv: `pv-${claim}`, pvSource, volumeMode: extra.volumeMode, capacity: extra.capacity })
  h.objects.put('PersistentVolumeClaim', pvc)
  h.objects.put('PersistentVolume', extra.mountOptions ? { ...pv, spec: { ...pv.spec, mountOptions: extra.mountOptions } } : pv)
  return { pvc, pv }
}
const claimVolume = (name: string, claimName: string, readOnly = false): Volume => ({ name, persistentVolumeClaim: { claimName, readOnly } })

describe('local', () => {
  it('binds a local directory into the pod, read-only when the claim says so', async () => {
    const h = start()
    await h.host.mkdir('/mnt/disks/ssd1', { recursive: true })
    await h.host.writeFile('/mnt/disks/ssd1/hello', 'world')
    claimed(h, 'fast', { local: { path: '/mnt/disks/ssd1' } })
    await h.addPodAndWait(buildPod({ uid: 'a', volumes: [claimVolume('data', 'fast', true)] }))
    const dir = `${ROOT}/pods/a/volumes/kubernetes.io~local-volume/pv-fast`
    expect(text(await h.host.readFile(`${dir}/hello`))).toBe('world')
    await expect(h.host.writeFile(`${dir}/new`, 'x')).rejects.toMatchObject({ code: 'EROFS' })
    h.pods.deletePod('a')
    await h.manager.waitForIdle()
    expect(podMounts(h.host)).toEqual([])
    expect(text(await h.host.readFile('/mnt/disks/ssd1/hello'))).toBe('world')
  })

  it('formats a blank local device once, mounts it globally and binds it into each pod', async () => {
    const h = start()
    h.host.addBlockDevice('/dev/sdb', 64 << 20)
    claimed(h, 'dev', { local: { path: '/dev/sdb', fsType: 'ext4' } }, { mountOptions: ['noatime'] })
    await h.addPodAndWait(buildPod({ uid: 'a', volumes: [claimVolume('data', 'dev')] }))
    expect(await h.host.filesystems?.detect('/dev/sdb')).toBe('ext4')
    expect(podMounts(h.host).sort()).toEqual(['plugins/kubernetes.io/local-volume/mounts/pv-dev', 'pods/a/volumes/kubernetes.io~local-volume/pv-dev'])
    const global = (await h.host.mounts()).find((m) => m.target.endsWith('mounts/pv-dev'))
    expect(global?.options).toContain('noatime')
  })
})

describe('fileDisk', () => {
  const image = '/var/lib/images/disk1.img'
  const source = (fsType = 'ext4') => ({ csi: { driver: FILE_DISK_DRIVER, volumeHandle: image, fsType } })

  it('attaches the image, formats it once, mounts it and binds it; removal runs in reverse and keeps the data', async () => {
    const h = start()
    h.host.allocateFile(image, 64 << 20)
    claimed(h, 'disk', source())
    await h.addPodAndWait(buildPod({ uid: 'a', volumes: [claimVolume('data', 'disk')] }))
    const [loop] = (await h.host.loopDevices?.find(image)) ?? []
    expect(loop).toMatch(/^\/dev\/loop\d+$/)
    expect(await h.host.filesystems?.detect(loop as string)).toBe('ext4')
    const dir = `${ROOT}/pods/a/volumes/kubevol.io~file-disk/pv-disk`
    await h.host.writeFile(`${dir}/db`, 'rows')
    h.pods.deletePod('a')
    await h.manager.waitForIdle()
    expect(await h.host.loopDevices?.find(image)).toEqual([])
    expect(podMounts(h.host)).toEqual([])
    const done = h.operations.filter((o) => o.endedAt !== undefined && !o.error).map((o) => o.name)
    expect(done).toEqual(['volume_attach', 'volume_mount', 'volume_unmount', 'unmount_device', 'volume_detach'])

    await h.addPodAndWait(buildPod({ uid: 'b', volumes: [claimVolume('data', 'disk')] }))
    expect(text(await h.host.readFile(`${ROOT}/pods/b/volumes/kubevol.io~file-disk/pv-disk/db`))).toBe('rows')
  })

  it('never formats an image that already holds another file system', async () => {
    const h = start()
    h.host.allocateFile(image, 64 << 20)
    const loop = await h.host.loopDevices?.attach(image)
    await h.host.filesystems?.format(loop as string, 'xfs')
    await h.host.loopDevices?.detach(loop as string)
    claimed(h, 'disk', source('ext4'))
    h.pods.setPod(buildPod({ uid: 'a', volumes: [claimVolume('data', 'disk')] }))
    await h.advanceUntil(() => failure(h) !== undefined)
    expect(failure(h)).toContain('MountVolume.MountDevice failed for volume "pv-disk"')
    const [again] = (await h.host.loopDevices?.find(image)) ?? []
    expect(await h.host.filesystems?.detect(again as string)).toBe('xfs')
  })

  it('maps the loop device into the pod in block mode', async () => {
    const h = start()
    h.host.allocateFile(image, 16 << 20)
    claimed(h, 'raw', source(), { volumeMode: 'Block' })
    await h.addPodAndWait(buildPod({ uid: 'a', volumes: [claimVolume('raw', 'raw')], devices: ['raw'] }))
    const [loop] = (await h.host.loopDevices?.find(image)) ?? []
    expect(await h.host.readlink(`${ROOT}/pods/a/volumeDevices/kubevol.io~file-disk/pv-raw`)).toBe(loop)
    expect(await h.host.filesystems?.detect(loop as string)).toBeNull()
    h.pods.deletePod('a')
    await h.manager.waitForIdle()
    expect(await h.host.loopDevices?.find(image)).toEqual([])
  })

  it('grows the image, the loop device and the file system when the PV grows', async () => {
    const h = start()
    h.host.allocateFile(image, 64 << 20)
    const { pv } = claimed(h, 'disk', source(), { capacity: '64Mi' })
    const pod = buildPod({ uid: 'a', volumes: [claimVolume('data', 'disk')] })
    await h.addPodAndWait(pod)
    h.objects.put('PersistentVolume', { ...pv, spec: { ...pv.spec, capacity: { storage: '128Mi' } } })
    await h.addPodAndWait(pod)
    await h.advanceUntil(() => h.events.some((e) => e.reason === 'FileSystemResizeSuccessful'))
    const [loop] = (await h.host.loopDevices?.find(image)) ?? []
    expect((await h.host.stat(image))?.size).toBe(128 << 20)
    expect(await h.host.blockDevices?.size(loop as string)).toBe(128 << 20)
    const stats = await h.host.statfs?.(`${ROOT}/pods/a/volumes/kubevol.io~file-disk/pv-disk`)
    expect(stats?.capacityBytes).toBe(128 << 20)
  })
})

describe('subPath', () => {
  const pod = (subPath: { subPath?: string; subPathExpr?: string }, env: { name: string; value?: string; valueFrom?: unknown }[] = []) => {
    const base = buildPod({ uid: 'a', name: 'web', volumes: [{ name: 'data', emptyDir: {} }] })
    return {
      ...base,
      spec: { ...base.spec, containers: [{ name: 'main', env, volumeMounts: [{ name: 'data', mountPath: '/data', ...subPath }] }] },
    }
  }
  const volumeDir = `${ROOT}/pods/a/volumes/kubernetes.io~empty-dir/data`
  const target = `${ROOT}/pods/a/volume-subpaths/data/main/0`

  it('binds the sub directory for the container and removes the bind with the volume', async () => {
    const h = start()
    h.host.intercept(async (call, next) => {
      const result = await next()
      // Content a first container would have made: created as soon as the volume exists.
      if (call.method === 'writeFile' && String(call.path).endsWith('/ready')) {
        await h.host.mkdir(`${volumeDir}/logs`, { recursive: true }).catch(() => undefined)
      }
      return result
    })
    await h.addPodAndWait(pod({ subPath: 'logs' }))
    const entry = (await h.host.mounts()).find((m) => m.target === target)
    expect(entry?.root).toContain('logs')
    h.pods.deletePod('a')
    await h.manager.waitForIdle()
    expect(podMounts(h.host)).toEqual([])
    expect(h.host.exists(`${ROOT}/pods/a/volume-subpaths/data`)).toBe(false)
  })

  it('expands subPathExpr from the downward API environment', async () => {
    const h = start()
    h.host.intercept(async (call, next) => {
      const result = await next()
      if (call.method === 'writeFile' && String(call.path).endsWith('/ready')) await h.host.mkdir(`${volumeDir}/web`).catch(() => undefined)
      return result
    })
    await h.addPodAndWait(pod({ subPathExpr: '$(POD_NAME)' }, [{ name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }]))
    expect((await h.host.mounts()).some((m) => m.target === target)).toBe(true)
  })

  it.each([
    { name: 'an absolute symlink out of the volume', link: '/etc', subPath: 'escape', code: 'not within volume path' },
    { name: 'a relative symlink out of the volume', link: '../../../../../../../../../../etc', subPath: 'escape', code: 'not within volume path' },
  ])('refuses $name', async ({ link, subPath, code }) => {
    const h = start()
    await h.host.mkdir('/etc', { recursive: true })
    await h.host.writeFile('/etc/shadow', 'secret')
    h.host.intercept(async (call, next) => {
      const result = await next()
      if (call.method === 'writeFile' && String(call.path).endsWith('/ready')) {
        await h.host.mkdir(`${volumeDir}/inside`).catch(() => undefined)
        await h.host.symlink(link, `${volumeDir}/escape`).catch(() => undefined)
      }
      return result
    })
    h.pods.setPod(pod({ subPath }))
    await h.advanceUntil(() => failure(h) !== undefined)
    expect(failure(h)).toContain(code)
    expect((await h.host.mounts()).some((m) => m.target === target)).toBe(false)
  })

  it('follows a symlink that stays inside the volume', async () => {
    const h = start()
    h.host.intercept(async (call, next) => {
      const result = await next()
      if (call.method === 'writeFile' && String(call.path).endsWith('/ready')) {
        await h.host.mkdir(`${volumeDir}/inside`).catch(() => undefined)
        await h.host.symlink('inside', `${volumeDir}/alias`).catch(() => undefined)
      }
      return result
    })
    await h.addPodAndWait(pod({ subPath: 'alias' }))
    const entry = (await h.host.mounts()).find((m) => m.target === target)
    expect(entry?.root.endsWith('/inside')).toBe(true)
  })

  it.each([
    { subPath: '../../etc', reason: `subPath "../../etc" must not contain '..'` },
    { subPath: '/etc', reason: 'subPath "/etc" must be a relative path' },
  ])('rejects subPath $subPath before touching the host', async ({ subPath, reason }) => {
    const h = start()
    h.pods.setPod(pod({ subPath }))
    await h.advanceUntil(() => failure(h) !== undefined)
    expect(failure(h)).toBe(`MountVolume.SetUp failed for volume "data" : failed to prepare subPath for volumeMount "data" of container "main": ${reason}`)
  })
})

describe('SELinux, mount options, statistics', () => {
  it('mounts a ReadWriteOncePod fileDisk with the pod label when the host has SELinux', async () => {
    const clock = (await import('@kubevol/core/testing')).createFakeClock()
    const { createMemoryHost } = await import('@kubevol/adapter-mock')
    const host = createMemoryHost({ clock, selinux: true })
    const { createHarness } = await import('@kubevol/core/testing')
    const h = Object.assign(createHarness({ host, clock, plugins: createBuiltinPlugins() }), { host })
    current = h
    h.start()
    const image = '/var/lib/images/secure.img'
    host.allocateFile(image, 64 << 20)
    const { pvc, pv } = buildClaim({ claim: 'secure', pv: 'pv-secure', accessModes: ['ReadWriteOncePod'], pvSource: { csi: { driver: FILE_DISK_DRIVER, volumeHandle: image } } })
    h.objects.put('PersistentVolumeClaim', pvc)
    h.objects.put('PersistentVolume', pv)
    const base = buildPod({ uid: 'a', volumes: [claimVolume('data', 'secure')] })
    const pod = { ...base, spec: { ...base.spec, securityContext: { seLinuxOptions: { level: 's0:c1,c2' } } } }
    await h.addPodAndWait(pod)
    const global = (await host.mounts()).find((m) => m.target.endsWith('/mounts/pv-secure'))
    expect(global?.superOptions).toContain('context="system_u:object_r:container_file_t:s0:c1,c2"')
  })

  it('refuses mount options on a hostPath PV', async () => {
    const h = start()
    await h.host.mkdir('/srv/data', { recursive: true })
    claimed(h, 'hp', { hostPath: { path: '/srv/data' } }, { mountOptions: ['noatime'] })
    h.pods.setPod(buildPod({ uid: 'a', volumes: [claimVolume('data', 'hp')] }))
    await h.advanceUntil(() => failure(h) !== undefined)
    expect(failure(h)).toBe('MountVolume.MountOptionSupport check failed for volume "pv-hp" : mount options are not supported for this volume type')
  })

  it('maps a local block device into the pod', async () => {
    const h = start()
    h.host.addBlockDevice('/dev/sdc', 8 << 20)
    claimed(h, 'blk', { local: { path: '/dev/sdc' } }, { volumeMode: 'Block' })
    await h.addPodAndWait(buildPod({ uid: 'a', volumes: [claimVolume('blk', 'blk')], devices: ['blk'] }))
    expect(await h.host.readlink(`${ROOT}/pods/a/volumeDevices/kubernetes.io~local-volume/pv-blk`)).toBe('/dev/sdc')
    expect(podMounts(h.host)).toEqual(['plugins/kubernetes.io/local-volume/volumeDevices/pv-blk/a'])
    h.pods.deletePod('a')
    await h.manager.waitForIdle()
    expect(podMounts(h.host)).toEqual([])
  })

  it('reports usage per volume and warns once when a disk emptyDir exceeds its sizeLimit', async () => {
    const h = start()
    const pod = buildPod({ uid: 'a', volumes: [{ name: 'cache', emptyDir: { sizeLimit: '1Ki' } }, { name: 'shm', emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } }] })
    await h.addPodAndWait(pod)
    const dir = `${ROOT}/pods/a/volumes/kubernetes.io~empty-dir/cache`
    await h.host.writeFile(`${dir}/big`, new Uint8Array(4096))
    const stats = await h.manager.collectVolumeStats()
    const byName = new Map(stats.map((s) => [s.outerVolumeSpecName, s.stats]))
    expect(byName.get('cache')?.usedBytes).toBeGreaterThanOrEqual(4096)
    expect(byName.get('shm')?.capacityBytes).toBe(2 ** 20)
    await h.manager.collectVolumeStats()
    const warnings = h.events.filter((e) => e.reason === 'EmptyDirSizeLimitExceeded')
    expect(warnings.map((e) => e.message)).toEqual(['Usage of EmptyDir volume "cache" exceeds the limit "1Ki".'])
  })
})

describe('a busy unmount', () => {
  it('names the mounts below the volume that keep it busy, and leaves the volume possibly mounted', async () => {
    const h = start()
    await h.addPodAndWait(buildPod({ uid: 'a', volumes: [{ name: 'shm', emptyDir: { medium: 'Memory' } }] }))
    const dir = `${ROOT}/pods/a/volumes/kubernetes.io~empty-dir/shm`
    await h.host.mkdir(`${dir}/inner`)
    await h.host.mount({ source: 'tmpfs', target: `${dir}/inner`, fstype: 'tmpfs' })
    h.pods.deletePod('a')
    await h.advanceUntil(() => h.manager.executor.lastFailure('kubernetes.io/empty-dir/a-shm', 'a') !== undefined)
    const failure = h.manager.executor.lastFailure('kubernetes.io/empty-dir/a-shm', 'a')
    expect(String((failure?.error as Error | undefined)?.message)).toContain(`held by mounts [${dir}/inner]`)
    expect(h.manager.hasPossiblyMountedVolumesForPod('a')).toBe(true)
    await h.host.unmount(`${dir}/inner`)
    await h.advanceUntil(() => !h.manager.hasPossiblyMountedVolumesForPod('a'), { maxMs: 10_000 })
    expect(podMounts(h.host)).toEqual([])
  })
})
