import { type FakeClock, createFakeClock } from '@kubevol/core/testing'
import { afterEach, describe, expect, it } from 'vitest'
import { type Playground, VOLUME_KINDS, createPlayground } from '../playground/engine.js'
import { TOUR, playTour } from '../playground/tour.js'

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

describe('the playground pictures', () => {
  it('draws a disk from desired to actual: device and pod rows, and attach, device mount and setup on its lane', async () => {
    const clock = createFakeClock()
    const p = (playground = createPlayground({ clock }))
    p.addPod('web', ['disk', 'emptyDir'])
    expect(await settle(clock, () => p.view().pods[0]?.ready === true)).toBe(true)
    const { rows, lanes } = p.view().picture
    expect(rows.map((r) => [r.level, r.pod, r.volume, r.desired, r.actual, r.operation?.status])).toEqual([
      ['device', '', 'disk-1', true, 'device mounted', undefined],
      ['pod', 'web', 'cache', true, 'mounted', undefined],
      ['pod', 'web', 'data', true, 'mounted', undefined],
    ])
    const disk = lanes.find((l) => l.label === 'disk-1')
    expect(disk?.spans.filter((s) => s.level === 'operation').map((s) => s.name)).toEqual(['volume_attach', 'volume_mount'])
    expect(disk?.spans.filter((s) => s.level === 'step').map((s) => s.kind)).toEqual(['attach', 'verify', 'device mount', 'setup'])
    const cache = lanes.find((l) => l.label === 'web/cache')
    expect(cache?.spans.map((s) => `${s.level} ${s.kind}`)).toEqual(['operation verify', 'operation mount', 'step setup'])
    expect(lanes.every((l) => l.spans.every((s) => s.end !== undefined && s.error === undefined))).toBe(true)
  })

  it("shows a failing step backing off for the executor's delays, then each retry on the volume's lane", async () => {
    const clock = createFakeClock()
    const p = (playground = createPlayground({ clock }))
    p.injectFault('setUp', 'fail-3')
    p.addPod('db', ['scratch'])
    expect(await settle(clock, () => p.view().picture.rows.some((r) => r.operation?.status === 'backing-off'))).toBe(true)
    const waiting = p.view().picture.rows.find((r) => r.operation)?.operation
    expect(waiting).toMatchObject({ name: 'volume_mount', direction: 'in', status: 'backing-off', attempt: 1 })
    expect((waiting?.retryAt ?? 0) - (waiting?.since ?? 0)).toBe(500)
    expect(await settle(clock, () => p.view().pods[0]?.ready === true)).toBe(true)
    const lane = p.view().picture.lanes.find((l) => l.label === 'db/scratch')
    const tries = lane?.spans.filter((s) => s.name === 'volume_mount') ?? []
    expect(tries.map((s) => [s.attempt, s.error === undefined])).toEqual([
      [1, false],
      [2, false],
      [3, false],
      [4, true],
    ])
    const gaps = tries.slice(1).map((s, i) => s.start - (tries[i]?.end ?? 0))
    expect(gaps.map((g) => Math.round(g / 500) * 500)).toEqual([500, 1_000, 2_000])
    expect(p.view().picture.rows.every((r) => r.operation === undefined)).toBe(true)
  })

  it('colours an uncertain mount in the actual column until the retry settles it', async () => {
    const clock = createFakeClock()
    const p = (playground = createPlayground({ clock }))
    p.injectFault('setUp', 'uncertain')
    p.addPod('db', ['scratch'])
    expect(await settle(clock, () => p.view().picture.rows.some((r) => r.actual === 'uncertain'))).toBe(true)
    expect(await settle(clock, () => p.view().picture.rows.every((r) => r.actual === 'mounted'))).toBe(true)
  })

  it('shows a hung step running, and a crash ending it as lost', async () => {
    const clock = createFakeClock()
    const p = (playground = createPlayground({ clock }))
    p.injectFault('attach', 'hang')
    p.addPod('db', ['disk'])
    await settle(clock, () => false, 2_000)
    const device = p.view().picture.rows.find((r) => r.level === 'device')
    expect(device).toMatchObject({ desired: true, actual: 'absent', operation: { name: 'volume_attach', status: 'running', direction: 'in' } })
    await p.crashAndRestart()
    const lost = p.view().picture.lanes.flatMap((l) => l.spans).filter((s) => s.error === 'lost in the crash')
    expect(lost.map((s) => `${s.level} ${s.kind}`).sort()).toEqual(['operation attach', 'step attach'])
    expect(await settle(clock, () => p.view().pods[0]?.ready === true)).toBe(true)
  })
})

describe('the playground tour', () => {
  it('converges at every step, and the timeline shows the three retries of db and the uncertain mount of cache', async () => {
    const clock = createFakeClock()
    const p = (playground = createPlayground({ clock }))
    const seen: number[] = []
    const converged = await playTour(p, (done) => settle(clock, () => done(p.view()), 20_000), (i) => seen.push(i))
    expect(converged).toBe(TOUR.length)
    expect(seen).toEqual(TOUR.map((_, i) => i))
    const spans = p.view().picture.lanes.flatMap((l) => l.spans)
    const dbMounts = spans.filter((s) => s.name === 'volume_mount' && s.podName.startsWith('uid-db-'))
    // Three failures, the mount, and (after the crash) the mount that confirms the reconstructed volume.
    expect(dbMounts.map((s) => s.error === undefined)).toEqual([false, false, false, true, true])
    expect(spans.some((s) => s.name === 'volume_detach' && s.error === undefined)).toBe(true)
    // Every plugin step sits on the lane of an operation, reconstructed volumes' teardown included.
    const lanes = p.view().picture.lanes
    expect(lanes.filter((l) => !l.spans.some((s) => s.level === 'operation')).map((l) => l.label)).toEqual([])
    expect(lanes.find((l) => l.label === 'disk-1')?.spans.filter((s) => s.level === 'step').map((s) => s.kind)).toEqual(
      expect.arrayContaining(['attach', 'device mount', 'setup', 'teardown', 'device unmount', 'detach']),
    )
    expect(p.view().timeline.some((e) => e.kind === 'error' && /✗ volume_mount cache\/scratch .*timed out, it may have happened/.test(e.text))).toBe(true)
  })
})
