/**
 * Node expansion of CSI volumes through the whole manager (SPEC §4.4, §6.6): a failed precondition
 * during mount is recorded and the mount goes on; raw block volumes grow while mapped (a failure
 * leaves the mapping uncertain); the claim's `allocatedResources` / `allocatedResourceStatuses`
 * (RecoverVolumeExpansionFailure) decide whether and to what size NodeExpandVolume runs, and the
 * claim's status is written as the kubelet writes it; a PV that grows under a running pod is
 * expanded without the pod changing.
 */
import { createMemoryHost } from '@kubevol/adapter-mock'
import type { PersistentVolumeClaim, Pod } from '@kubevol/core'
import { createBuiltinPlugins } from '@kubevol/core/plugins'
import { buildClaim, buildPod, createFakeClock, createHarness } from '@kubevol/core/testing'
import { afterEach, describe, expect, it } from 'vitest'
import { createCsiDriverRegistry, createCsiPlugin, csiError, type GrpcCodeName } from '../../packages/core/src/plugins/csi/index.js'
import { createMemoryCsiDriver } from '../../packages/core/src/testing/csi/index.js'

const DRIVER = 'memory.csi.kubevol.io'
const GI = 2 ** 30

let running: { stop(): Promise<void> }[] = []
afterEach(async () => {
  for (const h of running) await h.stop()
  running = []
})

interface Setup {
  readonly block?: boolean
  /** The PV's capacity (the claim reports 1Gi). */
  readonly pvSize?: string
  readonly claimStatus?: PersistentVolumeClaim['status']
  /** NodeExpandVolume fails with this code. */
  readonly failWith?: GrpcCodeName
}

async function start(o: Setup = {}) {
  const clock = createFakeClock()
  const host = createMemoryHost({ clock })
  const driver = createMemoryCsiDriver({ host, name: DRIVER })
  const plugin = createCsiPlugin({ drivers: createCsiDriverRegistry([{ name: DRIVER, driver }]) })
  const h = createHarness({ host, clock, plugins: [...createBuiltinPlugins(), plugin], manager: { expansionCheckPeriodMs: 0 } })
  h.objects.put('CSIDriver', { metadata: { name: DRIVER }, spec: { attachRequired: false } })
  const { pvc, pv } = buildClaim({ claim: 'data', pv: 'pv-data', ...(o.block ? { volumeMode: 'Block' as const } : {}), pvSource: { csi: { driver: DRIVER, volumeHandle: 'vol-1' } } })
  h.objects.put('PersistentVolumeClaim', { ...pvc, spec: { ...pvc.spec, resources: { requests: { storage: o.pvSize ?? '1Gi' } } }, status: { ...pvc.status, ...o.claimStatus } })
  h.objects.put('PersistentVolume', { ...pv, spec: { ...pv.spec, capacity: { storage: o.pvSize ?? '1Gi' } } })
  // What the claim said while NodeExpandVolume ran.
  const statusDuringExpand: (string | undefined)[] = []
  driver.intercept(async (call, next) => {
    if (call.method !== 'NodeExpandVolume') return next()
    statusDuringExpand.push((await h.objects.getPersistentVolumeClaim('default', 'data')).status?.allocatedResourceStatuses?.storage)
    if (o.failWith) throw csiError(o.failWith, 'cannot grow it')
    return next()
  })
  await plugin.syncDriverObjects()
  h.start()
  running.push(h)
  const expands = () => driver.calls.filter((c) => c.method === 'NodeExpandVolume')
  const claim = async () => (await h.objects.getPersistentVolumeClaim('default', 'data')).status ?? {}
  // The claim's status as last announced, for conditions the fake clock is advanced until.
  let seen: PersistentVolumeClaim['status'] = {}
  h.objects.subscribe?.((changed) => {
    if (changed?.kind === 'PersistentVolumeClaim') void claim().then((s) => (seen = s))
  })
  return { h, driver, expands, claim, statusDuringExpand, seen: () => seen ?? {} }
}

const pod = (block = false): Pod =>
  buildPod({ uid: 'a', volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'data' } }], ...(block ? { devices: ['data'] } : {}) })

describe('expansion during mount', () => {
  it('records a FailedPrecondition from NodeExpandVolume and mounts the volume anyway', async () => {
    const { h, expands } = await start({ pvSize: '2Gi', failWith: 'FailedPrecondition' })
    await h.addPodAndWait(pod())
    expect(expands()).toHaveLength(1)
    expect(h.manager.actualState.getMountedVolumeForPod('a', 'kubernetes.io/csi/memory.csi.kubevol.io^vol-1')?.mountState).toBe('mounted')
    const resize = h.events.find((e) => e.reason === 'VolumeResizeFailed')
    expect(resize?.message).toMatch(/^MountVolume.NodeExpandVolume failed for volume "pv-data" : Expander.NodeExpand failed to expand the volume : rpc error: code = FailedPrecondition desc = cannot grow it$/)
    expect(h.events.some((e) => e.reason === 'FailedMount')).toBe(false)
  })

  it('grows a raw block volume while mapping it, with the block access type', async () => {
    const { h, expands, claim } = await start({ block: true, pvSize: '2Gi' })
    await h.addPodAndWait(pod(true))
    expect(expands().map((c) => c.request)).toMatchObject([{ volumeId: 'vol-1', requiredBytes: 2 * GI, volumeCapability: { block: {} } }])
    expect((await claim()).capacity).toEqual({ storage: '2Gi' })
  })

  it('leaves a mapping uncertain when the block volume fails to grow: no container may use it', async () => {
    const { h, expands } = await start({ block: true, pvSize: '2Gi', failWith: 'Internal' })
    h.pods.setPod(pod(true))
    await h.advanceUntil(() => h.events.some((e) => e.reason === 'FailedMapVolume'))
    expect(expands().length).toBeGreaterThan(0)
    expect(h.events.find((e) => e.reason === 'FailedMapVolume')?.message).toContain('MapVolume.MarkVolumeAsMounted failed while expanding volume for volume "pv-data"')
    expect(h.manager.actualState.getMountedVolumeForPod('a', 'kubernetes.io/csi/memory.csi.kubevol.io^vol-1')?.mountState).toBe('uncertain')
  })
})

