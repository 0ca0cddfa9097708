/**
 * Tear-down, reconstruction and orphan cleanup on the real kernel never delete through a mount or a
 * symlink, and cope with a mount whose FUSE daemon was killed. Canary files outside kubevol's root
 * are checked by content after each story.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { lstatSync, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { type Pod, createVolumeManager } from '@kubevol/core'
import { cleanupMountPoint, createBuiltinPlugins } from '@kubevol/core/plugins'
import { removeUnmounted } from '@kubevol/core/host'
import { buildPod, createMemoryObjectReader, createMemoryPodSource } from '@kubevol/core/testing'
import { afterEach, describe, expect, it } from 'vitest'
import { describeAsRoot } from '../test/as-root.js'
import { useLinuxHost } from '../test/harness.js'
import type { LinuxHost } from './linux-host.js'
import { parseMountInfo } from './mountinfo.js'

const kernelMounts = (prefix: string) =>
  parseMountInfo(readFileSync('/proc/self/mountinfo', 'utf8'))
    .map((e) => e.target)
    .filter((t) => t === prefix || t.startsWith(`${prefix}/`))

function plantCanaries(dir: string): void {
  mkdirSync(`${dir}/sub`, { recursive: true })
  writeFileSync(`${dir}/canary`, `canary of ${dir}`)
  writeFileSync(`${dir}/sub/deep`, 'deep canary')
}
function expectCanaries(dir: string): void {
  expect(readFileSync(`${dir}/canary`, 'utf8')).toBe(`canary of ${dir}`)
  expect(readFileSync(`${dir}/sub/deep`, 'utf8')).toBe('deep canary')
}

async function until(check: () => boolean, ms = 20_000): Promise<boolean> {
  const deadline = Date.now() + ms
  while (!check() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
  return check()
}

/** True when something is at `path` (a dead mount point, which cannot be looked at, included). */
const exists = (path: string): boolean => {
  try {
    return lstatSync(path, { throwIfNoEntry: false }) !== undefined
  } catch {
    return true
  }
}

/** The volume manager on `host` under `root`, started; `restart` stops it and starts a new one (reconstruction). */
function manager(host: LinuxHost, root: string) {
  const pods = createMemoryPodSource()
  const options = { host, plugins: createBuiltinPlugins(), podSource: pods, objects: createMemoryObjectReader(), nodeName: 'node-1', rootDir: root, controllerAttachDetach: false }
  let vm = createVolumeManager(options)
  let stop = new AbortController()
  let running = vm.run(stop.signal)
  return {
    pods,
    get vm() {
      return vm
    },
    async restart() {
      stop.abort()
      await running
      vm = createVolumeManager(options)
      stop = new AbortController()
      running = vm.run(stop.signal)
    },
    async stop() {
      stop.abort()
      await running
    },
  }
}

