/**
 * Crash-safe restart, enumerated: the manager is killed right before and right after every call
 * that changes the machine, in a pod's whole life (mount, then unmount), and a new manager starts
 * on the same host through reconstruction. Each run checks that it converges, that nothing leaks,
 * that nothing a pod wants is lost, and that nothing mounted was ever deleted.
 */
import { createMemoryHost } from '@kubevol/adapter-mock'
import type { Pod } from '@kubevol/core'
import { FILE_DISK_DRIVER, createBuiltinPlugins } from '@kubevol/core/plugins'
import { buildClaim, buildPod, createFakeClock, createHarness, type Harness } from '@kubevol/core/testing'
import { describe, expect, it } from 'vitest'

const MUTATING = new Set([
  'mkdir', 'writeFile', 'appendFile', 'rename', 'symlink', 'remove', 'removeAll', 'chmod', 'lchown', 'truncate',
  'mount', 'unmount', 'loopDevices.attach', 'loopDevices.detach', 'filesystems.format', 'subPaths.bind',
])
const IMAGE = '/var/lib/images/data.img'
const DB = '/var/lib/kubevol/pods/a/volumes/kubevol.io~file-disk/pv-data/db'

function world() {
  const clock = createFakeClock()
  const host = createMemoryHost({ clock })
  host.allocateFile(IMAGE, 32 << 20)
  return { clock, host }
}

function harness(w: ReturnType<typeof world>): Harness {
  const h = createHarness({ host: w.host, clock: w.clock, plugins: createBuiltinPlugins() })
  const { pvc, pv } = buildClaim({ claim: 'data', pv: 'pv-data', pvSource: { csi: { driver: FILE_DISK_DRIVER, volumeHandle: IMAGE, fsType: 'ext4' } } })
  h.objects.put('PersistentVolumeClaim', pvc)
  h.objects.put('PersistentVolume', pv)
  h.objects.put('ConfigMap', { metadata: { name: 'cfg', namespace: 'default' }, data: { k: 'v' } })
  return h
}

const pod: Pod = buildPod({
  uid: 'a',
  volumes: [
    { name: 'data', persistentVolumeClaim: { claimName: 'data' } },
    { name: 'shm', emptyDir: { medium: 'Memory' } },
    { name: 'cfg', configMap: { name: 'cfg' } },
    { name: 'scratch', emptyDir: {} },
  ],
})

async function settle(h: Harness): Promise<void> {
  // Long enough for a full backoff cycle of a step that failed once (0.5 s, 1 s, 2 s).
  for (let i = 0; i < 5; i++) {
    await h.manager.waitForIdle()
    await h.clock.advance(1_500)
  }
  await h.manager.waitForIdle()
}

/** The story: mount the pod, write data, delete the pod. Returns how many mutating calls it made. */
async function story(h: Harness, w: ReturnType<typeof world>, crashed: () => boolean): Promise<'mount' | 'unmount'> {
  h.start()
  h.pods.setPod(pod)
  await h.advanceUntil(() => crashed() || h.manager.getMountedVolumesForPod('a').size === 4, { maxMs: 5_000 })
  if (crashed()) return 'mount'
  await w.host.writeFile(DB, 'rows')
  h.pods.deletePod('a')
  await h.advanceUntil(() => crashed() || w.host.mountTargets().length === 0, { maxMs: 5_000 })
  if (!crashed()) await h.manager.waitForIdle()
  return 'unmount'
}

describe('crash at every step, then restart', () => {
  it('counts the steps of a clean run', async () => {
    const w = world()
    let calls = 0
    w.host.intercept((call, next) => {
      if (MUTATING.has(call.method)) calls++
      return next()
    })
    const h = harness(w)
    await story(h, w, () => false)
    await h.stop()
    expect(calls).toBeGreaterThan(20)
    expect(w.host.mountTargets()).toEqual([])
  })

  it('converges after a crash right before and right after each of them', async () => {
    // Count the steps first.
    const probe = world()
    let steps = 0
    probe.host.intercept((call, next) => {
      if (MUTATING.has(call.method) && !(call.path === DB && call.method === 'writeFile')) steps++
      return next()
    })
    const clean = harness(probe)
    await story(clean, probe, () => false)
    await clean.stop()

    const failures: string[] = []
    const only = process.env.KUBEVOL_CRASH_STEP ? Number(process.env.KUBEVOL_CRASH_STEP) : undefined
    const started = Date.now()
    for (let k = 1; k <= steps; k++) {
      if (only !== undefined && k !== only) continue
      if (process.env.KUBEVOL_CRASH_TRACE) console.log(`step ${k}`)
      for (const when of ['before', 'after'] as const) {
        const w = world()
        let seen = 0
        let dead = false
        const hang = new Promise<never>(() => {})
        const dispose = w.host.intercept(async (call, next) => {
          // The test's own write of the data is not the manager's step.
          if (call.path === DB && call.method === 'writeFile') return next()
          if (dead) return hang
          if (!MUTATING.has(call.method) || ++seen !== k) return next()
          dead = true
          if (when === 'after') await next()
          return hang
        })
        const trace = (m: string) => process.env.KUBEVOL_CRASH_TRACE && console.log(`  ${when} ${k}: ${m}`)
        const first = harness(w)
        const phase = await story(first, w, () => dead)
        trace(`story ended in ${phase}, dead=${dead}`)
        if (!dead) continue
        // The process is gone: let every live chain reach a host call and hang there, then stop its timers.
        await w.clock.flush()
        void first.stop()
        await w.clock.flush()
        dispose()

        const wantsPod = phase === 'mount'
        const second = harness(w)
        if (wantsPod) second.pods.setPod(pod)
        second.start()
        trace('restarted')
        await settle(second)
        trace('settled')
        const label = `crash ${when} step ${k} (${phase})`
        const mounted = second.manager.getMountedVolumesForPod('a').size
        if (wantsPod && mounted !== 4) {
          const missing = ['data', 'shm', 'cfg', 'scratch'].filter((n) => !second.manager.getMountedVolumesForPod('a').has(n))
          const errors = second.events.filter((e) => e.type === 'Warning').map((e) => e.message)
          failures.push(`${label}: ${mounted} of 4 volumes mounted, missing ${missing.join(',')}; ${[...new Set(errors)].join(' | ')}`)
        }
        if (!wantsPod) {
          if (w.host.mountTargets().length > 0) failures.push(`${label}: leaked mounts ${w.host.mountTargets().join(', ')}`)
          const loops = (await w.host.loopDevices?.find(IMAGE)) ?? []
          if (loops.length > 0) failures.push(`${label}: leaked loop device ${loops.join(', ')}`)
          // The data survives: the next pod sees what was written before the crash.
          second.pods.setPod(pod)
          await settle(second)
          const db = await w.host.readFile(DB).then((b) => new TextDecoder().decode(b), () => 'missing')
          if (db !== 'rows') failures.push(`${label}: data lost (${db})`)
        }
        if (w.host.violations.length > 0) failures.push(`${label}: ${w.host.violations.map((v) => v.message).join('; ')}`)
        await second.stop()
      }
    }
    console.log(`crash points: ${steps} steps × 2, ${Date.now() - started} ms`)
    expect(failures).toEqual([])
  }, 300_000)
})
