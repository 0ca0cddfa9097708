/**
 * The block volume operations (SPEC §6.5, §7.8): MapVolume, UnmapVolume, UnmapDevice. A mapped
 * volume is a symlink `<pod>/volumeDevices/<plugin>/<volume>` → the device, plus a bind mount of the
 * device at `<global map path>/<pod UID>` that counts the pods using it.
 */
import type { BlockVolumeMapper } from '../plugins/plugin.js'
import type { AttachedVolume, MountedVolume } from '../cache/actual-state.js'
import { OperationError, failureKind } from '../errors.js'
import type { Host } from '../host/host.js'
import { joinPath } from '../paths.js'
import type { VolumePlugin } from '../plugins/plugin.js'
import {
  type OperationContext,
  detailedMessage,
  emitEvent,
  markOptions,
  markVolumeErrorState,
  setupRecord,
  simpleMessage,
  stepFailed,
  subjectOf,
} from './context.js'
import type { GeneratedOperation, MountRequestVolume } from './mount-operations.js'
import { expandVolumeDuringMount } from './node-expander.js'
import { assertTearDownChain } from './pod-dir-chain.js'

/** Links the device into the pod and takes the global reference (kubelet `util.MapBlockVolume`). */
async function mapBlockVolume(
  host: Host,
  devicePath: string,
  globalMapPath: string,
  podDeviceMapDir: string,
  linkName: string,
  podUID: string,
): Promise<void> {
  await host.mkdir(podDeviceMapDir, { recursive: true })
  const link = joinPath(podDeviceMapDir, linkName)
  const existing = await host.lstat(link)
  const current = existing?.type === 'symlink' ? await host.readlink(link) : undefined
  if (current !== devicePath) {
    if (existing) await host.remove(link)
    await host.symlink(devicePath, link)
  }
  await host.mkdir(globalMapPath, { recursive: true })
  const ref = joinPath(globalMapPath, podUID)
  if (!(await host.lstat(ref))) await host.writeFile(ref, '')
  if (!(await host.isMountPoint(ref))) await host.mount({ source: devicePath, target: ref, bind: true })
}

/** Removes the pod's link and its global reference. Idempotent. */
async function unmapBlockVolume(
  host: Host,
  globalMapPath: string,
  podDeviceMapDir: string,
  linkName: string,
  podUID: string,
): Promise<void> {
  const ref = joinPath(globalMapPath, podUID)
  if (await host.lstat(ref)) {
    if (await host.isMountPoint(ref)) await host.unmount(ref)
    await host.remove(ref)
  }
  const link = joinPath(podDeviceMapDir, linkName)
  if (await host.lstat(link)) await host.remove(link)
}

function findMapper(prefix: string, find: () => VolumePlugin, subject: { volumeSpecName: string; uniqueName: string }) {
  let plugin: VolumePlugin
  try {
    plugin = find()
  } catch (err) {
    throw stepFailed(prefix, subject, err)
  }
  if (!plugin.block) {
    // The kubelet's GenerateErrorDetailed("<prefix> to find BlockVolumeMapper plugin. Volume plugin
    // is nil.", nil): the words belong to the prefix, and no cause follows them.
    const text = `${prefix} to find BlockVolumeMapper plugin. Volume plugin is nil.`
    throw new OperationError(detailedMessage(text, subject), simpleMessage(text, subject), 'final')
  }
  return { plugin, block: plugin.block }
}

