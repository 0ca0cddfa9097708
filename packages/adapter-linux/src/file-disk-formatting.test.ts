/**
 * fileDisk's handle and its first mount on the real kernel, the whole manager with the built-in
 * plugins (issue 36, item 7): the image is opened with no symlink at any level (a symlinked
 * directory, `/proc/self/mem`) and refused otherwise; an existing ext4 filesystem is checked with
 * `fsck -a` before its first mount, as the kubelet's SafeFormatAndMount (errors fsck corrects:
 * mounted; errors it cannot correct, exit 4: the pod fails with mount-utils' text and nothing is
 * formatted); an image far larger than its PV's capacity is refused before anything is attached;
 * a pod deleted while its disk is formatted leaves no loop device attached.
 */
import { execFileSync, spawnSync } from 'node:child_process'
import { chmodSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type Pod, type VolumeEvent, createVolumeManager } from '@kubevol/core'
import { FILE_DISK_DRIVER, createBuiltinPlugins } from '@kubevol/core/plugins'
import { buildClaim, buildPod, createMemoryObjectReader, createMemoryPodSource } from '@kubevol/core/testing'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { describeAsRoot } from '../test/as-root.js'
import { type Harness, useLinuxHost } from '../test/harness.js'
import { parseMountInfo } from './mountinfo.js'

const MiB = 2 ** 20

