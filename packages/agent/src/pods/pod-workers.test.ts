import { createMemoryHost } from '@kubevol/adapter-mock'
import { type VolumeEvent, createVolumeManager, systemClock } from '@kubevol/core'
import { buildPod, createFakePlugin, createMemoryObjectReader, createMemoryPodSource, fakeVolume } from '@kubevol/core/testing'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { createPodWorkers } from './pod-workers.js'

// Everything runs for real (the volume manager, the in-memory host) on vitest's fake timers: the
// manager's clock and the workers' timers are the platform's, which the fake timers replace.
const silent = { debug() {}, info() {}, warn() {}, error() {} }

function setup(options: { timeoutMs?: number; random?: () => number } = {}) {
  const host = createMemoryHost({ clock: systemClock })
  const plugin = createFakePlugin()
  const pods = createMemoryPodSource([], { ready: true })
  const objects = createMemoryObjectReader()
  const events: VolumeEvent[] = []
  const recorder = { event: (e: VolumeEvent) => events.push(e) }
  const manager = createVolumeManager({ host, plugins: [plugin], podSource: pods, objects, nodeName: 'node-1', clock: systemClock, recorder })
  const stopManager = new AbortController()
  const running = manager.run(stopManager.signal)
  const workers = createPodWorkers({
    manager,
    pods,
    recorder,
    clock: systemClock,
    logger: silent,
    retryMs: 10_000,
    timeoutMs: options.timeoutMs ?? 123_000,
    random: options.random ?? (() => 0.999),
  })
  workers.start()
  const stop = async () => {
    workers.stop()
    stopManager.abort()
    await vi.runOnlyPendingTimersAsync()
    await running
  }
  return { plugin, pods, events, workers, stop }
}

let current: ReturnType<typeof setup> | undefined
beforeEach(() => {
  vi.useFakeTimers({ now: new Date('2026-01-01T00:00:00Z') })
})
afterEach(async () => {
  await current?.stop()
  current = undefined
  vi.useRealTimers()
})

/** Runs what is due now, without letting time pass, until the pod's first sync failed. */
async function untilFailed(workers: ReturnType<typeof setup>['workers'], uid: string): Promise<void> {
  for (let i = 0; i < 100 && (workers.status(uid)?.attempts ?? 0) === 0; i++) await vi.advanceTimersByTimeAsync(0)
  expect(workers.status(uid)?.attempts).toBe(1)
}

const unable = (events: VolumeEvent[]) => events.filter((e) => e.reason === 'FailedMount' && e.message.startsWith('Unable to attach or mount volumes'))

describe('pod workers', () => {
  it('retry a failed sync after the kubelet’s flat 10 s back-off plus up to half of it, failure after failure', async () => {
    const t = (current = setup())
    // A claim that does not exist: the populator records an error and every sync fails at once.
    t.pods.setPod(buildPod({ uid: 'a', volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'missing' } }] }))
    await untilFailed(t.workers, 'a')
    const delays: number[] = []
    for (let failure = 1; failure <= 6; failure++) {
      const status = t.workers.status('a')
      expect(status).toMatchObject({ phase: 'failed', attempts: failure })
      delays.push((status?.nextRetryAt ?? 0) - Date.now())
      // Not a moment before the back-off ends, and at once after it.
      await vi.advanceTimersByTimeAsync((status?.nextRetryAt ?? 0) - Date.now() - 1)
      expect(t.workers.status('a')?.attempts).toBe(failure)
      await vi.advanceTimersByTimeAsync(1)
      await vi.advanceTimersByTimeAsync(0)
      expect(t.workers.status('a')?.attempts).toBe(failure + 1)
    }
    // wait.Jitter(10s, 0.5) with the largest draw: 14.995 s every time, never doubling to minutes.
    expect(delays).toEqual([14_995, 14_995, 14_995, 14_995, 14_995, 14_995])
  })

  it('keep counting failed syncs when the pod object is updated (a status or label change is the same pod)', async () => {
    const t = (current = setup())
    const volumes = [{ name: 'data', persistentVolumeClaim: { claimName: 'missing' } }]
    t.pods.setPod(buildPod({ uid: 'a', name: 'web', volumes }))
    await untilFailed(t.workers, 'a')
    // A new object of the same pod, as a watch delivers after any change to it.
    t.pods.setPod(buildPod({ uid: 'a', name: 'web', volumes }))
    for (let i = 0; i < 100 && (t.workers.status('a')?.attempts ?? 0) < 2; i++) await vi.advanceTimersByTimeAsync(0)
    expect(t.workers.status('a')).toMatchObject({ phase: 'failed', attempts: 2 })
  })

  it.each([
    ['the smallest draw', 0, 10_000],
    ['a middle draw', 0.5, 12_500],
  ])('jitter the back-off by the random draw: %s', async (_name, draw, delay) => {
    const t = (current = setup({ random: () => draw }))
    t.pods.setPod(buildPod({ uid: 'a', volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'missing' } }] }))
    await untilFailed(t.workers, 'a')
    expect((t.workers.status('a')?.nextRetryAt ?? 0) - Date.now()).toBe(delay)
  })

  it('post FailedMount for a sync the pod’s errors ended, with the kubelet’s text', async () => {
    const t = (current = setup())
    t.pods.setPod(buildPod({ uid: 'a', volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'missing' } }] }))
    await vi.advanceTimersByTimeAsync(1_000)
    expect(unable(t.events).map((e) => e.message)).toEqual([
      'Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[], failed to process volumes=[data]: error processing PVC default/missing: failed to fetch PVC from API server: persistentvolumeclaims "missing" not found',
    ])
  })

  it('post no FailedMount for a sync that only timed out (kubelet 1.32: wait.Interrupted), but keep the volume’s own event', async () => {
    const t = (current = setup({ timeoutMs: 5_000 }))
    t.plugin.fail('setUp')
    t.pods.setPod(buildPod({ uid: 'a', volumes: [fakeVolume('data')] }))
    await vi.advanceTimersByTimeAsync(5_100)
    expect(t.workers.status('a')).toMatchObject({
      phase: 'failed',
      attempts: 1,
      lastError: 'unmounted volumes=[data], unattached volumes=[], failed to process volumes=[]: context deadline exceeded',
    })
    expect(unable(t.events)).toEqual([])
    expect(t.events.some((e) => e.reason === 'FailedMount' && e.message.startsWith('MountVolume.SetUp failed for volume "data"'))).toBe(true)
  })
})
