/**
 * Tear-down, reconstruction and orphan cleanup never delete through a mount or a symlink, and cope
 * with a mount whose filesystem no longer answers (on the memory host; the same stories run on the
 * real kernel in adapter-linux's teardown-safety test).
 */
import { createMemoryHost } from '@kubevol/adapter-mock'
import { type Logger, type Pod, HostError } from '@kubevol/core'
import { cleanupMountPoint, createBuiltinPlugins } from '@kubevol/core/plugins'
import { buildPod, createFakeClock, createHarness, fakeVolume, type Harness } from '@kubevol/core/testing'
import { afterEach, describe, expect, it } from 'vitest'
import { watchCalls } from './setup.js'

const ROOT = '/var/lib/kubevol'
const OUTSIDE = '/srv/elsewhere'

let current: (Harness & { host: ReturnType<typeof createMemoryHost> }) | undefined
function start(host = createMemoryHost({ clock: createFakeClock() })) {
  const clock = createFakeClock()
  const h = Object.assign(createHarness({ host, clock, plugins: createBuiltinPlugins() }), { host })
  current = h
  h.start()
  return h
}
afterEach(async () => {
  await current?.stop()
  current = undefined
})

const text = async (host: ReturnType<typeof createMemoryHost>, path: string) => new TextDecoder().decode(await host.readFile(path))

/** Canary files outside the root, checked by content. */
async function plantCanaries(host: ReturnType<typeof createMemoryHost>, dir: string): Promise<void> {
  await host.mkdir(dir, { recursive: true })
  await host.writeFile(`${dir}/canary`, `canary of ${dir}`)
  await host.mkdir(`${dir}/sub`)
  await host.writeFile(`${dir}/sub/deep`, 'deep canary')
}
async function expectCanaries(host: ReturnType<typeof createMemoryHost>, dir: string): Promise<void> {
  expect(await text(host, `${dir}/canary`)).toBe(`canary of ${dir}`)
  expect(await text(host, `${dir}/sub/deep`)).toBe('deep canary')
}

function subPathPod(): Pod {
  const base = buildPod({ uid: 'a', volumes: [{ name: 'host', hostPath: { path: '/srv/host', type: 'Directory' } }] })
  return { ...base, spec: { ...base.spec, containers: [{ name: 'main', volumeMounts: [{ name: 'host', mountPath: '/data', subPath: 'data' }] }] } }
}

describe('subPath cleanup', () => {
  const index = `${ROOT}/pods/a/volume-subpaths/host/main/0`
  /** A node with hostPath data, canaries outside the root, and the subPath pod mounted. */
  async function subPathNode() {
    const host = createMemoryHost({ clock: createFakeClock() })
    await host.mkdir('/srv/host/data', { recursive: true })
    await host.writeFile('/srv/host/data/keep', 'hostPath data')
    await plantCanaries(host, OUTSIDE)
    const h = start(host)
    await h.addPodAndWait(subPathPod())
    return { host, h }
  }

  it('volume-subpaths moved aside with a bind in it and a symlink put in its place: the tear-down waits, and finishes once it is back', async () => {
    const { host, h } = await subPathNode()
    const subPaths = `${ROOT}/pods/a/volume-subpaths`
    await host.rename(subPaths, `${subPaths}.aside`)
    await host.symlink(OUTSIDE, subPaths)
    h.pods.deletePod('a')
    await h.clock.advance(5_000)
    await h.manager.waitForIdle()
    // The bind is still mounted (at the name it was moved to): not forgotten, not torn down around.
    expect(host.mountTargets()).toContain(`${subPaths}.aside/host/main/0`)
    expect(h.manager.hasPossiblyMountedVolumesForPod('a')).toBe(true)
    await expectCanaries(host, OUTSIDE)
    await host.remove(subPaths)
    await host.rename(`${subPaths}.aside`, subPaths)
    await h.clock.advance(120_000)
    await h.manager.waitForIdle()
    expect(host.mountTargets().filter((t) => t.startsWith(`${ROOT}/pods/a`))).toEqual([])
    expect(h.manager.hasPossiblyMountedVolumesForPod('a')).toBe(false)
    expect(await text(host, '/srv/host/data/keep')).toBe('hostPath data')
  })

  it.each([1, 2])('never deletes through a bind stacked %i time(s) on a subPath bind', async (stacked) => {
    const { host, h } = await subPathNode()
    for (let i = 0; i < stacked; i++) await host.mount({ source: OUTSIDE, target: index, bind: true })
    h.pods.deletePod('a')
    // Each pass unmounts one bind and refuses while another is still there; retries finish it.
    await h.advanceUntil(() => !host.exists(`${ROOT}/pods/a/volume-subpaths/host`), { maxMs: 60_000 })
    expect(host.exists(`${ROOT}/pods/a/volume-subpaths/host`)).toBe(false)
    expect(host.mountTargets().filter((t) => t.startsWith(ROOT))).toEqual([])
    await expectCanaries(host, OUTSIDE)
    expect(await text(host, '/srv/host/data/keep')).toBe('hostPath data')
  })

  it('unlinks a symlink in place of a container directory or an index, never following it', async () => {
    const host = createMemoryHost({ clock: createFakeClock() })
    await host.mkdir('/srv/host/data', { recursive: true })
    await plantCanaries(host, OUTSIDE)
    const h = start(host)
    await h.addPodAndWait(subPathPod())
    await host.symlink(OUTSIDE, `${ROOT}/pods/a/volume-subpaths/host/other`)
    await host.symlink(`${OUTSIDE}/sub`, `${ROOT}/pods/a/volume-subpaths/host/main/7`)
    h.pods.deletePod('a')
    await h.advanceUntil(() => !host.exists(`${ROOT}/pods/a/volume-subpaths/host`), { maxMs: 10_000 })
    expect(host.exists(`${ROOT}/pods/a/volume-subpaths/host`)).toBe(false)
    await expectCanaries(host, OUTSIDE)
  })
})