/** "map_volume": wait for attach → set up the device → publish → link into the pod → mark mounted. */
export function generateMapVolume(ctx: OperationContext, vtm: MountRequestVolume): GeneratedOperation {
  const subject = subjectOf(vtm)
  const { plugin, block } = findMapper('MapVolume.FindMapperPluginBySpec failed', () => ctx.plugins.findPluginBySpec(vtm.spec), subject)
  return {
    name: 'map_volume',
    pluginName: plugin.name,
    run: async () => {
      const { spec, pod } = vtm
      let mapper: BlockVolumeMapper
      try {
        mapper = block.newBlockVolumeMapper(spec, pod)
      } catch (err) {
        throw stepFailed('MapVolume.NewBlockVolumeMapper initialization failed', subject, err, 'final')
      }
      let devicePath = vtm.devicePath
      if (plugin.attach?.canAttach(spec)) {
        try {
          devicePath = await plugin.attach.waitForAttach(spec, devicePath, pod, ctx.waitForAttachTimeoutMs)
        } catch (err) {
          throw stepFailed('MapVolume.WaitForAttach failed', subject, err)
        }
      }
      const globalMapPath = mapper.getGlobalMapPath(spec)
      if (ctx.asw.getDeviceMountState(vtm.volumeName) !== 'mounted') {
        await ctx.journal?.record({ kind: 'device', volume: vtm.volumeName, spec, devicePath, path: globalMapPath })
        if (mapper.setUpDevice) {
          try {
            await mapper.setUpDevice()
          } catch (err) {
            const kind = failureKind(err)
            const state = ctx.asw.getDeviceMountState(vtm.volumeName)
            if (kind === 'uncertain' && state === 'not-mounted') ctx.asw.markDeviceAsUncertain(vtm.volumeName, devicePath, globalMapPath)
            else if (kind === 'final' && state === 'uncertain' && !ctx.asw.isVolumeDeviceReconstructed(vtm.volumeName)) {
              ctx.asw.markDeviceAsUnmounted(vtm.volumeName)
            }
            throw stepFailed('MapVolume.SetUpDevice failed', subject, err)
          }
        }
        ctx.asw.markDeviceAsMounted(vtm.volumeName, devicePath, globalMapPath)
      }
      if (mapper.mapPodDevice) {
        try {
          const published = await mapper.mapPodDevice()
          if (published) devicePath = published
        } catch (err) {
          markVolumeErrorState(ctx, vtm, failureKind(err))
          throw stepFailed('MapVolume.MapPodDevice failed', subject, err)
        }
      }
      if (!devicePath) throw stepFailed('MapVolume failed', subject, 'Device path of the volume is empty', 'final')
      const { dir, linkName } = mapper.getPodDeviceMapPath()
      await ctx.journal?.record(setupRecord(vtm))
      try {
        await mapBlockVolume(ctx.host, devicePath, globalMapPath, dir, linkName, pod.metadata.uid ?? vtm.podName)
      } catch (err) {
        markVolumeErrorState(ctx, vtm, 'uncertain')
        throw stepFailed('MapVolume.MapBlockVolume failed', subject, err)
      }
      try {
        // A raw block volume grows too (SPEC §6.6): its path is the published device.
        const deviceStagePath = plugin.deviceMount?.canDeviceMount(spec) ? plugin.deviceMount.getDeviceMountPath(spec) : ''
        await expandVolumeDuringMount(ctx, vtm, plugin.nodeExpand, { devicePath, deviceMountPath: devicePath, deviceStagePath })
      } catch (err) {
        // Mapped, but containers must not start on a device that should have grown: uncertain, so
        // it is unmapped once no pod wants it.
        ctx.asw.markVolumeMountAsUncertain(markOptions(vtm))
        throw stepFailed('MapVolume.MarkVolumeAsMounted failed while expanding volume', subject, err)
      }
      ctx.metrics.observe(
        'volume_operation_total_seconds',
        { plugin_name: plugin.name, operation_name: 'overall_volume_mount' },
        (ctx.clock.now() - vtm.mountRequestTime) / 1000,
      )
      ctx.asw.markVolumeAsMounted(markOptions(vtm))
      ctx.logger.info(detailedMessage('MapVolume.MapPodDevice succeeded', subject))
      emitEvent(ctx, pod, 'Normal', 'SuccessfulMountVolume', simpleMessage('MapVolume.MapPodDevice succeeded', subject))
    },
  }
}

