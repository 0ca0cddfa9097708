/**
 * fileDisk on the in-memory host (issue 36, item 7): a handle with a symlink at any level, or a
 * /proc file, is refused; an image far larger than its PV's capacity is refused before it is
 * attached; a pod deleted while its disk is formatted leaves no loop device attached. (The
 * real-kernel side: packages/adapter-linux/src/file-disk-formatting.test.ts.)
 */
import { HostError, type Pod } from '@kubevol/core'
import { createBuiltinPlugins, FILE_DISK_DRIVER } from '@kubevol/core/plugins'
import { buildClaim, buildPod } from '@kubevol/core/testing'
import { afterEach, describe, expect, it } from 'vitest'
import { scenario } from './setup.js'

const MiB = 2 ** 20
const ROOT = '/var/lib/kubevol'

let current: ReturnType<typeof scenario> | undefined
afterEach(async () => {
  await current?.stop()
  current?.host.assertNoViolations()
  current = undefined
})

function start(handles: Readonly<Record<string, { image: string; capacity?: string }>>) {
  const h = scenario({ plugins: createBuiltinPlugins() })
  current = h
  for (const [claim, { image, capacity }] of Object.entries(handles)) {
    const { pvc, pv } = buildClaim({ claim, pv: `pv-${claim}`, capacity, pvSource: { csi: { driver: FILE_DISK_DRIVER, volumeHandle: image, fsType: 'ext4' } } })
    h.objects.put('PersistentVolumeClaim', pvc)
    h.objects.put('PersistentVolume', pv)
  }
  return h
}
const podOf = (claim: string): Pod => buildPod({ uid: `uid-${claim}`, volumes: [{ name: 'data', persistentVolumeClaim: { claimName: claim } }] })
const warning = (h: ReturnType<typeof scenario>, claim: string) =>
  h.events
    .filter((e) => e.type === 'Warning' && e.target.metadata.uid === `uid-${claim}`)
    .map((e) => e.message)
    .join('\n')
const attachedLoops = async (h: ReturnType<typeof scenario>, image: string) => (await h.host.loopDevices?.find(image)) ?? []

describe('fileDisk handles', () => {
  it('a symlink at any level of the handle, or a /proc file, is refused and nothing is attached', async () => {
    const h = start({
      dir: { image: '/var/lib/linked/disk.img' },
      up: { image: '/var/lib/images/sub/up/disk.img' },
      self: { image: '/proc/self/mem' },
      pid: { image: '/proc/1/mem' },
    })
    h.host.allocateFile('/var/lib/images/disk.img', 32 * MiB)
    await h.host.mkdir('/var/lib/images/sub')
    await h.host.symlink('/var/lib/images', '/var/lib/linked')
    await h.host.symlink('..', '/var/lib/images/sub/up')
    // What /proc holds on Linux: a regular file behind the magic link /proc/self.
    h.host.allocateFile('/proc/1/mem', 32 * MiB)
    await h.host.symlink('1', '/proc/self')
    h.start()
    for (const claim of ['dir', 'up', 'self', 'pid']) h.pods.setPod(podOf(claim))
    await h.advanceUntil(() => ['dir', 'up', 'self', 'pid'].every((claim) => warning(h, claim) !== ''))
    expect(warning(h, 'dir')).toContain(`${FILE_DISK_DRIVER} volumeHandle /var/lib/linked/disk.img has a symlink in its path`)
    expect(warning(h, 'up')).toContain(`${FILE_DISK_DRIVER} volumeHandle /var/lib/images/sub/up/disk.img has a symlink in its path`)
    expect(warning(h, 'self')).toContain(`${FILE_DISK_DRIVER} volumeHandle /proc/self/mem has a symlink in its path`)
    expect(warning(h, 'pid')).toContain(`${FILE_DISK_DRIVER} volumeHandle /proc/1/mem is not a regular file`)
    expect(await attachedLoops(h, '/var/lib/images/disk.img')).toEqual([])
    expect(await attachedLoops(h, '/proc/1/mem')).toEqual([])
    expect(h.host.mountTargets()).toEqual([])
  })

  it("an image far larger than its PV's capacity is refused before it is attached; one within the slack mounts", async () => {
    const h = start({ huge: { image: '/images/huge.img', capacity: '64Mi' }, fits: { image: '/images/fits.img', capacity: '64Mi' } })
    h.host.allocateFile('/images/huge.img', 2 ** 50)
    // The most a 64Mi PV accepts: its capacity, a quarter and 1 MiB.
    h.host.allocateFile('/images/fits.img', 81 * MiB)
    h.start()
    h.pods.setPod(podOf('huge'))
    await h.addPodAndWait(podOf('fits'))
    await h.advanceUntil(() => warning(h, 'huge') !== '')
    expect(warning(h, 'huge')).toContain(
      `${FILE_DISK_DRIVER} volumeHandle /images/huge.img is ${2 ** 50} bytes, far larger than the capacity of PersistentVolume pv-huge (${64 * MiB} bytes; at most ${81 * MiB} accepted): refusing to attach, format or mount it`,
    )
    expect(await attachedLoops(h, '/images/huge.img')).toEqual([])
    expect(await h.host.filesystems?.detect((await attachedLoops(h, '/images/fits.img'))[0] ?? '')).toBe('ext4')
  })

  it('an image grown past the capacity after its attach is refused before mkfs', async () => {
    const h = start({ disk: { image: '/images/disk.img', capacity: '64Mi' } })
    h.host.allocateFile('/images/disk.img', 64 * MiB)
    const sized = h.host.faults.hangOn({ method: 'blockDevices.size' })
    h.start()
    h.pods.setPod(podOf('disk'))
    await sized.reached()
    // Grown behind kubevol's back, and the loop device told: what mkfs would span is now 1 GiB.
    await h.host.truncate('/images/disk.img', 1024 * MiB)
    const [device] = await attachedLoops(h, '/images/disk.img')
    await h.host.loopDevices?.refreshCapacity(device ?? '')
    sized.release()
    await h.advanceUntil(() => warning(h, 'disk').includes('far larger'))
    expect(warning(h, 'disk')).toContain(`${FILE_DISK_DRIVER} volumeHandle /images/disk.img is attached as a loop device of ${1024 * MiB} bytes`)
    expect(await h.host.filesystems?.detect(device ?? '')).toBeNull()
  })
})

