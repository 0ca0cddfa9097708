/**
 * The desired state of the world (SPEC §3.2): which volumes should be mounted for which pods.
 * Written by the populator (and `markVolumesReportedInUse` from node status); read by the
 * reconciler and the manager. Views returned are copies.
 */
import type { Pod, SELinuxOptions } from '../api/kubernetes.js'
import { volumeSELinuxLabel } from '../api/selinux.js'
import type { UniquePodName, UniqueVolumeName } from '../api/names.js'
import { storageOf } from '../api/quantity.js'
import { type VolumeSpec, accessModesOf, volumeGidValueOf } from '../api/volume-spec.js'
import type { Clock } from '../clock.js'
import { VolumeSpecError, errorMessage } from '../errors.js'
import { type PluginManager, uniqueVolumeNameOf } from '../plugins/plugin-manager.js'
import { ChangeFeed } from './change-feed.js'
import { desiredSizeLimitOf } from './desired-size-limit.js'
import { flatString } from './flat-string.js'
import { type NameList, addName, deleteName, nameCount, nameListOf } from './name-list.js'
import { SmallMap } from './small-map.js'

/** The kubelet keeps at most this many distinct errors per pod (an insert happens while size ≤ 10). */
export const MAX_POD_ERRORS = 10

/** One (volume, pod) pair the reconciler must mount (kubelet `VolumeToMount`). */
export interface VolumeToMount {
  readonly volumeName: UniqueVolumeName
  readonly podName: UniquePodName
  readonly pod: Pod
  readonly spec: VolumeSpec
  readonly pluginName: string
  /** Names of the pod volumes that resolve to this volume (two pod volumes may share a PVC). */
  readonly outerVolumeSpecNames: readonly string[]
  readonly pluginIsAttachable: boolean
  readonly pluginIsDeviceMountable: boolean
  readonly volumeGidValue: string
  readonly reportedInUse: boolean
  /** Size limit of a local ephemeral volume, bytes (SPEC §3.2.2). */
  readonly desiredSizeLimit: number | undefined
  /** PV capacity the file system should be expanded to, bytes. */
  readonly desiredPersistentVolumeSize: number | undefined
  readonly seLinuxLabel: string
  /** Clock time of the mount request; refreshed on re-add for volumes that require remount. */
  readonly mountRequestTime: number
}

/**
 * Picks a (volume, pod) pair from what the actual state's check of it needs, before its view is
 * built (see {@link DesiredStateOfWorld.getVolumesToMountFor}).
 */
export type VolumeToMountFilter = (
  podName: UniquePodName,
  volumeName: UniqueVolumeName,
  desiredPersistentVolumeSize: number | undefined,
  seLinuxLabel: string,
) => boolean

/**
 * How a (volume, pod) is set up again on every sync (a plugin's `requiresRemount`): not at all; when
 * an event says its pod or objects changed (`refreshOnEvents`); or on the remount period too, as no
 * event announces its content (a token).
 */
const Remount = { None: 0, OnEvents: 1, Timed: 2 } as const
type Remount = (typeof Remount)[keyof typeof Remount]

interface DesiredPod {
  pod: Pod
  spec: VolumeSpec
  /**
   * Sorted, without duplicates. Nearly every pod volume has one name, kept as the string alone (an
   * array for it cost more than the rest of the entry); a list is shared with the views, so it is
   * never changed in place.
   */
  outerNames: string | readonly string[]
  /**
   * The mount request's clock time, as an offset from the state's epoch: a clock time in
   * milliseconds is too large for V8's small integers and was a 16-byte number object per volume.
   */
  requestedAt: number
  remount: Remount
}

/** Of each pod with volumes: their names, and how many of them are set up again on every sync. */
interface PodVolumes {
  names: NameList<UniqueVolumeName>
  /** Volumes with a {@link Remount} other than none. */
  remount: number
  /** Volumes with {@link Remount.Timed}. */
  timed: number
}