/** A FUSE daemon (bindfs in the foreground) showing `source` at `target`. */
async function bindfs(source: string, target: string): Promise<ChildProcess> {
  const child = spawn('bindfs', ['-f', '--no-allow-other', source, target], { stdio: 'ignore' })
  daemons.push(child)
  if (!(await until(() => kernelMounts(target).includes(target), 10_000))) throw new Error(`bindfs did not mount ${target}`)
  return child
}
const daemons: ChildProcess[] = []
afterEach(() => {
  for (const child of daemons.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
})

/** Kills the daemon: the mount stays, and looking at it fails with ENOTCONN. */
async function killDaemon(child: ChildProcess, target: string): Promise<void> {
  const exited = new Promise((r) => child.once('exit', r))
  child.kill('SIGKILL')
  await exited
  let code: unknown
  try {
    statSync(target)
  } catch (err) {
    code = (err as NodeJS.ErrnoException).code
  }
  expect(code).toBe('ENOTCONN')
  expect(kernelMounts(target)).toEqual([target])
}

describeAsRoot('tear-down safety on the Linux host', () => {
  const h = useLinuxHost()

  function subPathPod(uid: string, hostDir: string): Pod {
    const base = buildPod({ uid, volumes: [{ name: 'host', hostPath: { path: hostDir, type: 'Directory' } }] })
    return { ...base, spec: { ...base.spec, containers: [{ name: 'main', volumeMounts: [{ name: 'host', mountPath: '/data', subPath: 'data' }] }] } }
  }

  it.each([
    { stacked: 1, restart: false },
    { stacked: 2, restart: false },
    { stacked: 2, restart: true },
  ])('subPath cleanup never deletes through $stacked bind(s) stacked on the subPath bind (restart: $restart)', async ({ stacked, restart }) => {
    const { host, p } = h()
    const root = p('kubevol')
    mkdirSync(p('shared/data'), { recursive: true })
    writeFileSync(p('shared/data/keep'), 'hostPath data')
    plantCanaries(p('other'))
    const m = manager(host, root)
    const pod = subPathPod('sp', p('shared'))
    m.pods.setPod(pod)
    await m.vm.waitForAttachAndMount(pod, { timeoutMs: 30_000 })
    const index = `${root}/pods/sp/volume-subpaths/host/main/0`
    expect(kernelMounts(index)).toEqual([index])
    for (let i = 0; i < stacked; i++) execFileSync('mount', ['--bind', p('other'), index])
    if (restart) {
      await m.restart()
      await m.vm.waitForAttachAndMount(pod, { timeoutMs: 30_000 })
    }
    m.pods.deletePod('sp')
    await m.vm.waitForUnmount(pod, { timeoutMs: 30_000 })
    // Each pass unmounts one bind and refuses while another is still there; the retries finish it.
    expect(await until(() => !exists(`${root}/pods/sp/volume-subpaths/host`))).toBe(true)
    expect(kernelMounts(root)).toEqual([])
    expectCanaries(p('other'))
    expect(readFileSync(p('shared/data/keep'), 'utf8')).toBe('hostPath data')
    await m.stop()
  })

  it.each([
    ['a pod directory', (root: string, target: string) => symlinkSync(target, `${root}/pods/od`)],
    [
      'a volumes directory',
      (root: string, target: string) => {
        mkdirSync(`${root}/pods/od`, { recursive: true })
        symlinkSync(`${target}/volumes`, `${root}/pods/od/volumes`)
      },
    ],
    [
      'a plugin directory',
      (root: string, target: string) => {
        mkdirSync(`${root}/pods/od/volumes`, { recursive: true })
        symlinkSync(`${target}/volumes/kubernetes.io~empty-dir`, `${root}/pods/od/volumes/kubernetes.io~empty-dir`)
      },
    ],
  ])('a symlink in place of %s is neither reconstructed and torn down nor removed through by gc', async (_, link) => {
    const { host, p } = h()
    const root = p('kubevol')
    const target = p('elsewhere')
    plantCanaries(`${target}/volumes/kubernetes.io~empty-dir/cache`)
    mkdirSync(`${target}/plugins/kubernetes.io~empty-dir/cache`, { recursive: true })
    writeFileSync(`${target}/plugins/kubernetes.io~empty-dir/cache/ready`, '')
    writeFileSync(`${target}/etc-hosts`, 'hosts canary')
    mkdirSync(`${root}/pods`, { recursive: true })
    link(root, target)
    const m = manager(host, root)
    expect(await until(() => m.vm.snapshot().statesSynced)).toBe(true)
    // A reconciler pass or two: a reconstructed volume would be torn down by now.
    await new Promise((r) => setTimeout(r, 1_000))
    expect(m.vm.hasPossiblyMountedVolumesForPod('od')).toBe(false)
    const report = await m.vm.cleanupOrphanedPods()
    expect(report.removed).toEqual([])
    expect(report.refused.map((r) => r.pod)).toEqual(['od'])
    expectCanaries(`${target}/volumes/kubernetes.io~empty-dir/cache`)
    expect(readFileSync(`${target}/plugins/kubernetes.io~empty-dir/cache/ready`, 'utf8')).toBe('')
    expect(readFileSync(`${target}/etc-hosts`, 'utf8')).toBe('hosts canary')
    await m.stop()
  })

  it('the shared cleanup unmounts a mount whose FUSE daemon was killed (ENOTCONN) and keeps its source', async () => {
    const { host, p } = h()
    plantCanaries(p('src'))
    mkdirSync(p('mnt'))
    await killDaemon(await bindfs(p('src'), p('mnt')), p('mnt'))
    await cleanupMountPoint(host, p('mnt'))
    expect(kernelMounts(p('mnt'))).toEqual([])
    expect(exists(p('mnt'))).toBe(false)
    expectCanaries(p('src'))
  })

  it('removeUnmounted refuses a dead FUSE mount as a mount point (EBUSY) and removes nothing', async () => {
    const { host, p } = h()
    plantCanaries(p('src'))
    mkdirSync(p('vol/mount'), { recursive: true })
    writeFileSync(p('vol/vol_data.json'), '{}')
    await killDaemon(await bindfs(p('src'), p('vol/mount')), p('vol/mount'))
    await expect(removeUnmounted(host, [p('vol/mount'), p('vol/vol_data.json'), p('vol')])).rejects.toMatchObject({ code: 'EBUSY' })
    expect(readFileSync(p('vol/vol_data.json'), 'utf8')).toBe('{}')
    expectCanaries(p('src'))
  })

  describe('a memory emptyDir (its tmpfs unmounted and its directory removed in one call)', () => {
    const memoryPod = buildPod({ uid: 'mem', volumes: [{ name: 'shm', emptyDir: { medium: 'Memory' } }] })
    /** The manager under `<p>/kubevol` with the memory pod mounted; `tearDown` deletes the pod and waits for its directory to go. */
    async function mounted(host: LinuxHost, p: (...parts: string[]) => string) {
      const root = p('kubevol')
      const m = manager(host, root)
      m.pods.setPod(memoryPod)
      await m.vm.waitForAttachAndMount(memoryPod, { timeoutMs: 30_000 })
      const dir = `${root}/pods/mem/volumes/kubernetes.io~empty-dir/shm`
      return {
        root,
        dir,
        async tearDown() {
          m.pods.deletePod('mem')
          await m.vm.waitForUnmount(memoryPod, { timeoutMs: 30_000 })
          expect(await until(() => !exists(dir))).toBe(true)
          expect(kernelMounts(root)).toEqual([])
          await m.stop()
        },
      }
    }

    it('with a bind of a directory outside stacked on its tmpfs: one layer an attempt, all gone in the end, the outside kept', async () => {
      const { host, p } = h()
      plantCanaries(p('outside'))
      const vol = await mounted(host, p)
      execFileSync('mount', ['--bind', p('outside'), vol.dir])
      expect(kernelMounts(vol.dir)).toEqual([vol.dir, vol.dir])
      await vol.tearDown()
      expectCanaries(p('outside'))
    })

    it('with a dead FUSE mount stacked on its tmpfs: torn down, the FUSE source kept', async () => {
      const { host, p } = h()
      plantCanaries(p('src'))
      const vol = await mounted(host, p)
      const daemon = spawn('bindfs', ['-f', '--no-allow-other', p('src'), vol.dir], { stdio: 'ignore' })
      daemons.push(daemon)
      expect(await until(() => kernelMounts(vol.dir).length === 2, 10_000)).toBe(true)
      const exited = new Promise((r) => daemon.once('exit', r))
      daemon.kill('SIGKILL')
      await exited
      await vol.tearDown()
      expectCanaries(p('src'))
    })

    it('swapped for a symlink to a mount point outside: only the link goes, the mount and what it shows stay', async () => {
      const { host, p } = h()
      const vol = await mounted(host, p)
      const dir = vol.dir
      mkdirSync(p('outside'))
      execFileSync('mount', ['-t', 'tmpfs', 'tmpfs', p('outside')])
      plantCanaries(p('outside'))
      // Its tmpfs gone by someone else's hand, and a link left in its place.
      execFileSync('umount', [dir])
      execFileSync('rmdir', [dir])
      symlinkSync(p('outside'), dir)
      await vol.tearDown()
      expect(kernelMounts(p('outside'))).toEqual([p('outside')])
      expectCanaries(p('outside'))
      execFileSync('umount', [p('outside')])
    })
  })

  it.each([
    { target: 'a directory', mountOutside: false },
    { target: 'a mount point', mountOutside: true },
  ])('an emptyDir on disk whose directory was swapped for a symlink to $target outside: only the link goes, what it points at stays', async ({ mountOutside }) => {
    const { host, p } = h()
    const root = p('kubevol')
    const m = manager(host, root)
    const pod = buildPod({ uid: 'sw', volumes: [{ name: 'cache', emptyDir: {} }] })
    m.pods.setPod(pod)
    await m.vm.waitForAttachAndMount(pod, { timeoutMs: 30_000 })
    const dir = `${root}/pods/sw/volumes/kubernetes.io~empty-dir/cache`
    mkdirSync(p('outside'))
    if (mountOutside) execFileSync('mount', ['-t', 'tmpfs', 'tmpfs', p('outside')])
    plantCanaries(p('outside'))
    // The tear-down's last removal (the volume's directory, with unmountLast) meets the link.
    execFileSync('rmdir', [dir])
    symlinkSync(p('outside'), dir)
    m.pods.deletePod('sw')
    await m.vm.waitForUnmount(pod, { timeoutMs: 30_000 })
    expect(await until(() => !exists(dir))).toBe(true)
    expectCanaries(p('outside'))
    expect(lstatSync(p('outside')).isDirectory()).toBe(true)
    expect(kernelMounts(p('outside'))).toEqual(mountOutside ? [p('outside')] : [])
    if (mountOutside) execFileSync('umount', [p('outside')])
    await m.stop()
  })

  it('an emptyDir whose directory holds a dead FUSE mount is torn down, and the FUSE source is kept', async () => {
    const { host, p } = h()
    const root = p('kubevol')
    plantCanaries(p('src'))
    const m = manager(host, root)
    const pod = buildPod({ uid: 'fu', volumes: [{ name: 'cache', emptyDir: {} }] })
    m.pods.setPod(pod)
    await m.vm.waitForAttachAndMount(pod, { timeoutMs: 30_000 })
    const dir = `${root}/pods/fu/volumes/kubernetes.io~empty-dir/cache`
    await killDaemon(await bindfs(p('src'), dir), dir)
    m.pods.deletePod('fu')
    await m.vm.waitForUnmount(pod, { timeoutMs: 30_000 })
    expect(await until(() => !exists(dir))).toBe(true)
    expect(kernelMounts(root)).toEqual([])
    expectCanaries(p('src'))
    await m.stop()
  })
})
