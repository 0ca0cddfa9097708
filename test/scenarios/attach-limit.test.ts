/**
 * The attach-limit rejection (SPEC §2.1, kubelet `VolumeAttachLimitExceededError`): a pod whose wait
 * fails with a volume not attached because the node ran out of attachments (the external attacher's
 * VolumeAttachment says `attachError.errorCode` 8, ResourceExhausted, and the driver opted in with
 * `nodeAllocatableUpdatePeriodSeconds`) gets the kubelet's attach-limit error, not the plain one.
 */
import { createMemoryHost } from '@kubevol/adapter-mock'
import { type CSIDriver, NotFoundError, type VolumeAttachment, VolumeAttachLimitExceededError, WaitError } from '@kubevol/core'
import { createBuiltinPlugins } from '@kubevol/core/plugins'
import { buildClaim, buildPod, createFakeClock, createHarness } from '@kubevol/core/testing'
import { afterEach, describe, expect, it } from 'vitest'
import { attachmentName, createCsiDriverRegistry, createCsiPlugin } from '../../packages/core/src/plugins/csi/index.js'
import { createMemoryCsiDriver } from '../../packages/core/src/testing/csi/index.js'

const DRIVER = 'memory.csi.kubevol.io'
const HANDLE = 'vol-0001'
const WAIT = 'unmounted volumes=[data], unattached volumes=[data], failed to process volumes=[]: context deadline exceeded'

let stop: (() => Promise<void>) | undefined
afterEach(async () => {
  await stop?.()
  stop = undefined
})

async function waitOutcome(csiDriver: CSIDriver['spec'], attachError: NonNullable<VolumeAttachment['status']>['attachError']): Promise<unknown> {
  const clock = createFakeClock()
  const host = createMemoryHost({ clock })
  const registry = createCsiDriverRegistry()
  registry.register({ name: DRIVER, driver: createMemoryCsiDriver({ host, name: DRIVER }) })
  const name = attachmentName(HANDLE, DRIVER, 'node-1')
  const attachments = new Map<string, VolumeAttachment>([[name, { metadata: { name }, status: { attached: false, attachError } }]])
  const plugin = createCsiPlugin({
    drivers: registry,
    getVolumeAttachment: async (n) => {
      const va = attachments.get(n)
      if (!va) throw new NotFoundError('volumeattachments.storage.k8s.io', n)
      return va
    },
  })
  const h = createHarness({ host, clock, plugins: [...createBuiltinPlugins(), plugin] })
  h.objects.put('CSIDriver', { metadata: { name: DRIVER }, spec: csiDriver })
  const { pvc, pv } = buildClaim({ claim: 'data', pv: 'pv-data', pvSource: { csi: { driver: DRIVER, volumeHandle: HANDLE, fsType: 'ext4' } } })
  h.objects.put('PersistentVolumeClaim', pvc)
  h.objects.put('PersistentVolume', pv)
  await plugin.syncDriverObjects()
  h.start()
  stop = () => h.stop()
  const pod = buildPod({ uid: 'a', volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'data' } }] })
  h.pods.setPod(pod)
  let outcome: unknown = 'pending'
  h.manager.waitForAttachAndMount(pod, { timeoutMs: 5_000 }).then(
    () => {
      outcome = 'mounted'
    },
    (err: unknown) => {
      outcome = err
    },
  )
  await h.advanceUntil(() => outcome !== 'pending', { maxMs: 10_000 })
  return outcome
}

describe('the attach-limit rejection', () => {
  it('a VolumeAttachment failed with ResourceExhausted, for a driver that opted in: the kubelet attach-limit error', async () => {
    const err = await waitOutcome({ attachRequired: true, nodeAllocatableUpdatePeriodSeconds: 60 }, { message: 'too many volumes', errorCode: 8 })
    expect(err).toBeInstanceOf(VolumeAttachLimitExceededError)
    expect(err).toBeInstanceOf(WaitError)
    expect(err).toMatchObject({
      message: `Node has reached its volume attachment limit, rejecting pod. ${WAIT}`,
      reason: 'VolumeAttachmentLimitExceeded',
      interrupted: true,
    })
  })

  it.each([
    { what: 'a driver that did not opt in', driver: { attachRequired: true }, error: { message: 'too many volumes', errorCode: 8 } },
    { what: 'another attach error', driver: { attachRequired: true, nodeAllocatableUpdatePeriodSeconds: 60 }, error: { message: 'boom', errorCode: 13 } },
    { what: 'an attach error without a code', driver: { attachRequired: true, nodeAllocatableUpdatePeriodSeconds: 60 }, error: { message: 'boom' } },
  ])('$what: the plain wait error', async ({ driver, error }) => {
    const err = await waitOutcome(driver, error)
    expect(err).toBeInstanceOf(WaitError)
    expect(err).not.toBeInstanceOf(VolumeAttachLimitExceededError)
    expect((err as Error).message).toBe(WAIT)
  })
})