/** What a desired volume is made of, apart from its pods. */
interface DesiredVolumeFields {
  readonly volumeName: UniqueVolumeName
  readonly pluginName: string
  readonly pluginIsAttachable: boolean
  readonly pluginIsDeviceMountable: boolean
  readonly volumeGidValue: string
  readonly desiredSizeLimit: number | undefined
  readonly persistentVolumeSize: number | undefined
  readonly seLinuxLabel: string
}

/** The fields most volumes leave at their default (no gid, no PV size, no SELinux label). */
interface RareFields {
  readonly volumeGidValue: string
  persistentVolumeSize: number | undefined
  readonly seLinuxLabel: string
}

const noRareFields: RareFields = Object.freeze({ volumeGidValue: '', persistentVolumeSize: undefined, seLinuxLabel: '' })

const attachableFlag = 1
const deviceMountableFlag = 2
const reportedInUseFlag = 4

/**
 * A desired volume, which is also the map of its pods: nearly every volume has one pod, and a map
 * object of its own for each of 100,000 volumes cost more than the volume's fields. Its flags are
 * one small integer, and the fields most volumes never set share one frozen default object until
 * a volume sets one: seven fields instead of eleven, for the object every desired volume has.
 */
class DesiredVolume extends SmallMap<UniquePodName, DesiredPod> {
  readonly volumeName: UniqueVolumeName
  readonly pluginName: string
  #flags: number
  readonly desiredSizeLimit: number | undefined
  #rare: RareFields

  constructor(fields: DesiredVolumeFields) {
    super()
    this.volumeName = fields.volumeName
    this.pluginName = fields.pluginName
    this.#flags = (fields.pluginIsAttachable ? attachableFlag : 0) | (fields.pluginIsDeviceMountable ? deviceMountableFlag : 0)
    this.desiredSizeLimit = fields.desiredSizeLimit
    const { volumeGidValue, persistentVolumeSize, seLinuxLabel } = fields
    this.#rare =
      volumeGidValue === '' && persistentVolumeSize === undefined && seLinuxLabel === ''
        ? noRareFields
        : { volumeGidValue, persistentVolumeSize, seLinuxLabel }
  }