describe('a final mount failure on a missing target', () => {
  it('is final: nothing was mounted, so nothing is torn down', async () => {
    const h = start()
    const tornDown: string[] = []
    h.plugin.intercept(async (call, next) => {
      if (call.step === 'tearDown') tornDown.push(call.volume)
      await next()
    })
    h.plugin.fail('setUp', { message: 'disk not ready' })
    const pod = buildPod({ uid: 'a', volumes: [fakeVolume('data')] })
    h.pods.setPod(pod)
    await h.clock.advance(3_000)
    expect(h.manager.hasPossiblyMountedVolumesForPod('a')).toBe(false)
    h.pods.deletePod('a')
    await h.clock.advance(3_000)
    expect(tornDown).toEqual([])
  })
})

describe('symlinks in the pods directory', () => {
  /** A pod-shaped tree outside the root with data in an emptyDir, and links into it from the root. */
  async function victim(host: ReturnType<typeof createMemoryHost>): Promise<void> {
    await plantCanaries(host, `${OUTSIDE}/volumes/kubernetes.io~empty-dir/cache`)
    await host.mkdir(`${OUTSIDE}/plugins/kubernetes.io~empty-dir/cache`, { recursive: true })
    await host.writeFile(`${OUTSIDE}/plugins/kubernetes.io~empty-dir/cache/ready`, '')
    await host.mkdir(`${ROOT}/pods`, { recursive: true })
  }
  const links: [string, (host: ReturnType<typeof createMemoryHost>) => Promise<void>][] = [
    ['a pod directory', (host) => host.symlink(OUTSIDE, `${ROOT}/pods/od`)],
    [
      'a volumes directory',
      async (host) => {
        await host.mkdir(`${ROOT}/pods/od`)
        await host.symlink(`${OUTSIDE}/volumes`, `${ROOT}/pods/od/volumes`)
      },
    ],
    [
      'a plugin directory',
      async (host) => {
        await host.mkdir(`${ROOT}/pods/od/volumes`, { recursive: true })
        await host.symlink(`${OUTSIDE}/volumes/kubernetes.io~empty-dir`, `${ROOT}/pods/od/volumes/kubernetes.io~empty-dir`)
      },
    ],
    [
      'a volume directory',
      async (host) => {
        await host.mkdir(`${ROOT}/pods/od/volumes/kubernetes.io~empty-dir`, { recursive: true })
        await host.symlink(`${OUTSIDE}/volumes/kubernetes.io~empty-dir/cache`, `${ROOT}/pods/od/volumes/kubernetes.io~empty-dir/cache`)
      },
    ],
  ]

  it.each(links)('a symlink in place of %s is neither reconstructed nor removed through', async (_, link) => {
    const host = createMemoryHost({ clock: createFakeClock() })
    await victim(host)
    await link(host)
    const h = start(host)
    await h.clock.advance(5_000)
    await h.manager.waitForIdle()
    expect(h.manager.hasPossiblyMountedVolumesForPod('od')).toBe(false)
    const report = await h.manager.cleanupOrphanedPods()
    expect(report.removed).toEqual([])
    expect(report.refused.map((r) => r.pod)).toEqual(['od'])
    expect(report.refused[0]?.reason).toMatch(/symlink/)
    await expectCanaries(host, `${OUTSIDE}/volumes/kubernetes.io~empty-dir/cache`)
    expect(host.exists(`${OUTSIDE}/plugins/kubernetes.io~empty-dir/cache/ready`)).toBe(true)
  })
})