async function until(check: () => boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out')
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** The loop devices the kernel says are backed by `image` (sysfs, not kubevol's own lookup). */
function loopsBackedBy(image: string): string[] {
  return readdirSync('/sys/block')
    .filter((name) => name.startsWith('loop'))
    .filter((name) => {
      try {
        return readFileSync(`/sys/block/${name}/loop/backing_file`, 'utf8').trim() === image
      } catch {
        return false
      }
    })
}

const mountsUnder = (root: string) => parseMountInfo(readFileSync('/proc/self/mountinfo', 'utf8')).filter((m) => m.target.startsWith(`${root}/`))

/** A 32 MiB ext4 image holding `canary`, its superblock state set with debugfs commands (made on a loop device and detached again). */
function ext4Image(path: string, debugfsCommands: readonly string[]): void {
  writeFileSync(path, '')
  execFileSync('truncate', ['-s', '32M', path])
  execFileSync('mkfs.ext4', ['-q', '-F', path])
  execFileSync('debugfs', ['-w', '-R', 'write /etc/hostname canary', path], { stdio: 'ignore' })
  const device = execFileSync('losetup', ['-f', '--show', path], { encoding: 'utf8' }).trim()
  try {
    for (const command of debugfsCommands) execFileSync('debugfs', ['-w', '-R', command, device], { stdio: 'ignore' })
  } finally {
    execFileSync('losetup', ['-d', device])
  }
}

/** The manager over the harness's host, with one fileDisk PV (and claim) per handle. */
function startManager(h: Harness, handles: Readonly<Record<string, { image: string; capacity?: string }>>) {
  const { host, p } = h
  const root = p('kubevol')
  const objects = createMemoryObjectReader()
  for (const [claim, { image, capacity }] of Object.entries(handles)) {
    const { pvc, pv } = buildClaim({ claim, pv: `pv-${claim}`, capacity, pvSource: { csi: { driver: FILE_DISK_DRIVER, volumeHandle: image, fsType: 'ext4' } } })
    objects.put('PersistentVolumeClaim', pvc)
    objects.put('PersistentVolume', pv)
  }
  const pods = createMemoryPodSource()
  const events: VolumeEvent[] = []
  const recorder = { event: (event: VolumeEvent) => events.push(event) }
  const manager = createVolumeManager({ host, plugins: createBuiltinPlugins(), podSource: pods, objects, nodeName: 'node-1', rootDir: root, controllerAttachDetach: false, recorder })
  const stop = new AbortController()
  const running = manager.run(stop.signal)
  const podOf = (claim: string): Pod => buildPod({ name: claim, uid: `uid-${claim}`, volumes: [{ name: 'data', persistentVolumeClaim: { claimName: claim } }] })
  const warnings = (claim: string) =>
    events
      .filter((e) => e.type === 'Warning' && e.target.metadata.uid === `uid-${claim}`)
      .map((e) => e.message)
      .join('\n')
  return {
    root,
    manager,
    pods,
    podOf,
    warnings,
    /** Deletes every pod, waits for kubevol's mounts and the images' loop devices to go, and stops the manager. */
    async shutdown(claims: readonly string[]) {
      for (const claim of claims) pods.deletePod(`uid-${claim}`)
      try {
        for (const claim of claims) await manager.waitForUnmount(podOf(claim), { timeoutMs: 30_000 })
        await until(() => mountsUnder(root).length === 0)
        await until(() => Object.values(handles).every(({ image }) => loopsBackedBy(image).length === 0))
      } finally {
        stop.abort()
        await running
      }
    },
  }
}

describeAsRoot('fileDisk handles and the first mount on the real kernel', () => {
  const h = useLinuxHost()

  it('a handle with a symlink at any level, or a /proc file, is refused and nothing is attached', async () => {
    const { p } = h()
    mkdirSync(p('images'))
    writeFileSync(p('images', 'disk.img'), '')
    execFileSync('truncate', ['-s', '32M', p('images', 'disk.img')])
    execFileSync('ln', ['-s', p('images'), p('linked')])
    const handles = {
      dir: { image: p('linked', 'disk.img') },
      self: { image: '/proc/self/mem' },
      pid: { image: `/proc/${process.pid}/mem` },
    }
    const m = startManager(h(), handles)
    try {
      for (const claim of Object.keys(handles)) m.pods.setPod(m.podOf(claim))
      await until(() => Object.keys(handles).every((claim) => m.warnings(claim) !== ''))
      expect(m.warnings('dir')).toContain(`${FILE_DISK_DRIVER} volumeHandle ${p('linked', 'disk.img')} has a symlink in its path`)
      expect(m.warnings('self')).toContain(`${FILE_DISK_DRIVER} volumeHandle /proc/self/mem has a symlink in its path`)
      expect(m.warnings('pid')).toContain(`${FILE_DISK_DRIVER} volumeHandle /proc/${process.pid}/mem is not a regular file`)
      expect(m.warnings('pid')).toContain('a file of proc, a kernel pseudo-filesystem')
      expect(loopsBackedBy(p('images', 'disk.img'))).toEqual([])
      const backing = execFileSync('losetup', ['--noheadings', '-l', '-O', 'BACK-FILE'], { encoding: 'utf8' })
      expect(backing).not.toMatch(/^\/proc\//m)
      expect(mountsUnder(m.root)).toEqual([])
    } finally {
      await m.shutdown(Object.keys(handles))
    }
  })

  it("a symlink where kubevol keeps its loop records is refused in its own words, not blamed on the handle, and nothing is attached", async () => {
    const { p } = h()
    writeFileSync(p('plain.img'), '')
    execFileSync('truncate', ['-s', '32M', p('plain.img')])
    mkdirSync(p('outside'))
    const records = p('kubevol', 'plugins', 'kubevol.io', 'file-disk', 'loops')
    mkdirSync(join(records, '..'), { recursive: true })
    execFileSync('ln', ['-s', p('outside'), records])
    const m = startManager(h(), { plain: { image: p('plain.img') } })
    try {
      m.pods.setPod(m.podOf('plain'))
      await until(() => m.warnings('plain') !== '')
      expect(m.warnings('plain')).toContain(`refusing to follow a symlink beneath the root: ${records} is a symlink`)
      expect(m.warnings('plain')).not.toContain('volumeHandle')
      expect(readdirSync(p('outside'))).toEqual([])
      expect(loopsBackedBy(p('plain.img'))).toEqual([])
    } finally {
      await m.shutdown(['plain'])
    }
  })

  it('an ext4 image with errors fsck -a corrects is checked before its first mount, then mounted with its data', async () => {
    const { p } = h()
    // Filesystem errors recorded in the superblock and 50 blocks marked free that are in use.
    ext4Image(p('fixable.img'), ['freeb 100 50', 'ssv state 2'])
    const before = spawnSync('e2fsck', ['-fn', p('fixable.img')], { encoding: 'utf8' })
    expect(before.status, before.stdout).toBe(4)
    const m = startManager(h(), { fixable: { image: p('fixable.img') } })
    try {
      m.pods.setPod(m.podOf('fixable'))
      await m.manager.waitForAttachAndMount(m.podOf('fixable'), { timeoutMs: 30_000 })
      const volume = `${m.root}/pods/uid-fixable/volumes/kubevol.io~file-disk/pv-fixable`
      expect(readFileSync(`${volume}/canary`, 'utf8')).toBe(readFileSync('/etc/hostname', 'utf8'))
      writeFileSync(`${volume}/written`, 'after the check')
    } finally {
      await m.shutdown(['fixable'])
    }
    const after = spawnSync('e2fsck', ['-fn', p('fixable.img')], { encoding: 'utf8' })
    expect(after.status, after.stdout).toBe(0)
  })

  it("an ext4 image with errors fsck -a cannot correct (exit 4) fails the pod with mount-utils' text; nothing is formatted or mounted", async () => {
    const { p } = h()
    // The root inode cleared and errors recorded: preen mode gives up.
    ext4Image(p('broken.img'), ['clri <2>', 'ssv state 2'])
    const before = readFileSync(p('broken.img'))
    const m = startManager(h(), { broken: { image: p('broken.img') } })
    try {
      m.pods.setPod(m.podOf('broken'))
      await until(() => m.warnings('broken').includes('could not correct them'))
      expect(m.warnings('broken')).toMatch(/'fsck' found errors on device \/dev\/loop\d+ but could not correct them: fsck from util-linux/)
      expect(m.warnings('broken')).toContain('UNEXPECTED INCONSISTENCY; RUN fsck MANUALLY')
      await expect(m.manager.waitForAttachAndMount(m.podOf('broken'), { timeoutMs: 500 })).rejects.toThrow(/unmounted volumes=\[data\], unattached volumes=\[\]/)
      expect(mountsUnder(m.root)).toEqual([])
    } finally {
      await m.shutdown(['broken'])
    }
    // Unchanged but for what e2fsck itself writes when it gives up: the superblock's write time,
    // its lifetime write counter and the superblock checksum over them.
    const after = readFileSync(p('broken.img'))
    expect(after.length).toBe(before.length)
    const superblock = 1024
    const changed = new Set<number>()
    for (let i = 0; i < before.length; i++) if (before[i] !== after[i]) changed.add(i)
    const fields: [offset: number, size: number][] = [
      [0x30, 4], // s_wtime
      [0x274, 1], // s_wtime_hi
      [0x178, 8], // s_kbytes_written
      [0x3fc, 4], // s_checksum
    ]
    const bookkeeping = (i: number) => fields.some(([offset, size]) => i >= superblock + offset && i < superblock + offset + size)
    expect([...changed].filter((i) => !bookkeeping(i))).toEqual([])
    const blkid = execFileSync('blkid', ['-p', '-s', 'TYPE', '-o', 'value', p('broken.img')], { encoding: 'utf8' }).trim()
    expect(blkid).toBe('ext4')
  })

  it("a sparse image far larger than its PV's capacity is refused before it is attached; one of the PV's size mounts", async () => {
    const { p } = h()
    writeFileSync(p('huge.img'), '')
    // The report's was 1 PiB; ext4, where the tests run, holds files up to 16 TiB.
    execFileSync('truncate', ['-s', '8T', p('huge.img')])
    writeFileSync(p('fits.img'), '')
    execFileSync('truncate', ['-s', '64M', p('fits.img')])
    const m = startManager(h(), { huge: { image: p('huge.img'), capacity: '64Mi' }, fits: { image: p('fits.img'), capacity: '64Mi' } })
    try {
      m.pods.setPod(m.podOf('huge'))
      m.pods.setPod(m.podOf('fits'))
      await until(() => m.warnings('huge') !== '')
      expect(m.warnings('huge')).toContain(
        `${FILE_DISK_DRIVER} volumeHandle ${p('huge.img')} is ${2 ** 43} bytes, far larger than the capacity of PersistentVolume pv-huge (${64 * MiB} bytes; at most ${80 * MiB + MiB} accepted)`,
      )
      await m.manager.waitForAttachAndMount(m.podOf('fits'), { timeoutMs: 30_000 })
      expect(loopsBackedBy(p('huge.img'))).toEqual([])
      // Nothing was written: the image holds no block.
      expect(statSync(p('huge.img')).blocks).toBe(0)
    } finally {
      await m.shutdown(['huge', 'fits'])
    }
  })

  it('leaves no loop device backed by the image when mkfs fills the filesystem holding the image', async () => {
    const { p } = h()
    // The image's filesystem: 16 MiB, and a sparse 1 GiB image on it (its PV says 1Gi).
    mkdirSync(p('small'))
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=16m', 'tmpfs', p('small')])
    writeFileSync(p('small', 'big.img'), '')
    execFileSync('truncate', ['-s', '1G', p('small', 'big.img')])
    const m = startManager(h(), { big: { image: p('small', 'big.img'), capacity: '1Gi' } })
    try {
      m.pods.setPod(m.podOf('big'))
      await until(() => m.warnings('big').includes('format of disk'), 60_000)
      expect(loopsBackedBy(p('small', 'big.img'))).toHaveLength(1)
    } finally {
      await m.shutdown(['big'])
    }
    expect(loopsBackedBy(p('small', 'big.img'))).toEqual([])
  })
})

describeAsRoot('fileDisk: a pod deleted while its disk is formatted', () => {
  // mkfs.ext4 first on the tools' PATH: it holds the device open as the real one does, says it
  // started, sleeps 3 s, then runs the real one.
  const bin = join(tmpdir(), `kubevol-slow-mkfs-${process.pid}`)
  const started = join(bin, 'started')
  const toolEnv = { ...process.env, PATH: `${bin}:${process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin'}` }
  beforeAll(() => {
    mkdirSync(bin, { recursive: true })
    writeFileSync(join(bin, 'mkfs.ext4'), `#!/bin/sh\nfor last; do :; done\nexec 3<"$last"\necho started > "${started}"\nsleep 3\nexec /usr/sbin/mkfs.ext4 "$@"\n`)
    chmodSync(join(bin, 'mkfs.ext4'), 0o755)
  })
  afterAll(() => rmSync(bin, { recursive: true, force: true }))

  describe.each([
    { name: 'mkfs finishes after the pod is gone', toolTimeoutMs: 60_000 },
    { name: "mkfs outlives the tool's deadline (left running)", toolTimeoutMs: 1_000 },
  ])('$name', ({ toolTimeoutMs }) => {
    const h = useLinuxHost({ toolEnv, toolTimeoutMs })
    it('leaves no loop device backed by the image once the manager settles', async () => {
      const { p } = h()
      writeFileSync(p('slow.img'), '')
      execFileSync('truncate', ['-s', '64M', p('slow.img')])
      rmSync(started, { force: true })
      const m = startManager(h(), { slow: { image: p('slow.img'), capacity: '64Mi' } })
      try {
        m.pods.setPod(m.podOf('slow'))
        await until(() => existsSync(started))
        expect(loopsBackedBy(p('slow.img'))).toHaveLength(1)
      } finally {
        // Deleted while mkfs runs; the shutdown waits, the manager running, until no loop device is backed by the image.
        await m.shutdown(['slow'])
      }
      expect(loopsBackedBy(p('slow.img'))).toEqual([])
      expect(mountsUnder(m.root)).toEqual([])
    })
  })
})
