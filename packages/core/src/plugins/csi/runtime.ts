/**
 * What every part of the CSI plugin shares: the context, the registry, the CSIDriver view and
 * the bounded call helper.
 */
import type { CSIDriver, VolumeAttachment } from '../../api/kubernetes.js'
import { errorMessage } from '../../errors.js'
import { joinPath } from '../../paths.js'
import type { VolumePluginContext } from '../plugin.js'
import type { CsiCallOptions, CsiDriver, CsiNodeCapability } from './csi-driver.js'
import { CsiError, driverNotRegistered, grpcCodeName } from './csi-error.js'
import { withDeadline } from './deadline.js'
import type { CsiDriverRegistry } from './driver-registry.js'
import type { CsiDriverObjects } from './driver-objects.js'
import { sha256Hex } from './sha256.js'

export const CSI_PLUGIN_NAME = 'kubernetes.io/csi'

export interface CsiRuntime {
  readonly context: () => VolumePluginContext
  readonly registry: CsiDriverRegistry
  readonly objects: CsiDriverObjects
  readonly timeoutMs: number
  readonly attachPollMs: number
  readonly getVolumeAttachment?: (name: string) => Promise<VolumeAttachment>
}

/**
 * The registered driver, or a transient failure (nothing happened; retry when it registers), worded
 * with the kubelet's `step` prefix when given (see {@link driverNotRegistered}).
 */
export function driverOf(rt: CsiRuntime, name: string, step?: string): CsiDriver {
  const entry = rt.registry.get(name)
  if (!entry) throw driverNotRegistered(name, step)
  return entry.driver
}

/** Runs one CSI call under the per-call deadline, timed as `csi_operations_seconds`. */
export async function call<T>(rt: CsiRuntime, driver: string, method: string, fn: (options: CsiCallOptions) => Promise<T>): Promise<T> {
  const { clock, metrics } = rt.context()
  const started = clock.now()
  let code = 'OK'
  try {
    return await withDeadline(clock, rt.timeoutMs, fn)
  } catch (err) {
    code = err instanceof CsiError ? grpcCodeName(err.grpcCode) : 'Unknown'
    throw err
  } finally {
    metrics.observe('csi_operations_seconds', { driver_name: driver, method_name: method, grpc_status_code: code, migrated: 'false' }, (clock.now() - started) / 1000)
  }
}

export async function capabilitiesOf(rt: CsiRuntime, name: string): Promise<readonly CsiNodeCapability[]> {
  const driver = driverOf(rt, name)
  return call(rt, name, '/csi.v1.Node/NodeGetCapabilities', (o) => driver.nodeGetCapabilities(o))
}

/** The CSIDriver object, freshly read; null when none exists (the defaults apply). */
export async function driverObject(rt: CsiRuntime, name: string): Promise<CSIDriver | null> {
  try {
    return await rt.objects.fetch(name)
  } catch (err) {
    const cached = rt.objects.peek(name)
    if (cached !== undefined) return cached
    throw new Error(`failed to get CSIDriver ${name}: ${errorMessage(err)}`)
  }
}

/** `plugins/kubernetes.io/csi/<driver>/<sha256(handle)>/globalmount`. */
export function stagingPath(rt: CsiRuntime, driver: string, volumeHandle: string): string {
  return joinPath(rt.context().paths.pluginDir(CSI_PLUGIN_NAME), driver, sha256Hex(volumeHandle), 'globalmount')
}