describe('fileDisk: a pod deleted while its disk is formatted', () => {
  it('leaves no loop device attached once mkfs ends', async () => {
    const h = start({ slow: { image: '/images/slow.img', capacity: '64Mi' } })
    h.host.allocateFile('/images/slow.img', 64 * MiB)
    const mkfs = h.host.faults.hangOn({ method: 'filesystems.format' })
    h.start()
    h.pods.setPod(podOf('slow'))
    await mkfs.reached()
    expect(await attachedLoops(h, '/images/slow.img')).toHaveLength(1)
    h.pods.deletePod('uid-slow')
    await h.advanceUntil(() => h.manager.getMountedVolumesForPod('uid-slow').size === 0)
    mkfs.release()
    const csiName = `kubernetes.io/csi/${FILE_DISK_DRIVER}^/images/slow.img`
    await h.advanceUntil(() => h.host.mountTargets().length === 0 && h.manager.actualState.getAttachedVolume(csiName) === undefined)
    await h.manager.waitForIdle()
    expect(await attachedLoops(h, '/images/slow.img')).toEqual([])
    expect(h.host.mountTargets()).toEqual([])
  })
})

describe('fileDisk: its global mount path refused (issue 36)', () => {
  it.each(['plugins/kubevol.io/file-disk/mounts', 'plugins/kubevol.io/file-disk/mounts/pv-held'])(
    'a symlink at %s: nothing mounted through it, and the loop device the device step attached is detached again',
    async (level) => {
      const h = start({ held: { image: '/images/held.img', capacity: '64Mi' } })
      h.host.allocateFile('/images/held.img', 64 * MiB)
      await h.host.mkdir('/outside', { recursive: true })
      await h.host.mkdir(`${ROOT}/${level.slice(0, level.lastIndexOf('/'))}`, { recursive: true })
      await h.host.symlink('/outside', `${ROOT}/${level}`)
      h.start()
      h.pods.setPod(podOf('held'))
      await h.advanceUntil(() => warning(h, 'held').includes('symlink'))
      h.pods.deletePod('uid-held')
      await h.advanceUntil(() => h.manager.actualState.getAttachedVolume(`kubernetes.io/csi/${FILE_DISK_DRIVER}^/images/held.img`) === undefined)
      await h.manager.waitForIdle()
      expect(await attachedLoops(h, '/images/held.img')).toEqual([])
      expect(h.host.mountTargets()).toEqual([])
      expect(await h.host.readdir('/outside')).toEqual([])
    },
  )
})

describe('fileDisk: a record that cannot be read for a moment', () => {
  it('fails the detach to be tried again, never leaves the loop device as not kubevol’s', async () => {
    const h = start({ rec: { image: '/images/rec.img', capacity: '64Mi' } })
    h.host.allocateFile('/images/rec.img', 64 * MiB)
    h.start()
    h.pods.setPod(podOf('rec'))
    await h.advanceUntil(() => h.host.mountTargets().length === 2)
    expect(await attachedLoops(h, '/images/rec.img')).toHaveLength(1)
    // The first read of its attach record fails as one through a level swapped for a symlink would.
    let failed = 0
    h.host.intercept(async (call, next) => {
      if (call.method === 'readFile' && call.path?.includes('/file-disk/loops/') && failed === 0) {
        failed++
        throw new HostError('ELOOP', 'open', call.path, 'refusing to follow a symlink beneath the root')
      }
      return next()
    })
    h.pods.deletePod('uid-rec')
    await h.advanceUntil(() => h.manager.actualState.getAttachedVolume(`kubernetes.io/csi/${FILE_DISK_DRIVER}^/images/rec.img`) === undefined)
    await h.manager.waitForIdle()
    expect(failed).toBe(1)
    expect(await attachedLoops(h, '/images/rec.img')).toEqual([])
  })
})
