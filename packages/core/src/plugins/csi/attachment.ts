/**
 * Controller attach of CSI volumes (SPEC §7.7 `WaitForAttach`): the external attacher attaches and
 * records it in a VolumeAttachment named `csi-<sha256(handle + driver + node)>`; the node waits for
 * `status.attached` and takes `attachmentMetadata` as the publish context.
 */
import type { VolumeAttachment } from '../../api/kubernetes.js'
import { NotFoundError, errorMessage } from '../../errors.js'
import { attachmentName } from './requests.js'
import type { CsiRuntime } from './runtime.js'

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
