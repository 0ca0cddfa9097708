/**
 * The file system operations (SPEC §6.5): MountVolume, UnmountVolume, UnmountDevice. Each is split
 * into a synchronous generation step (find the plugin; failures are returned at once, no backoff)
 * and the asynchronous operation it returns.
 */
import type { Mounter, Unmounter } from '../plugins/plugin.js'
import { joinPath } from '../paths.js'
import { cleanVolumeSubPaths } from './clean-sub-paths.js'
import { assertTearDownChain } from './pod-dir-chain.js'
import { expandVolumeDuringMount } from './node-expander.js'
import { subPathMounts, subPathTarget } from './subpath.js'
import { checkNodeAffinity } from '../api/node-affinity.js'
import { accessModesOf, mountOptionsOf } from '../api/volume-spec.js'
import type { AttachedVolume, MountedVolume } from '../cache/actual-state.js'
import type { VolumeToMount } from '../cache/desired-state.js'
import { type FailureKind, OperationError, errorMessage, failureKind, isHostError } from '../errors.js'
import type { VolumePlugin } from '../plugins/plugin.js'
import {
  type MessageSubject,
  type OperationContext,
  detailedMessage,
  markDeviceErrorState,
  markOptions,
  markVolumeErrorState,
  setupRecord,
  stepFailed,
  subjectOf,
} from './context.js'

/** A generated operation: its name, the plugin it runs for, and the work. */
export interface GeneratedOperation {
  readonly name: string
  readonly pluginName: string
  run(): Promise<void>
}

/** The desired volume with the device path the reconciler read from the actual state. */
export interface MountRequestVolume extends VolumeToMount {
  readonly devicePath: string
}

/** "volume_mount": wait for attach → mount device → set up → mark mounted. */
export function generateMountVolume(ctx: OperationContext, vtm: MountRequestVolume, isRemount: boolean): GeneratedOperation {
  const subject = subjectOf(vtm)
  let plugin: VolumePlugin
  try {
    plugin = ctx.plugins.findPluginBySpec(vtm.spec)
  } catch (err) {
    throw stepFailed('MountVolume.FindPluginBySpec failed', subject, err)
  }
  return {
    name: 'volume_mount',
    pluginName: plugin.name,
    run: () => mountVolume({ ctx, vtm, plugin, subject, isRemount }),
  }
}

/** What every step of one "volume_mount" works on. */
interface MountStep {
  readonly ctx: OperationContext
  readonly vtm: MountRequestVolume
  readonly plugin: VolumePlugin
  readonly subject: MessageSubject
  readonly isRemount: boolean
}

