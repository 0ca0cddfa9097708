/**
 * Controller attach of CSI volumes (SPEC §7.7 `WaitForAttach`): the external attacher attaches and
 * records it in a VolumeAttachment named `csi-<sha256(handle + driver + node)>`; the node waits for
 * `status.attached` and takes `attachmentMetadata` as the publish context.
 */
import type { VolumeAttachment } from '../../api/kubernetes.js'
import type { VolumeSpec } from '../../api/volume-spec.js'
import { NotFoundError, errorMessage } from '../../errors.js'
import type { AttachCapability } from '../plugin.js'
import { verifyExhaustedResource } from './attach-limit.js'
import { attachmentName, csiSourceOf } from './requests.js'
import { type CsiRuntime, driverObject } from './runtime.js'

/** Polls the VolumeAttachment until attached; returns it. Fails on `attachError` or after `timeoutMs`. */
export async function waitForVolumeAttachment(rt: CsiRuntime, driver: string, volumeHandle: string, timeoutMs: number): Promise<VolumeAttachment> {
  const { clock, nodeName, objects } = rt.context()
  const get = rt.getVolumeAttachment ?? objects.getVolumeAttachment?.bind(objects)
  const name = attachmentName(volumeHandle, driver, nodeName)
  if (!get) throw new Error(`cannot wait for volume attachment ${name}: no VolumeAttachment reader configured`)
  const deadline = clock.now() + timeoutMs
  let last = 'not found'
  for (;;) {
    try {
      const va = await get(name)
      if (va.status?.attached) return va
      if (va.status?.attachError) throw new Error(`volume attachment ${name} failed: ${va.status.attachError.message ?? ''}`)
      last = 'not attached yet'
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err
      last = errorMessage(err)
    }
    if (clock.now() >= deadline) throw new Error(`volume attachment ${name} is not attached after ${timeoutMs} ms: ${last}`)
    await clock.sleep(Math.min(rt.attachPollMs, Math.max(1, deadline - clock.now())))
  }
}

/**
 * The attach capability: kubevol does not create VolumeAttachments (the external attacher does), so
 * attaching is waiting for one; detaching is the attacher's too. `canAttach` is the plugin's
 * (kubelet `skipAttach`: attach unless the CSIDriver says `attachRequired: false`).
 */
export function createCsiAttacher(rt: CsiRuntime, canAttach: (spec: VolumeSpec) => boolean): AttachCapability {
  // canAttach may answer before the CSIDriver object was read: then there is nothing to wait for after all.
  const waitFor = async (spec: VolumeSpec, timeoutMs: number): Promise<string> => {
    const source = csiSourceOf(spec)
    if (!source) throw new Error(`volume ${spec.name} is not a CSI volume`)
    if ((await driverObject(rt, source.driver))?.spec?.attachRequired === false) return ''
    await waitForVolumeAttachment(rt, source.driver, source.volumeHandle, timeoutMs)
    return attachmentName(source.volumeHandle, source.driver, rt.context().nodeName)
  }
  return {
    canAttach,
    attach: (spec) => waitFor(spec, rt.timeoutMs),
    waitForAttach: (spec, _devicePath, _pod, timeoutMs) => waitFor(spec, timeoutMs),
    async detach(volumeName) {
      rt.context().logger.info("CSI detach is the external attacher's: nothing to do on the node", { volume: volumeName })
    },
    verifyExhaustedResource: (spec) => verifyExhaustedResource(rt, spec),
  }
}
