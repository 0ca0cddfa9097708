/**
 * The CSI plugin's exhausted-resource check (kubelet `csiPlugin.VerifyExhaustedResource`,
 * MutableCSINodeAllocatableCount): a volume that could not be attached because the node reached
 * its attach limit. The external attacher says so in the VolumeAttachment: `status.attachError`
 * with `errorCode` ResourceExhausted (gRPC code 8). Only a driver that opted in (its CSIDriver sets
 * `nodeAllocatableUpdatePeriodSeconds`) is asked, as the kubelet does; any read failure is "not
 * exhausted", so the wait fails with its ordinary error.
 */
import type { VolumeSpec } from '../../api/volume-spec.js'
import { errorMessage } from '../../errors.js'
import { type CsiRuntime, driverObject } from './runtime.js'
import { attachmentName, csiSourceOf } from './requests.js'

/** gRPC `codes.ResourceExhausted`. */
const GRPC_RESOURCE_EXHAUSTED = 8

export async function verifyExhaustedResource(rt: CsiRuntime, spec: VolumeSpec): Promise<boolean> {
  const source = spec.persistentVolume ? csiSourceOf(spec) : undefined
  if (!source || source.ephemeral) return false
  const { logger, nodeName, objects } = rt.context()
  try {
    const driver = await driverObject(rt, source.driver)
    if (!driver?.spec?.nodeAllocatableUpdatePeriodSeconds) return false
    const get = rt.getVolumeAttachment ?? objects.getVolumeAttachment?.bind(objects)
    if (!get) return false
    const attachment = await get(attachmentName(source.volumeHandle, source.driver, nodeName))
    return attachment.status?.attachError?.errorCode === GRPC_RESOURCE_EXHAUSTED
  } catch (err) {
    logger.warn('Could not check whether the node ran out of attachments', { driver: source.driver, volumeHandle: source.volumeHandle, err: errorMessage(err) })
    return false
  }
}