/** The operation: the checks, wait for attach, mount device, set up, sub paths, expansion, mark mounted. */
async function mountVolume(step: MountStep): Promise<void> {
  const { ctx, vtm, plugin, subject, isRemount } = step
  const { spec, pod } = vtm
  const mounter = await newCheckedMounter(step)
  const fsGroup = pod.spec?.securityContext?.fsGroup
  const fsGroupChangePolicy = pod.spec?.securityContext?.fsGroupChangePolicy
  let devicePath = vtm.devicePath
  if (plugin.attach?.canAttach(spec)) {
    try {
      devicePath = await plugin.attach.waitForAttach(spec, devicePath, pod, ctx.waitForAttachTimeoutMs)
    } catch (err) {
      throw stepFailed('MountVolume.WaitForAttach failed', subject, err)
    }
  }
  const device = await mountDeviceIfNeeded(step, devicePath, fsGroup)
  // The set-up's intent: durable before the step, unless the disk scan finds everything the step
  // makes without it (foundOnDisk); then it is handed to the journal in the same turn as the step,
  // unsynced, and not waited for: a write that is late or fails loses only what a crash before it
  // would, which the disk scan covers.
  if (device.setupIntent && ctx.journal) {
    if (foundOnDisk(plugin, vtm)) {
      ctx.journal.record(setupRecord(vtm), { sync: false }).catch((err: unknown) => {
        ctx.logger.warn('Journal write failed', { err: String(err), kind: 'setup', volume: vtm.volumeName })
      })
    } else {
      await ctx.journal.record(setupRecord(vtm))
    }
  }
  try {
    await mounter.setUp({
      fsGroup,
      fsGroupChangePolicy,
      fsUser: commonRunAsUser(vtm),
      desiredSize: vtm.desiredSizeLimit,
      seLinuxLabel: vtm.seLinuxLabel,
    })
  } catch (err) {
    markVolumeErrorState(ctx, vtm, await failureKindAt(ctx, mounter.getPath(), err))
    throw stepFailed('MountVolume.SetUp failed', subject, err)
  }
  const log = isRemount ? ctx.logger.debug : ctx.logger.info
  log.call(ctx.logger, detailedMessage('MountVolume.SetUp succeeded', subject))
  try {
    await prepareSubPaths(ctx, vtm, mounter.getPath())
  } catch (err) {
    // The volume is set up but a container could not use it: keep it possibly mounted, retry.
    ctx.asw.markVolumeMountAsUncertain(markOptions(vtm))
    throw stepFailed('MountVolume.SetUp failed', subject, err, 'uncertain')
  }
  try {
    await expandVolumeDuringMount(ctx, vtm, plugin.nodeExpand, { devicePath, deviceMountPath: mounter.getPath(), deviceStagePath: device.deviceMountPath })
  } catch (err) {
    // Containers must not start on a volume that should have grown; tearing it down later is safe.
    ctx.asw.markVolumeMountAsUncertain(markOptions(vtm))
    throw stepFailed('MountVolume.Setup failed while expanding volume', subject, err)
  }
  ctx.metrics.observe(
    'volume_operation_total_seconds',
    // A remount measures the time from the change that asked for it (an object refreshed, a pod
    // re-synced) to the new content being in place.
    { plugin_name: plugin.name, operation_name: isRemount ? 'overall_volume_remount' : 'overall_volume_mount' },
    (ctx.clock.now() - vtm.mountRequestTime) / 1000,
  )
  ctx.asw.markVolumeAsMounted(markOptions(vtm))
}

/** The checks before any work (node affinity, mount options, ReadWriteOncePod) and the plugin's mounter. All final. */
async function newCheckedMounter({ ctx, vtm, plugin, subject }: MountStep): Promise<Mounter> {
  const { spec, pod } = vtm
  const pv = spec.persistentVolume
  if (pv?.spec?.nodeAffinity && ctx.objects.getNode) {
    let reason: string | null
    try {
      reason = checkNodeAffinity(pv, await ctx.objects.getNode(ctx.nodeName))
    } catch (err) {
      reason = errorMessage(err)
    }
    if (reason) throw stepFailed('MountVolume.NodeAffinity check failed', subject, reason, 'final')
  }
  let mounter: Mounter
  try {
    mounter = plugin.newMounter(spec, pod)
  } catch (err) {
    throw stepFailed('MountVolume.NewMounter initialization failed', subject, err, 'final')
  }
  // Only a PV carries mount options: other volumes skip building the (empty) list.
  if (spec.persistentVolume && mountOptionsOf(spec).length > 0 && !plugin.supportsMountOption()) {
    throw stepFailed('MountVolume.MountOptionSupport check failed', subject, 'mount options are not supported for this volume type', 'final')
  }
  const modes = accessModesOf(spec)
  if (modes.length === 1 && modes[0] === 'ReadWriteOncePod' && ctx.asw.isVolumeMountedElsewhere(vtm.volumeName, vtm.podName)) {
    throw stepFailed('MountVolume.SetUp failed', subject, 'volume uses the ReadWriteOncePod access mode and is already in use by another pod', 'final')
  }
  return mounter
}

/**
 * The device step of a plugin that mounts a device, unless the device is mounted already. Returns
 * its path ('' without one), and whether the set-up's intent is still to be written (the device
 * step writes both intents in one group commit).
 */
