/**
 * Attach-side operations (SPEC §6.5, §6.6): VerifyControllerAttachedVolume, AttachVolume,
 * DetachVolume and ExpandInUseVolume.
 */
import type { Node } from '../api/kubernetes.js'
import { storageOf } from '../api/quantity.js'
import type { AttachedVolume } from '../cache/actual-state.js'
import { failureKind } from '../errors.js'
import type { VolumePlugin } from '../plugins/plugin.js'
import { volumeNameInUniqueName } from '../plugins/plugin-manager.js'
import { type OperationContext, emitEvent, simpleMessage, stepFailed, subjectOf } from './context.js'
import { type NodeExpansionOutcome, expandOnNode, readClaimOf } from './node-expander.js'
import type { GeneratedOperation, MountRequestVolume } from './mount-operations.js'

/** The claim's reported capacity, read only when the actual state does not know it yet. */
async function claimSize(ctx: OperationContext, vtm: MountRequestVolume): Promise<number | undefined> {
  const claim = vtm.spec.persistentVolume?.spec?.claimRef
  if (!claim?.name || ctx.asw.getClaimSize(vtm.volumeName)) return undefined
  try {
    const pvc = await ctx.objects.getPersistentVolumeClaim(claim.namespace ?? 'default', claim.name)
    return storageOf(pvc.status?.capacity)
  } catch (err) {
    throw stepFailed('VerifyControllerAttachedVolume fetching pvc failed', subjectOf(vtm), err)
  }
}

/**
 * "verify_controller_attached_volume": a volume that needs no attach is marked attached at once;
 * an attachable one must be reported in use and listed in the node's `volumesAttached`.
 */
export function generateVerifyControllerAttachedVolume(ctx: OperationContext, vtm: MountRequestVolume): GeneratedOperation {
  const subject = subjectOf(vtm)
  let plugin: VolumePlugin
  try {
    plugin = ctx.plugins.findPluginBySpec(vtm.spec)
  } catch (err) {
    throw stepFailed('VerifyControllerAttachedVolume.FindPluginBySpec failed', subject, err)
  }
  return {
    name: 'verify_controller_attached_volume',
    pluginName: plugin.name,
    run: async () => {
      const size = await claimSize(ctx, vtm)
      if (!vtm.pluginIsAttachable) {
        ctx.asw.markVolumeAsAttached(vtm.volumeName, vtm.spec, '')
        ctx.asw.initializeClaimSize(vtm.volumeName, size)
        return
      }
      if (!vtm.reportedInUse) {
        throw stepFailed(
          'Volume has not been added to the list of VolumesInUse in the node\'s volume status',
          subject,
          'not reported in use yet',
          'final',
        )
      }
      if (!ctx.objects.getNode) {
        throw stepFailed('VerifyControllerAttachedVolume failed fetching node from API server', subject, 'no node reader configured', 'final')
      }
      let node: Node
      try {
        node = await ctx.objects.getNode(ctx.nodeName)
      } catch (err) {
        throw stepFailed('VerifyControllerAttachedVolume failed fetching node from API server', subject, err)
      }
      const attached = node.status?.volumesAttached?.find((v) => v.name === vtm.volumeName)
      if (!attached) throw stepFailed('Volume not attached according to node status', subject, `volume ${vtm.volumeName} is not in node.status.volumesAttached`, 'final')
      ctx.logger.info(`Controller attach succeeded for volume "${vtm.volumeName}" device path "${attached.devicePath}"`)
      ctx.asw.markVolumeAsAttached(vtm.volumeName, vtm.spec, attached.devicePath)
      ctx.asw.initializeClaimSize(vtm.volumeName, size)
    },
  }
}

/** "volume_attach" (kubevol attaches itself): attach → event on the pod → mark attached. */
export function generateAttachVolume(ctx: OperationContext, vtm: MountRequestVolume): GeneratedOperation {
  const subject = subjectOf(vtm)
  let plugin: VolumePlugin
  try {
    plugin = ctx.plugins.findPluginBySpec(vtm.spec)
  } catch (err) {
    throw stepFailed('AttachVolume.FindAttachablePluginBySpec failed', subject, err)
  }
  const attach = plugin.attach
  if (!attach) throw stepFailed('AttachVolume.FindAttachablePluginBySpec failed', subject, `plugin ${plugin.name} cannot attach`)
  return {
    name: 'volume_attach',
    pluginName: plugin.name,
    run: async () => {
      let devicePath: string
      // Before the step: a crash after attaching must still leave the restart knowing to detach.
      await ctx.journal?.record({ kind: 'attached', volume: vtm.volumeName, spec: vtm.spec, devicePath: '' })
      try {
        devicePath = await attach.attach(vtm.spec, ctx.nodeName)
      } catch (err) {
        // A timeout may have attached it: hold it as attached with no device path, as a restart
        // would from the journal, so that it is detached once no pod wants it (detach is idempotent)
        // and waitForAttach makes sure of it while a pod does.
        if (failureKind(err) === 'uncertain' && !ctx.asw.volumeExists(vtm.volumeName)) ctx.asw.markVolumeAsAttached(vtm.volumeName, vtm.spec, '')
        const failure = stepFailed('AttachVolume.Attach failed', subject, err)
        emitEvent(ctx, vtm.pod, 'Warning', 'FailedAttachVolume', failure.eventMessage)
        throw failure
      }
      // The outcome (the device path) need not wait for the disk: lost in a crash, the intent above
      // stands and waitForAttach finds the device again.
      ctx.journal?.note({ kind: 'attached', volume: vtm.volumeName, spec: vtm.spec, devicePath })
      emitEvent(ctx, vtm.pod, 'Normal', 'SuccessfulAttachVolume', simpleMessage('AttachVolume.Attach succeeded', subject))
      ctx.asw.markVolumeAsAttached(vtm.volumeName, vtm.spec, devicePath)
    },
  }
}