describe("a memory emptyDir's tear-down", () => {
  const DIR = `${ROOT}/pods/a/volumes/kubernetes.io~empty-dir/cache`
  const pod = buildPod({ uid: 'a', volumes: [{ name: 'cache', emptyDir: { medium: 'Memory' } }] })
  /**
   * The tear-down's calls about the volume's directory, by method. `inner: false` leaves out the
   * calls the memory host makes inside a removeUnmounted (with an interceptor set it makes the
   * check, unmount and remove of its last path as calls of their own, so each is a crash point).
   */
  function callsAbout(host: ReturnType<typeof createMemoryHost>, path: string, { inner = true } = {}): string[] {
    const seen: string[] = []
    watchCalls(host, (call, outer) => {
      if ((inner || outer) && (call.path === path || (call.method === 'removeUnmounted' && (call.args[0] as string[]).includes(path)))) seen.push(call.method)
    })
    return seen
  }

  it('is one host call: the marker, its directory, and the volume’s directory with its tmpfs unmounted first', async () => {
    const host = createMemoryHost({ clock: createFakeClock() })
    const h = start(host)
    await h.addPodAndWait(pod)
    expect(host.mountTargets()).toContain(DIR)
    const asked: unknown[] = []
    host.intercept((call, next) => {
      if (call.method === 'removeUnmounted') asked.push(call.args[1])
      return next()
    })
    const seen = callsAbout(host, DIR, { inner: false })
    h.pods.deletePod('a')
    await h.advanceUntil(() => !host.exists(DIR), { maxMs: 10_000 })
    expect(host.mountTargets()).not.toContain(DIR)
    expect(seen).toEqual(['removeUnmounted'])
    expect(asked).toEqual([{ unmountLast: true }])
  })

  it('a mount stacked on its tmpfs: one unmount an attempt, the stacked source kept, the tmpfs unmounted by a retry', async () => {
    const host = createMemoryHost({ clock: createFakeClock() })
    const h = start(host)
    await h.addPodAndWait(pod)
    await host.mkdir('/outside', { recursive: true })
    await host.writeFile('/outside/canary', 'keep me')
    await host.mount({ source: '/outside', target: DIR, bind: true })
    const seen = callsAbout(host, DIR)
    h.pods.deletePod('a')
    await h.advanceUntil(() => seen.includes('unmount'), { maxMs: 10_000 })
    await h.manager.waitForIdle()
    // The first attempt: the bind on top unmounted, the tmpfs below found still mounted, nothing removed.
    expect(seen.filter((m) => m === 'unmount')).toHaveLength(1)
    expect(host.mountTargets()).toContain(DIR)
    await h.advanceUntil(() => !host.exists(DIR), { maxMs: 60_000 })
    expect(seen.filter((m) => m === 'unmount')).toHaveLength(2)
    expect(host.mountTargets()).toEqual([])
    expect(await host.readFile('/outside/canary')).toEqual(new TextEncoder().encode('keep me'))
    expect(host.violations).toEqual([])
  })

  it('looks again when the tmpfs its removal found is gone by the unmount, and still removes the directory', async () => {
    const host = createMemoryHost({ clock: createFakeClock() })
    const h = start(host)
    await h.addPodAndWait(pod)
    await host.writeFile(`${DIR}/on-tmpfs`, 'x')
    // Someone else unmounts it between the removal's refusal and the tear-down's unmount.
    let raced = false
    host.intercept(async (call, next) => {
      if (call.method === 'unmount' && call.path === DIR && !raced) {
        raced = true
        await host.unmount(DIR)
      }
      return next()
    })
    const seen = callsAbout(host, DIR)
    h.pods.deletePod('a')
    await h.advanceUntil(() => !host.exists(DIR), { maxMs: 10_000 })
    expect(host.exists(DIR)).toBe(false)
    expect(host.mountTargets()).toEqual([])
    // The unmount found nothing mounted (EINVAL), so the check was made after all.
    expect(seen).toContain('isMountPoint')
    expect(h.events.some((e) => e.type === 'Warning')).toBe(false)
  })
})