async function mountDeviceIfNeeded(
  { ctx, vtm, plugin, subject, isRemount }: MountStep,
  devicePath: string,
  fsGroup: number | undefined,
): Promise<{ deviceMountPath: string; setupIntent: boolean }> {
  const { spec } = vtm
  const deviceMount = plugin.deviceMount?.canDeviceMount(spec) ? plugin.deviceMount : undefined
  // A remount (content refresh) of a volume whose set-up the journal already holds needs no
  // new intent: without this, every configMap or secret volume wrote one record a minute.
  const setupIntent = !(isRemount && ctx.journal?.hasSetup(vtm.volumeName, vtm.podName))
  if (!deviceMount) return { deviceMountPath: '', setupIntent }
  let deviceMountPath: string
  try {
    deviceMountPath = deviceMount.getDeviceMountPath(spec)
  } catch (err) {
    throw stepFailed('MountVolume.GetDeviceMountPath failed', subject, err)
  }
  if (ctx.asw.getDeviceMountState(vtm.volumeName) === 'mounted') return { deviceMountPath, setupIntent }
  // Both intents in one group commit: the set-up's may precede its step (a crash in between
  // leaves an intent reconstruction finds nothing behind, which it cleans up).
  const deviceIntent = ctx.journal?.record({ kind: 'device', volume: vtm.volumeName, spec, devicePath, path: deviceMountPath })
  const podIntent = setupIntent ? ctx.journal?.record(setupRecord(vtm)) : undefined
  const args = { fsGroup, seLinuxLabel: vtm.seLinuxLabel }
  // A plugin's queries that change nothing (CSI's NodeGetCapabilities), and files the disk scan
  // finds without the journal (CSI's staging directory and vol_data.json), start while the intents
  // are made durable, the device's sync being the longest wait of the step; every other change
  // waits for them.
  const prepared = deviceMount.prepareMountDevice?.(spec, devicePath, deviceMountPath, args)
  try {
    await Promise.all([deviceIntent, podIntent])
  } catch (err) {
    await prepared?.abandon?.()
    throw err
  }
  const mountDevice = prepared ?? (() => deviceMount.mountDevice(spec, devicePath, deviceMountPath, args))
  try {
    await mountDevice()
  } catch (err) {
    // The set-up intent stays: an earlier attempt may have set the volume up, and only a
    // tear-down may say it is gone.
    markDeviceErrorState(ctx, vtm, await failureKindAt(ctx, deviceMountPath, err), devicePath, deviceMountPath)
    throw stepFailed('MountVolume.MountDevice failed', subject, err)
  }
  ctx.logger.info(detailedMessage('MountVolume.MountDevice succeeded', subject, `device mount path "${deviceMountPath}"`))
  ctx.asw.markDeviceAsMounted(vtm.volumeName, devicePath, deviceMountPath, vtm.seLinuxLabel)
  return { deviceMountPath, setupIntent: false }
}

/** Binds every sub path the pod's containers mount from this volume (idempotent). */
async function prepareSubPaths(ctx: OperationContext, vtm: VolumeToMount, volumePath: string): Promise<void> {
  if (!usesSubPaths(vtm.pod)) return
  const mounts = subPathMounts(vtm.pod, vtm.outerVolumeSpecNames)
  if (mounts.length === 0) return
  const subPaths = ctx.host.subPaths
  if (!subPaths) throw new Error('the host cannot make safe subPath binds')
  const dir = ctx.paths.podSubPathsDir(vtm.pod.metadata.uid ?? vtm.podName, vtm.spec.name)
  for (const mount of mounts) {
    const target = subPathTarget(dir, mount)
    if ((await ctx.host.lstat(target)) && (await ctx.host.isMountPoint(target))) continue
    await subPaths.bind(volumePath, mount.subPath, target, { readOnly: mount.readOnly || vtm.spec.readOnly })
  }
}

