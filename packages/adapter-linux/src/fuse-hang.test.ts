/**
 * A real FUSE filesystem whose daemon is stopped (bindfs, SIGSTOP): a call on it blocks in the
 * kernel. The Linux host must hold up only that filesystem's calls: calls elsewhere asked for in the
 * same batch (before and after the blocked one) and in later batches answer at once, calls on the
 * hung filesystem wait in its lane without taking a new worker each, and `/` is never quarantined.
 */
import { createVolumeManager } from '@kubevol/core'
import { createBuiltinPlugins } from '@kubevol/core/plugins'
import { buildPod, createMemoryObjectReader, createMemoryPodSource } from '@kubevol/core/testing'
import { expectHostError } from '@kubevol/core/testing/host-contract'
import { afterEach, expect, it, vi } from 'vitest'
import { describeAsRoot } from '../test/as-root.js'
import { useLinuxHost } from '../test/harness.js'
import { type StoppedFuse, startBindfs } from '../test/stopped-fuse.js'
import type { LinuxHost } from './linux-host.js'

const TIMEOUT_MS = 1500

/** The whole manager on `host` under `root`, running. */
function startManager(host: LinuxHost, root: string) {
  const pods = createMemoryPodSource()
  const manager = createVolumeManager({ host, plugins: createBuiltinPlugins(), podSource: pods, objects: createMemoryObjectReader(), nodeName: 'node-1', rootDir: root, controllerAttachDetach: false })
  const stop = new AbortController()
  return { pods, manager, stop, running: manager.run(stop.signal) }
}