describe('a mount whose filesystem no longer answers', () => {
  /** What a dead FUSE daemon does: looking at the mount root fails (ENOTCONN, folded onto EIO) while it is mounted. */
  function breakMount(host: ReturnType<typeof createMemoryHost>, target: string): void {
    host.intercept(async (call, next) => {
      const looks = call.method === 'lstat' || call.method === 'stat' || call.method === 'isMountPoint' || call.method === 'readdir'
      if (looks && call.path === target && host.mountTargets().includes(target)) {
        throw new HostError('EIO', call.method === 'isMountPoint' ? 'statx' : call.method, target, 'ENOTCONN: transport endpoint is not connected')
      }
      return next()
    })
  }

  it('is unmounted and removed by the shared cleanup, and what it showed is kept', async () => {
    const host = createMemoryHost()
    await plantCanaries(host, '/srv/src')
    await host.mkdir('/mnt/vol', { recursive: true })
    await host.mount({ source: '/srv/src', target: '/mnt/vol', bind: true })
    breakMount(host, '/mnt/vol')
    await expect(host.lstat('/mnt/vol')).rejects.toThrow(/ENOTCONN/)
    await cleanupMountPoint(host, '/mnt/vol')
    expect(host.mountTargets()).toEqual([])
    expect(host.exists('/mnt/vol')).toBe(false)
    await expectCanaries(host, '/srv/src')
  })

  it('is torn down as an emptyDir volume', async () => {
    const host = createMemoryHost({ clock: createFakeClock() })
    await plantCanaries(host, '/srv/src')
    const h = start(host)
    const dir = `${ROOT}/pods/a/volumes/kubernetes.io~empty-dir/cache`
    await h.addPodAndWait(buildPod({ uid: 'a', volumes: [{ name: 'cache', emptyDir: {} }] }))
    await host.mount({ source: '/srv/src', target: dir, bind: true })
    breakMount(host, dir)
    h.pods.deletePod('a')
    await h.advanceUntil(() => !host.exists(dir), { maxMs: 10_000 })
    expect(host.exists(dir)).toBe(false)
    expect(host.mountTargets()).toEqual([])
    await expectCanaries(host, '/srv/src')
  })
})

