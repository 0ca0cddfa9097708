/**
 * Crash-safe restart, enumerated: the manager is killed right before and right after every call
 * that changes the machine, in a pod's whole life (mount, then unmount), and a new manager starts
 * on the same host through reconstruction. Each run checks that it converges, that nothing leaks,
 * that nothing a pod wants is lost, and that nothing mounted was ever deleted.
 */
import { describe, expect, it } from 'vitest'
import { EVERY_KIND_POD, IMAGE, MUTATING, crashHarness, crashWorld, forEachCrashPoint, settle } from './crash-points.js'

const DB = '/var/lib/kubevol/pods/a/volumes/kubevol.io~file-disk/pv-data/db'

const pod = EVERY_KIND_POD

describe('crash at every step, then restart', () => {
  it('counts the steps of a clean run', async () => {
    const w = crashWorld()
    let calls = 0
    w.host.intercept((call, next) => {
      if (MUTATING.has(call.method)) calls++
      return next()
    })
    const h = crashHarness(w)
    h.start()
    await h.addPodAndWait(pod)
    h.pods.deletePod('a')
    await h.advanceUntil(() => w.host.mountTargets().length === 0, { maxMs: 5_000 })
    await h.manager.waitForIdle()
    await h.stop()
    expect(calls).toBeGreaterThan(20)
    expect(w.host.mountTargets()).toEqual([])
  })

  it('converges after a crash right before and right after each of them', async () => {
    const failures: string[] = []
    const started = Date.now()
    const steps = await forEachCrashPoint({
      world: crashWorld,
      pod,
      data: DB,
      only: process.env.KUBEVOL_CRASH_STEP ? Number(process.env.KUBEVOL_CRASH_STEP) : undefined,
      trace: process.env.KUBEVOL_CRASH_TRACE !== undefined,
      async restart(w, { phase, label }) {
        const wantsPod = phase === 'mount'
        const second = crashHarness(w)
        if (wantsPod) second.pods.setPod(pod)
        second.start()
        await settle(second)
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
      },
    })
    console.log(`crash points: ${steps} steps × 2, ${Date.now() - started} ms`)
    expect(failures).toEqual([])
  }, 300_000)
})
