/**
 * Node expansion of CSI volumes (kubelet `csi_expander.go`, SPEC §6.6): NodeExpandVolume with the
 * volume's access type, when the driver has EXPAND_VOLUME (otherwise there is nothing to do on the
 * node). A FailedPrecondition (the volume cannot grow while in use on this node) and an infeasible
 * size (InvalidArgument, OutOfRange) are {@link NodeExpansionError}s; every failure carries the
 * expander's `Expander.NodeExpand failed to expand the volume : ` prefix.
 */
import { isBlockSpec } from '../../api/volume-spec.js'
import { errorMessage } from '../../errors.js'
import { NodeExpansionError } from '../node-expansion-error.js'
import type { NodeExpandCapability } from '../plugin.js'
import { classifyCsiError, hasGrpcCode, rewordedError } from './csi-error.js'
import { accessModeOf, csiSourceOf, readSecrets } from './requests.js'
import { type CsiRuntime, call, capabilitiesOf, driverOf } from './runtime.js'

export function createCsiExpander(rt: CsiRuntime): NodeExpandCapability {
  return {
    requiresFSResize: () => true,
    async nodeExpand(o) {
      const source = csiSourceOf(o.spec)
      if (!source || source.ephemeral) throw new Error(`volume ${o.spec.name} is not a CSI persistent volume`)
      const driver = driverOf(rt, source.driver)
      const capabilities = await capabilitiesOf(rt, source.driver)
      // kubelet: OperationNotSupported, which the resize treats as nothing to do on the node.
      if (!capabilities.includes('EXPAND_VOLUME')) return true
      const secrets = await readSecrets(rt.context().objects, source.nodeExpandSecretRef, 'default')
      const accessMode = accessModeOf(o.spec, capabilities)
      try {
        await call(rt, source.driver, '/csi.v1.Node/NodeExpandVolume', (co) =>
          driver.nodeExpandVolume(
            {
              volumeId: source.volumeHandle,
              volumePath: o.deviceMountPath,
              stagingTargetPath: capabilities.includes('STAGE_UNSTAGE_VOLUME') ? o.deviceStagePath : '',
              requiredBytes: o.newSize,
              volumeCapability: isBlockSpec(o.spec) ? { block: {}, accessMode } : { mount: { fsType: source.fsType, mountFlags: [] }, accessMode },
              secrets,
            },
            co,
          ),
        )
      } catch (err) {
        const message = `Expander.NodeExpand failed to expand the volume : ${errorMessage(err)}`
        if (hasGrpcCode(err, 'FailedPrecondition')) throw new NodeExpansionError('failed-precondition', message, { cause: err })
        if (hasGrpcCode(err, 'InvalidArgument', 'OutOfRange')) throw new NodeExpansionError('infeasible', message, { cause: err })
        // Any other failure carries the expander's prefix too, of the kind its code says.
        throw rewordedError(message, classifyCsiError('rpc NodeExpandVolume', err))
      }
      return true
    },
  }
}