describe('a pod directory swapped for a symlink', () => {
  const POD = `${ROOT}/pods/a`
  const EMPTY_DIR = 'volumes/kubernetes.io~empty-dir'
  /** A pod-shaped tree outside the root: emptyDir data, its ready marker and a subPath-shaped directory. */
  async function victim(host: ReturnType<typeof createMemoryHost>): Promise<void> {
    await plantCanaries(host, `${OUTSIDE}/${EMPTY_DIR}/cache`)
    await plantCanaries(host, `${OUTSIDE}/plugins/kubernetes.io~empty-dir/cache`)
    await host.writeFile(`${OUTSIDE}/plugins/kubernetes.io~empty-dir/cache/ready`, '')
    await plantCanaries(host, `${OUTSIDE}/volume-subpaths/cache/main`)
  }
  async function expectVictim(host: ReturnType<typeof createMemoryHost>): Promise<void> {
    await expectCanaries(host, `${OUTSIDE}/${EMPTY_DIR}/cache`)
    await expectCanaries(host, `${OUTSIDE}/plugins/kubernetes.io~empty-dir/cache`)
    expect(host.exists(`${OUTSIDE}/plugins/kubernetes.io~empty-dir/cache/ready`)).toBe(true)
    await expectCanaries(host, `${OUTSIDE}/volume-subpaths/cache/main`)
  }
  /** Moves `pods/a/<level>` away and links the same name to the victim's `<level>`. */
  async function swap(host: ReturnType<typeof createMemoryHost>, level: string): Promise<void> {
    const at = level ? `${POD}/${level}` : POD
    if (host.exists(at)) await host.rename(at, `${at}-moved`)
    else await host.mkdir(`${at}-moved`, { recursive: true })
    await host.symlink(level ? `${OUTSIDE}/${level}` : OUTSIDE, at)
  }
  function logged(): { logger: Logger; lines: string[] } {
    const lines: string[] = []
    const push = (message: string, fields?: object) => lines.push(`${message} ${JSON.stringify(fields ?? {})}`)
    return { logger: { debug: push, info: push, warn: push, error: push }, lines }
  }
  function cachePod(): Pod {
    const base = buildPod({ uid: 'a', volumes: [{ name: 'cache', emptyDir: {} }] })
    return { ...base, spec: { ...base.spec, containers: [{ name: 'main', volumeMounts: [{ name: 'cache', mountPath: '/c' }] }] } }
  }
  function startLogged(host: ReturnType<typeof createMemoryHost>, logger: Logger) {
    const h = Object.assign(createHarness({ host, clock: createFakeClock(), plugins: createBuiltinPlugins(), manager: { logger } }), { host })
    current = h
    h.start()
    return h
  }

  it.each(['', 'volumes', EMPTY_DIR])('while the agent is down (pods/a/%s): the journaled volume is skipped with a reason, nothing torn down through it', async (level) => {
    const host = createMemoryHost({ clock: createFakeClock() })
    await victim(host)
    const first = start(host)
    await first.addPodAndWait(cachePod())
    await first.stop()
    await swap(host, level)
    const { logger, lines } = logged()
    const h = startLogged(host, logger)
    await h.clock.advance(5_000)
    await h.manager.waitForIdle()
    await expectVictim(host)
    expect(h.manager.hasPossiblyMountedVolumesForPod('a')).toBe(false)
    const skips = lines.filter((l) => l.includes('not reconstructed'))
    expect(skips).toHaveLength(1)
    expect(skips[0]).toContain(`${level ? `${POD}/${level}` : POD} is a symlink`)
  })

  it('while the agent is down, a file in place of the pod directory: skipped, saying so', async () => {
    const host = createMemoryHost({ clock: createFakeClock() })
    const first = start(host)
    await first.addPodAndWait(cachePod())
    await first.stop()
    await host.rename(POD, `${POD}-moved`)
    await host.writeFile(POD, 'not a directory')
    const { logger, lines } = logged()
    const h = startLogged(host, logger)
    await h.clock.advance(5_000)
    expect(lines.filter((l) => l.includes('not reconstructed'))).toEqual([expect.stringContaining(`${POD} is a file`)])
    expect(await text(host, POD)).toBe('not a directory')
  })

  it.each(['', 'volumes', EMPTY_DIR, 'plugins'])(
    'while the agent runs (pods/a/%s): the host refuses the symlink, the tear-down removes nothing',
    async (level) => {
      const host = createMemoryHost({ clock: createFakeClock() })
      await victim(host)
      const { logger, lines } = logged()
      const h = startLogged(host, logger)
      await h.addPodAndWait(cachePod())
      await swap(host, level)
      h.pods.deletePod('a')
      await h.clock.advance(5_000)
      await h.manager.waitForIdle()
      await expectVictim(host)
      expect(h.manager.hasPossiblyMountedVolumesForPod('a')).toBe(true)
      const refusal = `refusing to follow a symlink beneath the root: ${level ? `${POD}/${level}` : POD} is a symlink`
      expect(lines.some((l) => l.includes('UnmountVolume.TearDown failed for volume') && l.includes(refusal)), lines.join('\n')).toBe(true)
    },
  )

  it('while the agent runs (pods/a/volume-subpaths): no subPath of kubevol is reachable there, so the volume is torn down and the link left', async () => {
    const host = createMemoryHost({ clock: createFakeClock() })
    await victim(host)
    const { logger, lines } = logged()
    const h = startLogged(host, logger)
    await h.addPodAndWait(cachePod())
    await swap(host, 'volume-subpaths')
    h.pods.deletePod('a')
    await h.clock.advance(5_000)
    await h.manager.waitForIdle()
    await expectVictim(host)
    expect(h.manager.hasPossiblyMountedVolumesForPod('a')).toBe(false)
    expect(lines.some((l) => l.includes('subPath mounts not cleaned: a symlink beneath the root is not followed'))).toBe(true)
    expect((await host.lstat(`${POD}/volume-subpaths`))?.type).toBe('symlink')
    expect(await host.lstat(`${POD}/${EMPTY_DIR}/cache`)).toBeNull()
  })
})