/**
 * True when a crash at any point of this volume's set-up leaves nothing reconstruction cannot find
 * without the journal (the plugin's `setUpFoundOnDisk`, see VolumePlugin), so its set-up intent need
 * not be durable before the step. Not for a pod with sub paths: their binds, made after the set-up,
 * keep to the rule that an intent is durable first.
 */
function foundOnDisk(plugin: VolumePlugin, vtm: VolumeToMount): boolean {
  return plugin.setUpFoundOnDisk === true && !usesSubPaths(vtm.pod)
}

/**
 * True when some container of the pod mounts a sub path (of any volume): the mount of every volume
 * asks, and most pods have none, so this looks before {@link subPathMounts} builds its sets and lists.
 */
function usesSubPaths(pod: VolumeToMount['pod']): boolean {
  for (const containers of [pod.spec?.initContainers, pod.spec?.containers]) {
    for (const c of containers ?? []) {
      for (const m of c.volumeMounts ?? []) if (m.subPath || m.subPathExpr) return true
    }
  }
  return false
}

/** The pod's runAsUser when every container agrees on one (undefined also when there are no containers). */
function commonRunAsUser(vtm: VolumeToMount): number | undefined {
  const podUser = vtm.pod.spec?.securityContext?.runAsUser
  // Compared as it goes (with a set's equality, NaN equal to itself) rather than collected in a set:
  // this runs for every volume mount.
  let seen = false
  let common: number | undefined
  for (const containers of [vtm.pod.spec?.initContainers, vtm.pod.spec?.containers]) {
    for (const c of containers ?? []) {
      const user = c.securityContext?.runAsUser ?? podUser
      if (!seen) {
        seen = true
        common = user
      } else if (user !== common && !(Number.isNaN(user) && Number.isNaN(common))) return undefined
    }
  }
  return common
}

/** "volume_unmount": clean subPaths → tear down → mark unmounted. Tear-down failure leaves it uncertain. */
export function generateUnmountVolume(ctx: OperationContext, mv: MountedVolume): GeneratedOperation {
  const subject = { volumeSpecName: mv.outerVolumeSpecName, uniqueName: mv.volumeName }
  let unmounter: Unmounter
  try {
    const plugin = ctx.plugins.findPluginByName(mv.pluginName)
    try {
      unmounter = plugin.newUnmounter(mv.innerVolumeSpecName, mv.podUID)
    } catch (err) {
      throw stepFailed('UnmountVolume.NewUnmounter failed', subject, err)
    }
  } catch (err) {
    if (err instanceof OperationError) throw err
    throw stepFailed('UnmountVolume.FindPluginByName failed', subject, err)
  }
  const tearDown = unmounter
  return {
    name: 'volume_unmount',
    pluginName: mv.pluginName,
    run: async () => {
      // Every path below is built through the pod's directories. A host that holds the root
      // (openRoot: the manager's run holds it) never follows a symlink beneath it, so a directory
      // swapped for one since set-up fails the call that meets it, nothing removed through it. A
      // host without it is checked by name first: nothing is touched when a level is not a real
      // directory. The plugin's reads that change nothing (CSI's vol_data.json) start with the check.
      const tearDownStep = tearDown.prepareTearDown?.() ?? (() => tearDown.tearDown())
      let subPathsMissing = false
      if (!ctx.host.openRoot) {
        try {
          ;({ subPathsMissing } = await assertTearDownChain(ctx.host, ctx.paths, { podUID: mv.podUID, pluginName: mv.pluginName, block: false, volumeName: mv.innerVolumeSpecName }))
        } catch (err) {
          throw stepFailed('UnmountVolume.TearDown failed', subject, err)
        }
      }
      // Without the pod's volume-subpaths (the usual pod, as the check saw it) nothing is cleaned.
      if (!subPathsMissing) {
        try {
          await cleanSubPaths(ctx, ctx.paths.podSubPathsDir(mv.podUID, mv.innerVolumeSpecName))
        } catch (err) {
          // A symlink on the way to the pod's volume-subpaths: the host refused to follow it. With no
          // mount of the pod's there (nor at a name beside it, where a swap would have moved one), no
          // subPath bind of kubevol's can be left behind: the volume itself is torn down. With one,
          // the step fails and is retried until the directory is back.
          if (!ctx.host.openRoot || !isHostError(err, 'ELOOP') || (await hasSubPathMounts(ctx, mv.podUID))) throw stepFailed('error cleaning subPath mounts', subject, err)
          ctx.logger.warn('subPath mounts not cleaned: a symlink beneath the root is not followed', { volume: mv.volumeName, pod: mv.podName, err: errorMessage(err) })
        }
      }
      try {
        await tearDownStep()
      } catch (failure) {
        const err = await withHolders(ctx, failure, tearDown.getPath())
        ctx.asw.markVolumeMountAsUncertain({
          podName: mv.podName,
          podUID: mv.podUID,
          volumeName: mv.volumeName,
          outerVolumeSpecName: mv.outerVolumeSpecName,
          volumeGidValue: mv.volumeGidValue,
          spec: mv.spec,
          seLinuxMountContext: mv.seLinuxMountContext,
        })
        throw stepFailed('UnmountVolume.TearDown failed', subject, err)
      }
      ctx.logger.info(
        `UnmountVolume.TearDown succeeded for volume "${mv.volumeName}" pod "${mv.podName}" (UID: "${mv.podUID}"). InnerVolumeSpecName "${mv.innerVolumeSpecName}". PluginName "${mv.pluginName}", VolumeGIDValue "${mv.volumeGidValue}"`,
      )
      ctx.journal?.note({ kind: 'torn-down', volume: mv.volumeName, pod: mv.podName })
      ctx.asw.markVolumeAsUnmounted(mv.podName, mv.volumeName)
    },
  }
}

