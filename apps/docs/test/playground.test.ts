import { type FakeClock, createFakeClock } from '@kubevol/core/testing'
import { afterEach, describe, expect, it } from 'vitest'
import { type Playground, VOLUME_KINDS, createPlayground } from '../playground/engine.js'

let playground: Playground | undefined
afterEach(() => playground?.dispose())

async function settle(clock: FakeClock, until: () => boolean, maxMs = 10_000): Promise<boolean> {
  await clock.flush()
  for (let t = 0; t < maxMs && !until(); t += 50) await clock.advance(50)
  return until()
}

describe('the playground engine', () => {
  it('mounts every volume kind of a pod and tears them down when it goes', async () => {
    const clock = createFakeClock()
    const p = (playground = createPlayground({ clock }))
    const pod = p.addPod('web', VOLUME_KINDS)
    expect(await settle(clock, () => p.view().pods[0]?.ready === true)).toBe(true)
    const view = p.view()
    expect(view.desired.map((d) => d.volume).sort()).toEqual(['bundle', 'cache', 'config', 'creds', 'data', 'logs', 'podinfo', 'scratch', 'shm'])
    expect(view.attached.map((a) => a.volume)).toContain('disk-1')
    expect(view.timeline.some((e) => e.kind === 'ok' && e.text.includes('volume_attach'))).toBe(true)
    p.removePod(pod.metadata.uid!)
    expect(await settle(clock, () => p.view().mounted.length === 0 && p.view().attached.length === 0)).toBe(true)
    expect(p.view().timeline.some((e) => e.text.includes('volume_detach'))).toBe(true)
  })

  it('retries a failed step after the backoff', async () => {
    const clock = createFakeClock()
    const p = (playground = createPlayground({ clock }))
    p.injectFault('setUp', 'fail-once')
    p.addPod('db', ['scratch'])
    expect(await settle(clock, () => p.view().pods[0]?.ready === true)).toBe(true)
    const texts = p.view().timeline.map((e) => e.text)
    expect(texts.some((t) => t.startsWith('✗ volume_mount') && t.includes('injected'))).toBe(true)
    expect(texts.filter((t) => t.startsWith('✓ volume_mount'))).toHaveLength(1)
  })

  it('marks an uncertain mount and settles it on the retry', async () => {
    const clock = createFakeClock()
    const p = (playground = createPlayground({ clock }))
    p.injectFault('setUp', 'uncertain')
    p.addPod('db', ['scratch'])
    expect(await settle(clock, () => p.view().mounted.some((m) => m.state === 'uncertain'))).toBe(true)
    expect(await settle(clock, () => p.view().pods[0]?.ready === true)).toBe(true)
  })

  it('holds a hung step until it is released', async () => {
    const clock = createFakeClock()
    const p = (playground = createPlayground({ clock }))
    p.injectFault('attach', 'hang')
    p.addPod('db', ['disk'])
    await settle(clock, () => false, 2_000)
    expect(p.view().pods[0]?.ready).toBe(false)
    p.releaseHangs()
    expect(await settle(clock, () => p.view().pods[0]?.ready === true)).toBe(true)
  })

  it('survives a crash during a hung step, and leaves no fault armed behind', async () => {
    const clock = createFakeClock()
    const p = (playground = createPlayground({ clock }))
    p.injectFault('setUp', 'hang')
    expect(p.view().hanging).toBe(1)
    p.addPod('db', ['scratch'])
    await settle(clock, () => false, 1_000)
    expect(p.view().timeline.some((e) => e.text.includes('is hanging'))).toBe(true)
    expect(p.view().pods[0]?.ready).toBe(false)
    await p.crashAndRestart()
    expect(p.view().hanging).toBe(0)
    expect(await settle(clock, () => p.view().pods[0]?.ready === true)).toBe(true)
    p.addPod('web', ['scratch', 'disk'])
    expect(await settle(clock, () => p.view().pods.every((pod) => pod.ready))).toBe(true)
    expect(p.view().timeline.filter((e) => e.kind === 'error')).toEqual([])
  })

  it('fails host mounts for any volume type and retries', async () => {
    const clock = createFakeClock()
    const p = (playground = createPlayground({ clock }))
    p.failHostMounts(1)
    p.addPod('web', ['emptyDir', 'memory'])
    expect(await settle(clock, () => p.view().pods[0]?.ready === true)).toBe(true)
    expect(p.view().timeline.some((e) => e.kind === 'error' && e.text.includes('EIO'))).toBe(true)
  })

  it('reconstructs after a crash and keeps serving the pods', async () => {
    const clock = createFakeClock()
    const p = (playground = createPlayground({ clock }))
    const keep = p.addPod('web', ['disk', 'emptyDir', 'configMap'])
    const gone = p.addPod('old', ['scratch', 'hostPath'], { disk: 'disk-2' })
    expect(await settle(clock, () => p.view().pods.every((pod) => pod.ready))).toBe(true)
    const mountsBefore = p.host.mountTargets().length
    await p.crashAndRestart()
    expect(p.view().restarts).toBe(1)
    expect(await settle(clock, () => p.view().pods.every((pod) => pod.ready))).toBe(true)
    expect(p.host.mountTargets().length).toBe(mountsBefore)
    p.removePod(gone.metadata.uid!)
    p.removePod(keep.metadata.uid!)
    expect(await settle(clock, () => p.view().mounted.length === 0 && p.view().attached.length === 0)).toBe(true)
    expect(p.host.mountTargets().filter((t) => t.startsWith('/var/lib/kubevol/pods'))).toEqual([])
    p.host.assertNoViolations()
  })
})