/** "volume_detach": detach → forget the volume. */
export function generateDetachVolume(ctx: OperationContext, av: AttachedVolume): GeneratedOperation {
  const subject = { volumeSpecName: av.spec.name, uniqueName: av.volumeName }
  let plugin: VolumePlugin
  try {
    plugin = ctx.plugins.findPluginByName(av.pluginName)
  } catch (err) {
    throw stepFailed('DetachVolume.FindAttachablePluginBySpec failed', subject, err)
  }
  const attach = plugin.attach
  if (!attach) throw stepFailed('DetachVolume.NewDetacher failed', subject, `plugin ${plugin.name} cannot detach`)
  return {
    name: 'volume_detach',
    pluginName: plugin.name,
    run: async () => {
      let volumeName: string
      try {
        volumeName = plugin.getVolumeName(av.spec)
      } catch {
        volumeName = volumeNameInUniqueName(plugin, av.volumeName)
      }
      try {
        await attach.detach(volumeName, ctx.nodeName)
      } catch (err) {
        throw stepFailed('DetachVolume.Detach failed', subject, err)
      }
      ctx.logger.info(`DetachVolume.Detach succeeded for volume "${av.volumeName}"`)
      ctx.journal?.note({ kind: 'detached', volume: av.volumeName })
      ctx.asw.markVolumeAsDetached(av.volumeName)
    },
  }
}

/** "volume_fs_resize": grow the file system of a mounted volume from `currentSize` to the PV's size. */
export function generateExpandInUseVolume(ctx: OperationContext, vtm: MountRequestVolume, currentSize: number): GeneratedOperation {
  const subject = subjectOf(vtm)
  let plugin: VolumePlugin
  try {
    plugin = ctx.plugins.findPluginBySpec(vtm.spec)
  } catch (err) {
    throw stepFailed('NodeExpandVolume.FindPluginBySpec failed', subject, err)
  }
  const expand = plugin.nodeExpand
  return {
    name: 'volume_fs_resize',
    pluginName: plugin.name,
    run: async () => {
      const newSize = vtm.desiredPersistentVolumeSize
      if (!newSize || !currentSize) {
        throw stepFailed('NodeExpandvolume.expansion failed', subject, 'current or new size of the volume is not set', 'final')
      }
      const pv = vtm.spec.persistentVolume
      if (!expand?.requiresFSResize() || newSize <= currentSize || !pv) return
      const mounter = plugin.newMounter(vtm.spec, vtm.pod)
      const deviceStagePath = plugin.deviceMount?.canDeviceMount(vtm.spec) ? plugin.deviceMount.getDeviceMountPath(vtm.spec) : ''
      let outcome: NodeExpansionOutcome
      try {
        const pvc = await readClaimOf(ctx, pv)
        const paths = { devicePath: vtm.devicePath, deviceMountPath: mounter.getPath(), deviceStagePath, oldSize: currentSize }
        outcome = await expandOnNode(ctx, vtm, expand, pvc, paths, { size: newSize, quantity: pv.spec?.capacity?.storage ?? newSize })
      } catch (err) {
        const failure = stepFailed('NodeExpandVolume failed', subject, err)
        emitEvent(ctx, vtm.pod, 'Warning', 'VolumeResizeFailed', failure.eventMessage)
        throw failure
      }
      if (outcome.status === 'expanded') ctx.asw.markVolumeAsResized(vtm.volumeName, outcome.size)
      // Not to be tried again for this request (read-only, a failed precondition, a resize the claim
      // does not ask for, or one to the claim's allocated size, below the PV's): until the claim asks
      // anew or the volume is added again, not every pass. The kubelet would call NodeExpandVolume
      // again every 100 ms pass; kubevol's passes run on changes, so that would be a busy loop.
      if (outcome.status !== 'expanded' || outcome.size < newSize) ctx.asw.markForInUseExpansionError(vtm.volumeName)
    },
  }
}