/**
 * For a tear-down that failed because something holds the path (EBUSY), names what: the mounts
 * below it and the processes using it, so "why is my pod stuck" has an answer.
 */
async function withHolders(ctx: OperationContext, err: unknown, path: string): Promise<unknown> {
  const busy = isHostError(err, 'EBUSY') || /\bEBUSY\b/.test(errorMessage(err))
  if (!busy || !ctx.host.holders) return err
  try {
    const { mounts, processes } = await ctx.host.holders(path)
    const parts = [
      ...(mounts.length > 0 ? [`mounts [${mounts.join(' ')}]`] : []),
      ...(processes.length > 0 ? [`processes [${processes.map((p) => `${p.pid} (${p.command})`).join(' ')}]`] : []),
    ]
    if (parts.length === 0) return err
    return new Error(`${errorMessage(err)}; held by ${parts.join(' and ')}`, { cause: err })
  } catch {
    return err
  }
}

/** Whether anything is mounted at the pod's `volume-subpaths`, below it, or at a name that begins like it. */
async function hasSubPathMounts(ctx: OperationContext, podUID: string): Promise<boolean> {
  const dir = joinPath(ctx.paths.podDir(podUID), 'volume-subpaths')
  return (await ctx.host.mounts()).some((entry) => entry.target.startsWith(dir))
}

/**
 * Unmounts and removes every subPath bind under `path` (`volume-subpaths/<volume>`): see
 * {@link cleanVolumeSubPaths}. Nothing is removed while it is still a mount point, and nothing
 * below a mount point is looked at.
 */
async function cleanSubPaths(ctx: OperationContext, path: string): Promise<void> {
  await cleanVolumeSubPaths(ctx.host, path, { unmount: true })
}

