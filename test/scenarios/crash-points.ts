/**
 * Crash points, enumerated (crash-restart.test.ts, crash-unsynced-journal.test.ts): a pod's whole
 * life on a memory host (mount, a write into one of its volumes, unmount), the manager killed right
 * before and right after each call that changes the machine, and the world it leaves handed over to
 * be restarted and checked.
 */
import { createMemoryHost, type MemoryHost } from '@kubevol/adapter-mock'
import type { Pod } from '@kubevol/core'
import { FILE_DISK_DRIVER, createBuiltinPlugins } from '@kubevol/core/plugins'
import { buildClaim, buildPod, createFakeClock, createHarness, type FakeClock, type Harness, type HarnessOptions } from '@kubevol/core/testing'

/** The host calls that change the machine: each is a crash point. */
export const MUTATING = new Set([
  'mkdir', 'writeFile', 'appendFile', 'rename', 'symlink', 'remove', 'removeAll', 'chmod', 'lchown', 'truncate',
  'mount', 'unmount', 'loopDevices.attach', 'loopDevices.detach', 'filesystems.format', 'subPaths.bind',
])
/** The disk image behind the file-disk volume `data` (claim `data`, PV `pv-data`). */
export const IMAGE = '/var/lib/images/data.img'

/** A pod of every kind: a file-disk claim, a memory and a disk emptyDir, a ConfigMap. */
export const EVERY_KIND_POD: Pod = buildPod({
  uid: 'a',
  volumes: [
    { name: 'data', persistentVolumeClaim: { claimName: 'data' } },
    { name: 'shm', emptyDir: { medium: 'Memory' } },
    { name: 'cfg', configMap: { name: 'cfg' } },
    { name: 'scratch', emptyDir: {} },
  ],
})

export interface CrashWorld {
  readonly clock: FakeClock
  readonly host: MemoryHost
}

/** A fresh host with the disk image. */
export function crashWorld(): CrashWorld {
  const clock = createFakeClock()
  const host = createMemoryHost({ clock })
  host.allocateFile(IMAGE, 32 << 20)
  return { clock, host }
}

/** A manager on `w` with every built-in plugin and the objects the pods name (the claim `data`, the ConfigMap `cfg`, the Secret `sec`). */
export function crashHarness(w: CrashWorld, manager?: HarnessOptions['manager']): Harness {
  const h = createHarness({ host: w.host, clock: w.clock, plugins: createBuiltinPlugins(), ...(manager ? { manager } : {}) })
  const { pvc, pv } = buildClaim({ claim: 'data', pv: 'pv-data', pvSource: { csi: { driver: FILE_DISK_DRIVER, volumeHandle: IMAGE, fsType: 'ext4' } } })
  h.objects.put('PersistentVolumeClaim', pvc)
  h.objects.put('PersistentVolume', pv)
  h.objects.put('ConfigMap', { metadata: { name: 'cfg', namespace: 'default' }, data: { k: 'v' } })
  h.objects.put('Secret', { metadata: { name: 'sec', namespace: 'default' }, stringData: { password: 'p' } })
  return h
}

/** Long enough for a full backoff cycle of a step that failed once (0.5 s, 1 s, 2 s). */
export async function settle(h: Harness): Promise<void> {
  for (let i = 0; i < 5; i++) {
    await h.manager.waitForIdle()
    await h.clock.advance(1_500)
  }
  await h.manager.waitForIdle()
}

/** Where a crash was, and where the story ended. */
interface CrashPoint {
  readonly when: 'before' | 'after'
  readonly step: number
  readonly phase: 'mount' | 'unmount'
  readonly label: string
}

export interface CrashPointsOptions<W extends CrashWorld> {
  readonly world: () => W
  readonly pod: Pod
  /** A file the test writes into a mounted volume of the pod (not a crash point). */
  readonly data: string
  /** Only this step (1-based), for tracing one. */
  readonly only?: number
  readonly trace?: boolean
  /** Restarts on the world a crash left (a new manager; the first one is stopped) and checks it. */
  readonly restart: (w: W, crash: CrashPoint) => Promise<void>
}

/** The story: mount the pod, write the data, delete the pod; where it ended (a crash stops it). */
async function story(h: Harness, w: CrashWorld, pod: Pod, data: string, crashed: () => boolean): Promise<'mount' | 'unmount'> {
  const volumes = pod.spec?.volumes?.length ?? 0
  h.start()
  h.pods.setPod(pod)
  await h.advanceUntil(() => crashed() || h.manager.getMountedVolumesForPod(pod.metadata.uid ?? '').size === volumes, { maxMs: 5_000 })
  if (crashed()) return 'mount'
  await w.host.writeFile(data, 'rows')
  h.pods.deletePod(pod.metadata.uid ?? '')
  await h.advanceUntil(() => crashed() || w.host.mountTargets().length === 0, { maxMs: 5_000 })
  if (!crashed()) await h.manager.waitForIdle()
  return 'unmount'
}

/**
 * Counts the mutating calls of a clean run of the story, then for each, right before and right
 * after it, runs the story on a new world whose manager dies at that call (it and every later call
 * hang), stops it, and calls `restart`. Returns the number of steps.
 */
export async function forEachCrashPoint<W extends CrashWorld>(options: CrashPointsOptions<W>): Promise<number> {
  const { pod, data } = options
  const isData = (call: { method: string; path?: string }) => call.path === data && call.method === 'writeFile'
  const probe = options.world()
  let steps = 0
  probe.host.intercept((call, next) => {
    if (MUTATING.has(call.method) && !isData(call)) steps++
    return next()
  })
  const clean = crashHarness(probe)
  await story(clean, probe, pod, data, () => false)
  await clean.stop()

  for (let step = 1; step <= steps; step++) {
    if (options.only !== undefined && step !== options.only) continue
    for (const when of ['before', 'after'] as const) {
      const w = options.world()
      let seen = 0
      let dead = false
      const hang = new Promise<never>(() => {})
      const dispose = w.host.intercept(async (call, next) => {
        if (isData(call)) return next()
        if (dead) return hang
        if (!MUTATING.has(call.method) || ++seen !== step) return next()
        dead = true
        if (when === 'after') await next()
        return hang
      })
      const first = crashHarness(w)
      const phase = await story(first, w, pod, data, () => dead)
      if (options.trace) console.log(`  ${when} ${step}: story ended in ${phase}, dead=${dead}`)
      if (!dead) continue
      // The process is gone: let every live chain reach a host call and hang there, then stop its timers.
      await w.clock.flush()
      void first.stop()
      await w.clock.flush()
      dispose()
      await options.restart(w, { when, step, phase, label: `crash ${when} step ${step} (${phase})` })
    }
  }
  return steps
}