describe('RecoverVolumeExpansionFailure: the claim says whether and to what size', () => {
  const allocated = { allocatedResources: { storage: '2Gi' } }
  it.each([
    {
      name: 'legacy (no allocated size): expand to the PV size, then record the capacity',
      claimStatus: {},
      calls: [2 * GI],
      during: [undefined],
      after: { capacity: { storage: '2Gi' } },
    },
    {
      name: 'NodeResizePending: in progress while it runs, then the capacity and the status cleared',
      claimStatus: { ...allocated, allocatedResourceStatuses: { storage: 'NodeResizePending' } },
      calls: [2 * GI],
      during: ['NodeResizeInProgress'],
      after: { capacity: { storage: '2Gi' }, allocatedResourceStatuses: {} },
    },
    {
      name: 'NodeResizeInfeasible: no call, nothing written',
      claimStatus: { ...allocated, allocatedResourceStatuses: { storage: 'NodeResizeInfeasible' } },
      calls: [],
      during: [],
      after: { capacity: { storage: '1Gi' }, allocatedResourceStatuses: { storage: 'NodeResizeInfeasible' } },
    },
    {
      name: 'no resize status with an allocated size: the resize is not asked for, no call',
      claimStatus: allocated,
      calls: [],
      during: [],
      after: { capacity: { storage: '1Gi' } },
    },
    {
      name: 'the allocated size, not the PV size, is the one asked for',
      claimStatus: { allocatedResources: { storage: '1536Mi' }, allocatedResourceStatuses: { storage: 'NodeResizePending' } },
      calls: [1.5 * GI],
      during: ['NodeResizeInProgress'],
      after: { capacity: { storage: '1536Mi' }, allocatedResourceStatuses: {} },
    },
  ])('$name', async ({ claimStatus, calls, during, after }) => {
    const { h, expands, claim, statusDuringExpand } = await start({ pvSize: '2Gi', claimStatus })
    await h.addPodAndWait(pod())
    expect(expands().map((c) => c.request.requiredBytes)).toEqual(calls)
    expect(statusDuringExpand).toEqual(during)
    expect(await claim()).toMatchObject(after)
    expect(h.events.filter((e) => e.reason === 'FileSystemResizeSuccessful').map((e) => e.target.kind)).toEqual(calls.length > 0 ? ['Pod', 'PersistentVolumeClaim'] : [])
  })

  it.each([
    { name: 'an infeasible size (InvalidArgument) is marked NodeResizeInfeasible', code: 'InvalidArgument' as const, status: 'NodeResizeInfeasible' },
    { name: 'another final error keeps NodeResizeInProgress', code: 'Internal' as const, status: 'NodeResizeInProgress' },
  ])('$name, with a NodeResizeError condition, and the capacity unchanged', async ({ code, status }) => {
    const { h, claim, seen } = await start({ pvSize: '2Gi', failWith: code, claimStatus: { ...allocated, allocatedResourceStatuses: { storage: 'NodeResizePending' } } })
    h.pods.setPod(pod())
    await h.advanceUntil(() => seen().conditions?.some((c) => c.type === 'NodeResizeError') === true)
    const after = await claim()
    expect(after.allocatedResourceStatuses).toEqual({ storage: status })
    expect(after.capacity).toEqual({ storage: '1Gi' })
    expect(after.conditions?.find((c) => c.type === 'NodeResizeError')?.message).toContain(`failed to expand pvc with Expander.NodeExpand failed to expand the volume : rpc error: code = ${code} desc = cannot grow it`)
  })
})

describe('expansion without a pod update', () => {
  it('expands a mounted volume when its PV and claim grow, the pod unchanged', async () => {
    const { h, expands, claim, seen } = await start()
    await h.addPodAndWait(pod())
    expect(expands()).toEqual([])
    // What the external resizer writes: the PV's new capacity, then the claim's allocated size and status.
    const pv = await h.objects.getPersistentVolume('pv-data')
    h.objects.put('PersistentVolume', { ...pv, spec: { ...pv.spec, capacity: { storage: '2Gi' } } })
    const pvc = await h.objects.getPersistentVolumeClaim('default', 'data')
    h.objects.put('PersistentVolumeClaim', { ...pvc, status: { ...pvc.status, allocatedResources: { storage: '2Gi' }, allocatedResourceStatuses: { storage: 'NodeResizePending' } } })
    await h.advanceUntil(() => expands().length > 0)
    expect(expands().map((c) => c.request.requiredBytes)).toEqual([2 * GI])
    await h.advanceUntil(() => seen().capacity?.storage === '2Gi')
    expect((await claim()).allocatedResourceStatuses).toEqual({})
  })
})