/** "unmount_device": refuse while other mounts reference the device, unmount, check the device is free. */
export function generateUnmountDevice(ctx: OperationContext, av: AttachedVolume): GeneratedOperation {
  const subject = { volumeSpecName: av.spec.name, uniqueName: av.volumeName }
  let plugin: VolumePlugin
  try {
    plugin = ctx.plugins.findPluginByName(av.pluginName)
  } catch (err) {
    throw stepFailed('UnmountDevice.FindDeviceMountablePluginByName failed', subject, err)
  }
  const deviceMount = plugin.deviceMount
  if (!deviceMount) {
    throw stepFailed('UnmountDevice.FindDeviceMountablePluginByName failed', subject, `plugin ${plugin.name} cannot mount devices`)
  }
  return {
    name: 'unmount_device',
    pluginName: plugin.name,
    run: async () => {
      let deviceMountPath: string
      try {
        deviceMountPath = deviceMount.getDeviceMountPath(av.spec)
      } catch (err) {
        if (!errorMessage(err).includes('does not exist')) throw stepFailed('GetDeviceMountPath failed', subject, err)
        deviceMountPath = av.deviceMountPath
      }
      // A plugin's reads that change nothing (CSI's vol_data.json and NodeGetCapabilities) start
      // alongside the reference check; nothing changes before it passed.
      const unmountDevice = deviceMount.prepareUnmountDevice?.(deviceMountPath, av.spec) ?? (() => deviceMount.unmountDevice(deviceMountPath))
      let refs: readonly string[]
      try {
        refs = await deviceMount.getDeviceMountRefs(deviceMountPath)
      } catch (err) {
        throw stepFailed('GetDeviceMountRefs check failed', subject, err)
      }
      const foreign = refs.filter((ref) => ref !== deviceMountPath && !ref.startsWith(`${deviceMountPath}/`))
      if (foreign.length > 0) {
        throw stepFailed(
          'GetDeviceMountRefs check failed',
          subject,
          `the device mount path "${deviceMountPath}" is still mounted by other references [${foreign.join(' ')}]`,
          'final',
        )
      }
      try {
        await unmountDevice()
      } catch (err) {
        ctx.asw.markDeviceAsUncertain(av.volumeName, av.devicePath, deviceMountPath)
        throw stepFailed('UnmountDevice failed', subject, err)
      }
      if (av.devicePath && ctx.host.blockDevices) {
        const info = await ctx.host.stat(av.devicePath).catch(() => null)
        if (info?.type === 'block-device' && (await ctx.host.blockDevices.isOpen(av.devicePath))) {
          ctx.asw.markDeviceAsUncertain(av.volumeName, av.devicePath, deviceMountPath)
          throw stepFailed('UnmountDevice failed', subject, 'the device is in use when it was no longer expected to be in use', 'final')
        }
      }
      ctx.logger.info(detailedMessage('UnmountDevice succeeded', subject, `device mount path "${deviceMountPath}"`))
      ctx.journal?.note({ kind: 'device-unmounted', volume: av.volumeName })
      ctx.asw.markDeviceAsUnmounted(av.volumeName)
    },
  }
}

/**
 * The kind of a mount step's failure as the actual state should record it. A final error does not
 * prove that nothing is mounted: an earlier attempt that ended uncertain, or a step of this one
 * before it failed, may have left `path` mounted. A mount point stays possibly mounted (uncertain),
 * so that it is torn down once no pod wants it instead of leaking. A missing `path` is not mounted
 * (final), and so is one the host refuses to reach through a symlink beneath its root; a check
 * that fails otherwise (EIO, a broken mount) cannot say, so it is uncertain.
 */
async function failureKindAt(ctx: OperationContext, path: string, err: unknown): Promise<FailureKind> {
  const kind = failureKind(err)
  if (kind !== 'final' || !path) return kind
  try {
    return (await ctx.host.isMountPoint(path)) ? 'uncertain' : 'final'
  } catch (checkErr) {
    // Missing: not mounted. A symlink on the way, under a host that holds the root (which mounts
    // nothing through one): nothing of kubevol's can be mounted at that name either.
    return isHostError(checkErr, 'ENOENT') || (ctx.host.openRoot !== undefined && isHostError(checkErr, 'ELOOP')) ? 'final' : 'uncertain'
  }
}