/** "unmap_volume": mark uncertain → unlink from the pod → unpublish → mark unmounted. */
export function generateUnmapVolume(ctx: OperationContext, mv: MountedVolume): GeneratedOperation {
  const subject = { volumeSpecName: mv.outerVolumeSpecName, uniqueName: mv.volumeName }
  const { plugin, block } = findMapper('UnmapVolume.FindMapperPluginByName failed', () => ctx.plugins.findPluginByName(mv.pluginName), subject)
  return {
    name: 'unmap_volume',
    pluginName: plugin.name,
    run: async () => {
      const opts = {
        podName: mv.podName,
        podUID: mv.podUID,
        volumeName: mv.volumeName,
        outerVolumeSpecName: mv.outerVolumeSpecName,
        volumeGidValue: mv.volumeGidValue,
        spec: mv.spec,
      }
      // The link and what the plugin unpublishes are reached through the pod's directories: one
      // swapped for a symlink would lead the removals elsewhere. A host that holds the root
      // (openRoot) refuses the symlink in the call that meets it; any other is checked by name first.
      if (!ctx.host.openRoot) {
        try {
          await assertTearDownChain(ctx.host, ctx.paths, { podUID: mv.podUID, pluginName: mv.pluginName, block: true, volumeName: mv.innerVolumeSpecName })
        } catch (err) {
          throw stepFailed('UnmapVolume.UnmapBlockVolume failed', subject, err)
        }
      }
      ctx.asw.markVolumeMountAsUncertain(opts)
      const unmapper = block.newBlockVolumeUnmapper(mv.innerVolumeSpecName, mv.podUID)
      const { dir, linkName } = unmapper.getPodDeviceMapPath()
      try {
        await unmapBlockVolume(ctx.host, unmapper.getGlobalMapPath(mv.spec), dir, linkName, mv.podUID)
      } catch (err) {
        throw stepFailed('UnmapVolume.UnmapBlockVolume failed', subject, err)
      }
      if (unmapper.unmapPodDevice) {
        try {
          await unmapper.unmapPodDevice()
        } catch (err) {
          throw stepFailed('UnmapVolume.UnmapPodDevice failed', subject, err)
        }
      }
      ctx.journal?.note({ kind: 'torn-down', volume: mv.volumeName, pod: mv.podName })
      ctx.asw.markVolumeAsUnmounted(mv.podName, mv.volumeName)
    },
  }
}

/** "unmap_device": refuse while pods still reference it → tear down → remove the map path. */
export function generateUnmapDevice(ctx: OperationContext, av: AttachedVolume): GeneratedOperation {
  const subject = { volumeSpecName: av.spec.name, uniqueName: av.volumeName }
  const { plugin, block } = findMapper('UnmapDevice.FindMapperPluginByName failed', () => ctx.plugins.findPluginByName(av.pluginName), subject)
  return {
    name: 'unmap_device',
    pluginName: plugin.name,
    run: async () => {
      const unmapper = block.newBlockVolumeUnmapper(av.spec.name, '')
      const globalMapPath = av.deviceMountPath || unmapper.getGlobalMapPath(av.spec)
      const refs: string[] = []
      if (await ctx.host.lstat(globalMapPath)) {
        for (const name of await ctx.host.readdir(globalMapPath)) {
          if (await ctx.host.isMountPoint(joinPath(globalMapPath, name))) refs.push(name)
        }
      }
      if (refs.length > 0) {
        throw stepFailed('UnmapDevice failed', subject, `the device "${av.devicePath}" is still referenced from other Pods [${refs.join(' ')}]`, 'final')
      }
      ctx.asw.markDeviceAsUncertain(av.volumeName, av.devicePath, globalMapPath)
      if (unmapper.tearDownDevice) {
        try {
          await unmapper.tearDownDevice(globalMapPath, av.devicePath)
        } catch (err) {
          throw stepFailed('UnmapDevice.TearDownDevice failed', subject, err)
        }
      }
      try {
        if (await ctx.host.lstat(globalMapPath)) await ctx.host.removeAll(globalMapPath)
      } catch (err) {
        throw stepFailed('UnmapDevice.RemoveMapPath failed', subject, err)
      }
      ctx.journal?.note({ kind: 'device-unmounted', volume: av.volumeName })
      ctx.asw.markDeviceAsUnmounted(av.volumeName)
    },
  }
}
