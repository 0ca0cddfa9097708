/**
 * What every generated operation needs, and the helpers they share: error texts, events, metrics
 * and the "error state" rules of SPEC §3.3.1.
 */
import type { Pod } from '../api/kubernetes.js'
import type { VolumeSpec } from '../api/volume-spec.js'
import type { ActualStateOfWorld, MarkVolumeOptions } from '../cache/actual-state.js'
import type { VolumeToMount } from '../cache/desired-state.js'
import type { Clock } from '../clock.js'
import { type FailureKind, OperationError, errorMessage, failureKind } from '../errors.js'
import type { Host } from '../host/host.js'
import type { Logger, Metrics, Recorder } from '../observability.js'
import type { JournalRecord, VolumeJournal } from '../journal/journal.js'
import type { Paths } from '../paths.js'
import type { PluginManager } from '../plugins/plugin-manager.js'
import type { ObjectReader } from '../populator/sources.js'

export interface OperationContext {
  readonly plugins: PluginManager
  readonly asw: ActualStateOfWorld
  readonly host: Host
  readonly paths: Paths
  readonly nodeName: string
  readonly objects: ObjectReader
  readonly clock: Clock
  readonly logger: Logger
  readonly recorder: Recorder
  readonly metrics: Metrics
  /** Passed to `waitForAttach`. @default 10 min */
  readonly waitForAttachTimeoutMs: number
  /** Where intents and outcomes are recorded before and after each step, when kubevol keeps a journal. */
  readonly journal?: VolumeJournal
}

/** The (volume, pod) a message is about. */
export interface MessageSubject {
  /**
   * The volume's name in the message, as the kubelet's `GenerateMsg`: the spec's name for a volume
   * to mount or an attached volume (the PV's name for a claim, so `MountVolume.SetUp failed for volume
   * "pvc-…"`), the pod's volume name (outer) for a mounted volume.
   */
  readonly volumeSpecName: string
  readonly uniqueName: string
  readonly pod?: Pod
}

/** `<prefix> for volume "<name>" <suffix>`: the text that goes into events. */
export function simpleMessage(prefix: string, subject: MessageSubject, suffix = ''): string {
  return `${prefix} for volume "${subject.volumeSpecName}"${suffix ? ` ${suffix}` : ''}`
}

/** `<prefix> for volume "<name>" (UniqueName: "...") pod "<name>" (UID: "...") <suffix>`: the log text. */
export function detailedMessage(prefix: string, subject: MessageSubject, suffix = ''): string {
  const pod = subject.pod ? ` pod "${subject.pod.metadata.name ?? ''}" (UID: "${subject.pod.metadata.uid ?? ''}")` : ''
  return `${prefix} for volume "${subject.volumeSpecName}" (UniqueName: "${subject.uniqueName}")${pod}${suffix ? ` ${suffix}` : ''}`
}

/** A failed step: both texts end with ` : <cause>`, the kind comes from the cause unless given. */
export function stepFailed(prefix: string, subject: MessageSubject, cause: unknown, kind?: FailureKind): OperationError {
  const suffix = `: ${errorMessage(cause)}`
  return new OperationError(detailedMessage(prefix, subject, suffix), simpleMessage(prefix, subject, suffix), kind ?? failureKind(cause), {
    cause,
  })
}

/** The subject of a mount-side operation. */
export function subjectOf(vtm: VolumeToMount): MessageSubject {
  return { volumeSpecName: vtm.spec.name, uniqueName: vtm.volumeName, pod: vtm.pod }
}

/** `MarkVolumeOpts` for a desired (volume, pod). */
export function markOptions(vtm: VolumeToMount, spec: VolumeSpec = vtm.spec): MarkVolumeOptions {
  return {
    podName: vtm.podName,
    podUID: vtm.pod.metadata.uid ?? vtm.podName,
    volumeName: vtm.volumeName,
    outerVolumeSpecName: vtm.outerVolumeSpecNames[0] ?? spec.name,
    volumeGidValue: vtm.volumeGidValue,
    spec,
    seLinuxMountContext: vtm.seLinuxLabel,
  }
}

/**
 * After a failed SetUp (SPEC §3.3.1): an uncertain error on a not-mounted pod → uncertain; a final
 * error on an uncertain pod → not mounted, unless the entry was reconstructed (a mount from before
 * the restart may still exist). Transient errors change nothing.
 */
export function markVolumeErrorState(ctx: OperationContext, vtm: VolumeToMount, kind: FailureKind): void {
  const state = ctx.asw.getVolumeMountState(vtm.volumeName, vtm.podName)
  if (kind === 'uncertain' && state === 'not-mounted') ctx.asw.markVolumeMountAsUncertain(markOptions(vtm))
  else if (kind === 'final' && state === 'uncertain' && !ctx.asw.isVolumeReconstructed(vtm.volumeName, vtm.podName)) {
    ctx.asw.markVolumeAsUnmounted(vtm.podName, vtm.volumeName)
  }
}

/** The same rules for the device mount. */
export function markDeviceErrorState(
  ctx: OperationContext,
  vtm: VolumeToMount,
  kind: FailureKind,
  devicePath: string,
  deviceMountPath: string,
): void {
  const state = ctx.asw.getDeviceMountState(vtm.volumeName)
  if (kind === 'uncertain' && state === 'not-mounted') {
    ctx.asw.markDeviceAsUncertain(vtm.volumeName, devicePath, deviceMountPath, vtm.seLinuxLabel)
  } else if (kind === 'final' && state === 'uncertain' && !ctx.asw.isVolumeDeviceReconstructed(vtm.volumeName)) {
    ctx.asw.markDeviceAsUnmounted(vtm.volumeName)
  }
}

/** Emits an event about a pod (or any object). */
export function emitEvent(
  ctx: OperationContext,
  target: Pod | undefined,
  type: 'Normal' | 'Warning',
  reason: string,
  message: string,
): void {
  if (!target) return
  ctx.recorder.event({ type, reason, message, target: { kind: 'Pod', metadata: target.metadata }, time: ctx.clock.now() })
}

/** The journal's intent record for setting a desired volume up for its pod. */
export function setupRecord(vtm: VolumeToMount): JournalRecord {
  return {
    kind: 'setup',
    volume: vtm.volumeName,
    pod: vtm.podName,
    podUID: vtm.pod.metadata.uid ?? vtm.podName,
    outerName: vtm.outerVolumeSpecNames[0] ?? vtm.spec.name,
    spec: vtm.spec,
    gid: vtm.volumeGidValue,
  }
}