describeAsRoot('a stopped FUSE daemon under the Linux host', () => {
  const h = useLinuxHost({ callTimeoutMs: TIMEOUT_MS })
  let fuse: StoppedFuse | undefined
  afterEach(async () => {
    fuse?.cleanup()
    fuse = undefined
    // The blocked calls return (ENOTCONN) once the daemon is gone.
    await vi.waitFor(() => expect(h().host.stalledCalls()).toEqual([]), { timeout: 5000 })
  })

  it('holds up only its own filesystem: other calls in the same and later batches answer at once, / is not quarantined', async () => {
    const { host, p } = h()
    await host.mkdir(p('src/data'), { recursive: true })
    await host.mkdir(p('mnt'))
    fuse = await startBindfs(p('src'), p('mnt'))
    const mnt = fuse.mountPoint
    // The host's mount table knows the FUSE mount (the key of its calls).
    expect((await host.mounts()).some((m) => m.target === mnt)).toBe(true)
    fuse.stop()

    const started = Date.now()
    // One batch: a call that finishes, the call that hangs, calls after it.
    const before = host.mkdir(p('before'))
    let hungSettled = false
    const hung = host.lstat(`${mnt}/data`).finally(() => {
      hungSettled = true
    })
    const after = Promise.all([host.lstat(p()), host.appendFile(p('journal'), 'one\n', { sync: true }), host.stat(p('nothing'))])
    await before
    expect(Date.now() - started).toBeLessThan(TIMEOUT_MS / 2)
    const [root, , missing] = await after
    expect(root?.type).toBe('directory')
    expect(missing).toBeNull()
    expect(Date.now() - started).toBeLessThan(TIMEOUT_MS / 2)

    // Later batches: more calls on the hung filesystem, each with calls elsewhere.
    const onHung = [1, 2, 3, 4, 5].map((i) => host.lstat(`${mnt}/data/new-${i}`).then(() => 'answered', (err: Error) => err))
    for (let round = 0; round < 5; round++) {
      const t = Date.now()
      await Promise.all([
        host.mkdir(p(`round-${round}`)),
        host.appendFile(p('journal'), `round ${round}\n`, { sync: true }),
        host.mount({ source: 'tmpfs', target: p(`round-${round}`), fstype: 'tmpfs' }),
      ])
      expect(await host.isMountPoint(p(`round-${round}`))).toBe(true)
      await host.unmount(p(`round-${round}`))
      expect(Date.now() - t).toBeLessThan(TIMEOUT_MS / 2)
    }
    expect(hungSettled).toBe(false)

    // The hung call times out and quarantines its filesystem, and only it.
    const error = await expectHostError(hung, 'ETIMEDOUT')
    expect(error.message).toBe(`ETIMEDOUT: lstat ${mnt}/data: no answer within ${TIMEOUT_MS} ms; the call is left to finish in the background`)
    // The calls that waited behind it were never made: they hold no thread and are not counted as stalled.
    for (const result of await Promise.all(onHung)) {
      expect(result).toBeInstanceOf(Error)
      expect((result as Error).message).toMatch(new RegExp(`^ETIMEDOUT: lstat ${mnt}/data/new-\\d: not made: it waited ${TIMEOUT_MS} ms behind lstat ${mnt}/data, blocked for \\d+ ms on the filesystem at ${mnt}$`))
    }
    expect(host.stalledCalls()).toEqual([expect.objectContaining({ syscall: 'lstat', path: `${mnt}/data`, key: mnt })])
    const t = Date.now()
    await expectHostError(host.lstat(`${mnt}/data`), 'ETIMEDOUT')
    expect(Date.now() - t).toBeLessThan(500)
    // Everything else still answers.
    await host.appendFile(p('journal'), 'after\n', { sync: true })
    expect(await host.readdir(p())).toContain('journal')
  })
  it('through the whole manager: a pod on the stopped filesystem waits with a clear error, a pod with an emptyDir mounts, the journal keeps working', async () => {
    const { host, p } = h()
    await host.mkdir(p('src/data'), { recursive: true })
    await host.mkdir(p('mnt'))
    fuse = await startBindfs(p('src'), p('mnt'))
    const mnt = fuse.mountPoint
    await host.mounts()
    fuse.stop()

    const root = p('kubevol')
    const { pods, manager, stop, running } = startManager(host, root)
    try {
      const onFuse = buildPod({ uid: 'on-fuse', name: 'on-fuse', volumes: [{ name: 'host', hostPath: { path: `${mnt}/data`, type: 'Directory' } }] })
      const plain = buildPod({ uid: 'plain', name: 'plain', volumes: [{ name: 'scratch', emptyDir: {} }] })
      pods.setPod(onFuse)
      pods.setPod(plain)
      const started = Date.now()
      await manager.waitForAttachAndMount(plain, { timeoutMs: TIMEOUT_MS })
      expect(Date.now() - started).toBeLessThan(TIMEOUT_MS)
      expect(manager.getMountedVolumesForPod('plain').has('scratch')).toBe(true)
      const waited = await manager.waitForAttachAndMount(onFuse, { timeoutMs: 3 * TIMEOUT_MS }).then(
        () => 'mounted',
        (err: Error) => err.message,
      )
      expect(waited).toMatch(/^unmounted volumes=\[host\], .*context deadline exceeded$/)
      const failure = manager.executor.lastFailure('kubernetes.io/host-path/on-fuse-host' as never, 'on-fuse' as never)
      expect((failure?.error as Error | undefined)?.message).toMatch(
        new RegExp(`^MountVolume\\.SetUp failed for volume "host" .*: ETIMEDOUT: stat ${mnt}/data: (the filesystem at ${mnt} is not answering|no answer within)`),
      )
      // The journal kept working: a third pod mounts and is torn down while the call hangs.
      const later = buildPod({ uid: 'later', name: 'later', volumes: [{ name: 'scratch', emptyDir: {} }] })
      pods.setPod(later)
      await manager.waitForAttachAndMount(later, { timeoutMs: TIMEOUT_MS })
      pods.deletePod('later')
      await manager.waitForUnmount(later, { timeoutMs: TIMEOUT_MS })
      // Only the stopped filesystem is held: nothing stalled anywhere else.
      expect(host.stalledCalls().length).toBeGreaterThan(0)
      expect(host.stalledCalls().filter((c) => c.key !== mnt)).toEqual([])
    } finally {
      stop.abort()
      await running
    }
  })

  it('a memory emptyDir with the stopped filesystem stacked on its tmpfs: torn down, and nothing on the disk beside it held up', async () => {
    const { host, p } = h()
    await host.mkdir(p('src'), { recursive: true })
    const root = p('kubevol')
    const { pods, manager, stop, running } = startManager(host, root)
    try {
      const memory = buildPod({ uid: 'mem', name: 'mem', volumes: [{ name: 'shm', emptyDir: { medium: 'Memory' } }] })
      pods.setPod(memory)
      await manager.waitForAttachAndMount(memory, { timeoutMs: 10 * TIMEOUT_MS })
      const dir = `${root}/pods/mem/volumes/kubernetes.io~empty-dir/shm`
      fuse = await startBindfs(p('src'), dir)
      await host.mounts()
      fuse.stop()
      pods.deletePod('mem')
      // Meanwhile a pod on the same disk mounts and goes, and the journal keeps working.
      const plain = buildPod({ uid: 'plain', name: 'plain', volumes: [{ name: 'scratch', emptyDir: {} }] })
      pods.setPod(plain)
      await manager.waitForAttachAndMount(plain, { timeoutMs: TIMEOUT_MS })
      pods.deletePod('plain')
      await manager.waitForUnmount(plain, { timeoutMs: TIMEOUT_MS })
      // Its statx (AT_STATX_DONT_SYNC) and unmount do not reach the stopped daemon: the FUSE layer
      // goes in the first attempt, the tmpfs below it in a retry.
      await vi.waitFor(async () => expect((await host.mounts()).filter((m) => m.target.startsWith(`${root}/`))).toEqual([]), { timeout: 10 * TIMEOUT_MS })
      // Whatever waited on the stopped filesystem was keyed to it alone.
      expect(host.stalledCalls().filter((c) => c.key !== dir)).toEqual([])
    } finally {
      stop.abort()
      await running
    }
  })
})