  get pluginIsAttachable(): boolean {
    return (this.#flags & attachableFlag) !== 0
  }

  set pluginIsAttachable(value: boolean) {
    this.#flags = value ? this.#flags | attachableFlag : this.#flags & ~attachableFlag
  }

  get pluginIsDeviceMountable(): boolean {
    return (this.#flags & deviceMountableFlag) !== 0
  }

  get reportedInUse(): boolean {
    return (this.#flags & reportedInUseFlag) !== 0
  }

  set reportedInUse(value: boolean) {
    this.#flags = value ? this.#flags | reportedInUseFlag : this.#flags & ~reportedInUseFlag
  }

  get volumeGidValue(): string {
    return this.#rare.volumeGidValue
  }

  get seLinuxLabel(): string {
    return this.#rare.seLinuxLabel
  }

  get persistentVolumeSize(): number | undefined {
    return this.#rare.persistentVolumeSize
  }

  set persistentVolumeSize(size: number | undefined) {
    if (this.#rare === noRareFields) this.#rare = { ...noRareFields }
    this.#rare.persistentVolumeSize = size
  }

  /** The pods that use the volume. */
  get pods(): SmallMap<UniquePodName, DesiredPod> {
    return this
  }
}

/**
 * Mount request times are kept as offsets from an epoch that moves forward once an offset would
 * no longer be a small integer (2^30 ms, about twelve days); moving it rewrites every offset.
 */
const epochSpanMs = 2 ** 30

/** What the populator knows about a pod volume when it adds it. */
export interface AddPodToVolumeOptions {
  readonly podName: UniquePodName
  readonly pod: Pod
  readonly spec: VolumeSpec
  readonly outerVolumeSpecName: string
  /** SELinux options of the containers using the volume (merged with the pod's). */
  readonly seLinuxContainerContexts?: readonly SELinuxOptions[]
}

export class DesiredStateOfWorld {
  readonly #volumes = new Map<UniqueVolumeName, DesiredVolume>()
  readonly #podErrors = new Map<UniquePodName, Set<string>>()
  /**
   * Pod → the volumes it is in, so per-pod questions do not scan every volume, and how many of them
   * its plugin sets up again on every sync (configMap, secret, ...; each (volume, pod) says how in
   * its `remount`).
   */
  readonly #podVolumes = new Map<UniquePodName, PodVolumes>()
  /** Volumes whose plugin attaches them, so the attachability check does not scan every volume. */
  readonly #attachable = new Set<UniqueVolumeName>()
  readonly #plugins: PluginManager
  readonly #clock: Clock
  #seLinuxEnabled = false
  /** Clock time the pods' `requestedAt` offsets count from. */
  #epoch: number
  readonly changes = new ChangeFeed()

  constructor(plugins: PluginManager, clock: Clock) {
    this.#plugins = plugins
    this.#clock = clock
    this.#epoch = clock.now()
  }

  /**
   * `now` as an offset from the epoch, moving the epoch to `now` first when the offset would not be
   * a small integer (or the clock went back that far). A (volume, pod) requested more than about
   * 25 days before such a move keeps an exact offset too large for a small integer, and V8 then
   * boxes the field again: correct, only no longer smaller.
   */
  #offsetOf(now: number): number {
    const offset = now - this.#epoch
    // A clock with fractions of a millisecond gives offsets no small integer can hold: kept as they are.
    if (!Number.isInteger(offset)) return offset
    if (offset >= epochSpanMs || offset <= -epochSpanMs) {
      for (const volume of this.#volumes.values()) {
        volume.pods.forEach((pod) => {
          pod.requestedAt -= offset
        })
      }
      this.#epoch = now
      return 0
    }
    // An integer V8 knows to be one: a field that once held a double boxes every value after it.
    return offset | 0
  }

  /** Whether the host has SELinux: volumes of RWOP claims are then mounted with the pod's label. */
  setSELinuxEnabled(enabled: boolean): void {
    this.#seLinuxEnabled = enabled
  }

  /**
   * Adds a pod to a volume, creating the volume if needed; idempotent. Returns the unique volume
   * name. Throws "failed to get Plugin from volumeSpec for volume %q err=%v" when no plugin fits.
   */
  addPodToVolume(options: AddPodToVolumeOptions): UniqueVolumeName {
    const { podName, pod, spec, outerVolumeSpecName } = options
    let plugin: ReturnType<PluginManager['findPluginBySpec']>
    try {
      plugin = this.#plugins.findPluginBySpec(spec)
    } catch (err) {
      throw new VolumeSpecError(`failed to get Plugin from volumeSpec for volume "${spec.name}" err=${errorMessage(err)}`, {
        cause: err,
      })
    }
    const attachable = plugin.attach?.canAttach(spec) ?? false
    const deviceMountable = plugin.deviceMount?.canDeviceMount(spec) ?? false
    let volumeName: UniqueVolumeName
    try {
      volumeName = uniqueVolumeNameOf(plugin, spec, podName)
      // The caches, the journal and every operation keep this name as long as the volume exists.
      volumeName = flatString(volumeName)
    } catch (err) {
      throw new VolumeSpecError(
        `failed to GetUniqueVolumeNameFromSpec for volumeSpec "${spec.name}" using volume plugin "${plugin.name}" err=${errorMessage(err)}`,
        { cause: err },
      )
    }
    const seLinuxLabel = volumeSELinuxLabel({
      enabled: this.#seLinuxEnabled,
      pluginSupports: plugin.supportsSELinuxContextMount?.(spec) ?? false,
      accessModes: accessModesOf(spec),
      changePolicy: pod.spec?.securityContext?.seLinuxChangePolicy,
      containerOptions: options.seLinuxContainerContexts ?? [],
      volumeName: spec.name,
    })
    let volume = this.#volumes.get(volumeName)
    if (volume && volume.seLinuxLabel !== seLinuxLabel && !volume.pods.has(podName)) {
      throw new VolumeSpecError(`conflicting SELinux labels of volume ${spec.name}: "${volume.seLinuxLabel}" and "${seLinuxLabel}"`)
    }
    if (!volume) {
      const pvCapacity = spec.persistentVolume ? storageOf(spec.persistentVolume.spec?.capacity) : undefined
      volume = new DesiredVolume({
        volumeName,
        pluginName: plugin.name,
        pluginIsAttachable: attachable,
        pluginIsDeviceMountable: deviceMountable,
        volumeGidValue: volumeGidValueOf(spec),
        desiredSizeLimit: desiredSizeLimitOf(pod, spec),
        persistentVolumeSize: pvCapacity,
        seLinuxLabel,
      })
      this.#volumes.set(volumeName, volume)
      if (attachable) this.#attachable.add(volumeName)
    }
    const existing = volume.pods.get(podName)
    const now = this.#offsetOf(this.#clock.now())
    const outerNames = withOuterName(existing?.outerNames, outerVolumeSpecName)
    const requiresRemount = plugin.requiresRemount(spec)
    const before = existing?.remount ?? Remount.None
    // Once set up again on every sync, a (volume, pod) stays so until it is deleted.
    const remount = requiresRemount ? (plugin.refreshOnEvents?.(spec) === true ? Remount.OnEvents : Remount.Timed) : before
    volume.pods.set(podName, {
      pod,
      spec,
      outerNames,
      // A volume that must be set up again on every sync counts its request from the latest one.
      requestedAt: existing && !requiresRemount ? existing.requestedAt : now,
      remount,
    })
    let podVolumes = this.#podVolumes.get(podName)
    if (podVolumes) podVolumes.names = addName(podVolumes.names, volumeName)
    else this.#podVolumes.set(podName, (podVolumes = { names: nameListOf(volumeName), remount: 0, timed: 0 }))
    countRemount(podVolumes, before, -1)
    countRemount(podVolumes, remount, 1)
    this.changes.emit(volumeName, podName)
    return volumeName
  }

  /** Removes a pod from a volume (and the volume when no pod is left) and the pod's errors. No-op if absent. */
  deletePodFromVolume(podName: UniquePodName, volumeName: UniqueVolumeName): void {
    this.#podErrors.delete(podName)
    const volume = this.#volumes.get(volumeName)
    const pod = volume?.pods.get(podName)
    if (!volume || !pod) return
    volume.pods.delete(podName)
    if (volume.pods.size === 0) {
      this.#volumes.delete(volumeName)
      this.#attachable.delete(volumeName)
    }
    const podVolumes = this.#podVolumes.get(podName)
    if (podVolumes) {
      podVolumes.names = deleteName(podVolumes.names, volumeName)
      countRemount(podVolumes, pod.remount, -1)
      if (nameCount(podVolumes.names) === 0) this.#podVolumes.delete(podName)
    }
    this.changes.emit(volumeName, podName)
  }

  /**
   * Pods with a volume whose plugin sets it up again on every sync: they see object changes. With
   * `timedOnly`, only those with such a volume whose content no event announces (a token).
   */
  podsRequiringRemount(options?: { readonly timedOnly?: boolean }): UniquePodName[] {
    const timedOnly = options?.timedOnly ?? false
    const pods: UniquePodName[] = []
    for (const [podName, volumes] of this.#podVolumes) {
      if ((timedOnly ? volumes.timed : volumes.remount) > 0) pods.push(podName)
    }
    return pods
  }

  /** The pod has a volume whose plugin sets it up again on every sync. */
  podRequiresRemount(podName: UniquePodName): boolean {
    return (this.#podVolumes.get(podName)?.remount ?? 0) > 0
  }

  /** Sets `reportedInUse` for the named volumes and clears it for every other one. */
  markVolumesReportedInUse(names: Iterable<UniqueVolumeName>): void {
    const reported = new Set(names)
    for (const volume of this.#volumes.values()) {
      const inUse = reported.has(volume.volumeName)
      if (volume.reportedInUse !== inUse) {
        volume.reportedInUse = inUse
        this.changes.emit(volume.volumeName)
      }
    }
  }

  /** Overwrites the volume's attachability (a CSIDriver's `attachRequired` flipped). */
  markVolumeAttachability(volumeName: UniqueVolumeName, attachable: boolean): void {
    const volume = this.#volumes.get(volumeName)
    if (volume && volume.pluginIsAttachable !== attachable) {
      volume.pluginIsAttachable = attachable
      if (attachable) this.#attachable.add(volumeName)
      else this.#attachable.delete(volumeName)
      this.changes.emit(volumeName)
    }
  }

  /** The volumes desired as attachable, each with the spec of one of its pods. */
  attachableVolumes(): { readonly volumeName: UniqueVolumeName; readonly spec: VolumeSpec }[] {
    const result: { volumeName: UniqueVolumeName; spec: VolumeSpec }[] = []
    for (const volumeName of this.#attachable) {
      let spec: VolumeSpec | undefined
      this.#volumes.get(volumeName)?.pods.forEach((pod) => {
        spec ??= pod.spec
      })
      if (spec) result.push({ volumeName, spec })
    }
    return result
  }

  /** Sets the size the file system should be expanded to (bytes). */
  updatePersistentVolumeSize(volumeName: UniqueVolumeName, size: number): void {
    const volume = this.#volumes.get(volumeName)
    if (volume && volume.persistentVolumeSize !== size) {
      volume.persistentVolumeSize = size
      this.changes.emit(volumeName)
    }
  }

  /** The volume is desired (and, when a label is given, with that SELinux label). */
  volumeExists(volumeName: UniqueVolumeName, seLinuxMountContext = ''): boolean {
    const volume = this.#volumes.get(volumeName)
    return volume !== undefined && volume.seLinuxLabel === seLinuxMountContext
  }

  podExistsInVolume(podName: UniquePodName, volumeName: UniqueVolumeName, seLinuxMountContext = ''): boolean {
    const volume = this.#volumes.get(volumeName)
    return (volume?.pods.has(podName) ?? false) && volume?.seLinuxLabel === seLinuxMountContext
  }

  /** Any volume of the pod whose inner name is `specName`. */
  volumeExistsWithSpecName(podName: UniquePodName, specName: string): boolean {
    for (const name of this.#podVolumes.get(podName)?.names ?? []) {
      if (this.#volumes.get(name)?.pods.get(podName)?.spec.name === specName) return true
    }
    return false
  }

  /** One entry per (volume, pod). */
  getVolumesToMount(): VolumeToMount[] {
    const result: VolumeToMount[] = []
    for (const volume of this.#volumes.values()) {
      volume.pods.forEach((pod, podName) => {
        result.push(toView(volume, podName, pod, this.#epoch))
      })
    }
    return result
  }

  /**
   * The (volume, pod) pairs of one volume; with `where`, only the pods it picks, asked before their
   * views are built. The reconciler looks at a volume on every change to it and nearly always finds
   * each pod mounted: it asks the actual state in `where` and builds no view for those.
   */
  getVolumesToMountFor(volumeName: UniqueVolumeName, where?: VolumeToMountFilter): VolumeToMount[] {
    const volume = this.#volumes.get(volumeName)
    if (!volume) return []
    const result: VolumeToMount[] = []
    volume.pods.forEach((pod, podName) => {
      if (where && !where(podName, volume.volumeName, volume.persistentVolumeSize, volume.seLinuxLabel)) return
      result.push(toView(volume, podName, pod, this.#epoch))
    })
    return result
  }

  /** The (volume, pod) pairs of one pod. */
  getVolumesToMountForPod(podName: UniquePodName): VolumeToMount[] {
    const result: VolumeToMount[] = []
    for (const name of this.#podVolumes.get(podName)?.names ?? []) {
      const volume = this.#volumes.get(name)
      const pod = volume?.pods.get(podName)
      if (volume && pod) result.push(toView(volume, podName, pod, this.#epoch))
    }
    return result
  }

  /** Every unique volume name in the desired state. */
  volumeNames(): UniqueVolumeName[] {
    return [...this.#volumes.keys()]
  }

  /** Whether the desired volume's plugin is attachable; undefined when the volume is not desired. */
  isVolumeAttachable(volumeName: UniqueVolumeName): boolean | undefined {
    return this.#volumes.get(volumeName)?.pluginIsAttachable
  }

  /** Pods with at least one volume. */
  getPods(): Set<UniquePodName> {
    return new Set(this.#podVolumes.keys())
  }

  /** Outer name → unique volume name for one pod. */
  getVolumeNamesForPod(podName: UniquePodName): Map<string, UniqueVolumeName> {
    const result = new Map<string, UniqueVolumeName>()
    for (const name of this.#podVolumes.get(podName)?.names ?? []) {
      const outerNames = this.#volumes.get(name)?.pods.get(podName)?.outerNames ?? []
      if (typeof outerNames === 'string') result.set(outerNames, name)
      else for (const outer of outerNames) result.set(outer, name)
    }
    return result
  }

  /**
   * The unique volume name the pod's volume `outerName` resolves to, as {@link getVolumeNamesForPod}
   * maps it, without building the map (a waiter asks for one name at a time).
   */
  getVolumeNameForPod(podName: UniquePodName, outerName: string): UniqueVolumeName | undefined {
    let found: UniqueVolumeName | undefined
    for (const name of this.#podVolumes.get(podName)?.names ?? []) {
      const outerNames = this.#volumes.get(name)?.pods.get(podName)?.outerNames ?? []
      // The last match, as the map keeps the last one set.
      if (typeof outerNames === 'string' ? outerNames === outerName : outerNames.includes(outerName)) found = name
    }
    return found
  }

  /** Records an error for the pod (deduplicated; dropped once more than {@link MAX_POD_ERRORS} are kept). */
  addErrorToPod(podName: UniquePodName, message: string): void {
    let errors = this.#podErrors.get(podName)
    if (!errors) this.#podErrors.set(podName, (errors = new Set()))
    if (errors.size <= MAX_POD_ERRORS) errors.add(message)
  }

  /** The pod's errors, sorted, and clears them. */
  popPodErrors(podName: UniquePodName): string[] {
    const errors = this.#podErrors.get(podName)
    this.#podErrors.delete(podName)
    return errors ? [...errors].sort() : []
  }

  /** The pod's errors without clearing them. */
  peekPodErrors(podName: UniquePodName): string[] {
    return [...(this.#podErrors.get(podName) ?? [])].sort()
  }

  getPodsWithErrors(): UniquePodName[] {
    return [...this.#podErrors.keys()]
  }

  /** Number of (volume, pod) pairs, for metrics. */
  countByPlugin(): Map<string, number> {
    const counts = new Map<string, number>()
    for (const v of this.#volumes.values()) counts.set(v.pluginName, (counts.get(v.pluginName) ?? 0) + v.pods.size)
    return counts
  }
}

/** The sorted outer names of a (volume, pod) with `name` added. */
function withOuterName(known: string | readonly string[] | undefined, name: string): string | readonly string[] {
  if (known === undefined || known === name) return name
  if (typeof known === 'string') return [known, name].sort()
  return known.includes(name) ? known : [...known, name].sort()
}

/** Adds `sign` × one (volume, pod) set up again as `remount` to the pod's counts. */
function countRemount(volumes: PodVolumes, remount: Remount, sign: 1 | -1): void {
  if (remount === Remount.None) return
  volumes.remount += sign
  if (remount === Remount.Timed) volumes.timed += sign
}

function toView(volume: DesiredVolume, podName: UniquePodName, pod: DesiredPod, epoch: number): VolumeToMount {
  return {
    volumeName: volume.volumeName,
    podName,
    pod: pod.pod,
    spec: pod.spec,
    pluginName: volume.pluginName,
    outerVolumeSpecNames: typeof pod.outerNames === 'string' ? [pod.outerNames] : pod.outerNames,
    pluginIsAttachable: volume.pluginIsAttachable,
    pluginIsDeviceMountable: volume.pluginIsDeviceMountable,
    volumeGidValue: volume.volumeGidValue,
    reportedInUse: volume.reportedInUse,
    desiredSizeLimit: volume.desiredSizeLimit,
    desiredPersistentVolumeSize: volume.persistentVolumeSize,
    seLinuxLabel: volume.seLinuxLabel,
    mountRequestTime: epoch + pod.requestedAt,
  }
}
