/**
 * Orchestrator-side CSI rules (the CSI spec's requirements on the CO), checked against a recording
 * in-memory driver that answers slowly: stage before publish, at most one call in flight per
 * volume and target, unstage only after every unpublish, and idempotent re-drive after an
 * uncertain outcome and after a restart.
 *
 * "Per volume and target": like the kubelet, kubevol runs the unpublish of different pods of one
 * volume in parallel (pending operations are keyed by volume + pod for unmount), so two
 * NodeUnpublishVolume calls of one volume with different target paths may overlap; stage and
 * unstage never overlap any other call of the volume.
 */
import { createMemoryHost } from '@kubevol/adapter-mock'
import type { Pod } from '@kubevol/core'
import { createBuiltinPlugins } from '@kubevol/core/plugins'
import { buildClaim, buildPod, createFakeClock, createHarness, type Harness } from '@kubevol/core/testing'
import { describe, expect, it } from 'vitest'
import { createCsiDriverRegistry, createCsiPlugin, csiError } from '../../packages/core/src/plugins/csi/index.js'
import { createMemoryCsiDriver, type MemoryCsiDriver } from '../../packages/core/src/testing/csi/index.js'

const DRIVER = 'recording.csi.kubevol.io'
const VOLUME_CALLS = new Set(['NodeStageVolume', 'NodeUnstageVolume', 'NodePublishVolume', 'NodeUnpublishVolume'])

interface Recorder {
  /** Violations of the CO rules, in words. */
  readonly violations: string[]
  readonly log: string[]
}

/** Checks each volume call against what came before it; every call takes 50 ms of fake time. */
function record(driver: MemoryCsiDriver, clock: ReturnType<typeof createFakeClock>): Recorder {
  const violations: string[] = []
  const log: string[] = []
  /** volume id → the calls in flight, as "method target". */
  const inFlight = new Map<string, Set<string>>()
  const staged = new Set<string>()
  const published = new Map<string, Set<string>>()
  driver.intercept(async (call, next) => {
    if (!VOLUME_CALLS.has(call.method)) return next()
    const r = call.request as { volumeId: string; targetPath?: string }
    const id = r.volumeId
    const target = r.targetPath ?? ''
    const busy = [...(inFlight.get(id) ?? [])]
    const exclusive = call.method === 'NodeStageVolume' || call.method === 'NodeUnstageVolume'
    const clash = busy.find((other) => exclusive || other.startsWith('NodeStageVolume') || other.startsWith('NodeUnstageVolume') || other.endsWith(` ${target}`))
    if (clash) violations.push(`${call.method} of ${id} while ${clash} is in flight`)
    if (call.method === 'NodePublishVolume' && !staged.has(id)) violations.push(`NodePublishVolume of ${id} before NodeStageVolume`)
    if (call.method === 'NodeUnstageVolume' && (published.get(id)?.size ?? 0) > 0) violations.push(`NodeUnstageVolume of ${id} while published`)
    const entry = `${call.method} ${target}`
    inFlight.set(id, new Set([...busy, entry]))
    log.push(`${call.method} ${r.targetPath?.split('/')[4] ?? ''}`.trim())
    try {
      await clock.sleep(50)
      const result = await next()
      if (call.method === 'NodeStageVolume') staged.add(id)
      if (call.method === 'NodeUnstageVolume') staged.delete(id)
      if (call.method === 'NodePublishVolume') published.set(id, new Set([...(published.get(id) ?? []), r.targetPath ?? '']))
      if (call.method === 'NodeUnpublishVolume') published.get(id)?.delete(r.targetPath ?? '')
      return result
    } finally {
      inFlight.get(id)?.delete(entry)
    }
  })
  return { violations, log }
}

function setup(volumeMode: 'Filesystem' | 'Block' = 'Filesystem') {
  const clock = createFakeClock()
  const host = createMemoryHost({ clock })
  const driver = createMemoryCsiDriver({ host, name: DRIVER })
  const recorder = record(driver, clock)
  const boot = async (): Promise<Harness> => {
    const registry = createCsiDriverRegistry([{ name: DRIVER, driver }])
    const plugin = createCsiPlugin({ drivers: registry })
    const h = createHarness({ host, clock, plugins: [...createBuiltinPlugins(), plugin] })
    h.objects.put('CSIDriver', { metadata: { name: DRIVER }, spec: { attachRequired: false } })
    const { pvc, pv } = buildClaim({ claim: 'data', pv: 'pv-data', volumeMode, accessModes: ['ReadWriteMany'], pvSource: { csi: { driver: DRIVER, volumeHandle: 'h1' } } })
    h.objects.put('PersistentVolumeClaim', pvc)
    h.objects.put('PersistentVolume', pv)
    await plugin.syncDriverObjects()
    h.start()
    return h
  }
  return { clock, host, driver, recorder, boot }
}

const pod = (uid: string, block = false): Pod =>
  buildPod({ uid, volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'data' } }], ...(block ? { devices: ['data'] } : {}) })

describe('CSI rules on the CO', () => {
  it.each([
    { mode: 'Filesystem' as const, mounts: 4, access: 'mount' },
    // Block: a publish file and a global map bind per pod, no staging mount.
    { mode: 'Block' as const, mounts: 6, access: 'block' },
  ])('$mode: three pods of one volume come and go: no overlapping calls of a volume and target, stage first, unstage last', async ({ mode, mounts, access }) => {
    const s = setup(mode)
    const h = await s.boot()
    for (const uid of ['a', 'b', 'c']) h.pods.setPod(pod(uid, mode === 'Block'))
    await h.advanceUntil(() => s.host.mountTargets().length === mounts, { maxMs: 10_000 })
    for (const uid of ['a', 'b', 'c']) h.pods.deletePod(uid)
    await h.advanceUntil(() => s.host.mountTargets().length === 0, { maxMs: 10_000 })
    await h.stop()
    expect(s.recorder.violations).toEqual([])
    expect(s.recorder.log[0]).toBe('NodeStageVolume')
    expect(s.recorder.log.at(-1)).toBe('NodeUnstageVolume')
    expect(s.recorder.log.filter((l) => l.startsWith('NodePublishVolume'))).toHaveLength(3)
    // The access type of every stage and publish is the volume mode's, and only that one.
    const capabilities = s.driver.calls.filter((c) => c.method === 'NodeStageVolume' || c.method === 'NodePublishVolume').map((c) => c.request.volumeCapability as object)
    for (const capability of capabilities) expect(Object.keys(capability).filter((k) => k !== 'accessMode')).toEqual([access])
  })

  it('re-drives the same publish after an Aborted (uncertain) answer, and after a restart', async () => {
    const s = setup()
    let failures = 1
    s.driver.intercept(async (call, next) => {
      if (call.method === 'NodePublishVolume' && failures-- > 0) throw csiError('Aborted', 'operation pending for volume')
      return next()
    })
    const first = await s.boot()
    await first.addPodAndWait(pod('a'))
    const publishes = s.driver.calls.filter((c) => c.method === 'NodePublishVolume')
    expect(publishes).toHaveLength(2)
    expect(publishes[1]?.request).toEqual(publishes[0]?.request)
    await first.stop()

    const second = await s.boot()
    await second.addPodAndWait(pod('a'))
    second.pods.deletePod('a')
    await second.advanceUntil(() => s.host.mountTargets().length === 0, { maxMs: 10_000 })
    await second.stop()
    expect(s.host.mountTargets()).toEqual([])
    expect(s.recorder.violations).toEqual([])
  })
})
