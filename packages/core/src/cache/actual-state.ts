/**
 * The actual state of the world (SPEC §3.3): which volumes are attached to the node, which are
 * device-mounted, and which are mounted into which pods. Written only by operation completions,
 * the populator (remount, claim size) and reconstruction. Views returned are copies.
 */
import type { VolumePlugin } from '../plugins/plugin.js'
import type { UniquePodName, UniqueVolumeName } from '../api/names.js'
import type { VolumeSpec } from '../api/volume-spec.js'
import { KubevolError, VolumeSpecError, errorMessage } from '../errors.js'
import { type PluginManager, uniqueVolumeNameOf } from '../plugins/plugin-manager.js'
import { ChangeFeed } from './change-feed.js'
import { type NameList, addName, deleteName, nameCount, nameListOf } from './name-list.js'
import { SmallMap } from './small-map.js'

export type VolumeMountState = 'mounted' | 'uncertain' | 'not-mounted'
export type DeviceMountState = 'mounted' | 'uncertain' | 'not-mounted'
export type Attachability = 'attachable' | 'not-attachable' | 'uncertain'

/** Why `podExistsInVolume` says the pod is not (fully) mounted. */
export type PodVolumeCheck =
  | { readonly status: 'not-attached' }
  | { readonly status: 'not-mounted'; readonly devicePath: string }
  | { readonly status: 'mounted'; readonly devicePath: string }
  | { readonly status: 'remount-required'; readonly devicePath: string }
  | { readonly status: 'fs-resize-required'; readonly devicePath: string; readonly currentSize: number }
  | { readonly status: 'selinux-mismatch'; readonly devicePath: string }

// The answers most checks give (a volume without a device: emptyDir, configMap, ...), shared: the
// reconciler asks on every look at a volume.
const notAttached: PodVolumeCheck = Object.freeze({ status: 'not-attached' })
const notMountedNoDevice: PodVolumeCheck = Object.freeze({ status: 'not-mounted', devicePath: '' })
const mountedNoDevice: PodVolumeCheck = Object.freeze({ status: 'mounted', devicePath: '' })

/**
 * Picks a mounted (volume, pod) entry from what the desired state's check of it needs, before its
 * view is built (see {@link ActualStateOfWorld.getAllMountedVolumesFor}).
 */
export type MountedVolumeFilter = (podName: UniquePodName, volumeName: UniqueVolumeName, seLinuxMountContext: string) => boolean

/** One pod's mount of a volume (kubelet `MountedVolume`). */
export interface MountedVolume {
  readonly volumeName: UniqueVolumeName
  readonly podName: UniquePodName
  readonly podUID: string
  readonly innerVolumeSpecName: string
  readonly outerVolumeSpecName: string
  readonly pluginName: string
  readonly spec: VolumeSpec
  readonly volumeGidValue: string
  readonly mountState: VolumeMountState
  readonly deviceMountPath: string
  readonly seLinuxMountContext: string
  readonly remountRequired: boolean
  /** The entry was rebuilt from disk after a restart and not yet confirmed. */
  readonly reconstructed: boolean
}

/** A volume attached to the node (kubelet `AttachedVolume`). */
export interface AttachedVolume {
  readonly volumeName: UniqueVolumeName
  readonly spec: VolumeSpec
  readonly pluginName: string
  readonly attachability: Attachability
  readonly devicePath: string
  readonly deviceMountPath: string
  readonly deviceMountState: DeviceMountState
  readonly seLinuxMountContext: string | undefined
  readonly persistentVolumeSize: number | undefined
  readonly mountedPods: readonly UniquePodName[]
}

/** `Globally` or `Uncertain`: the device may be mounted and must be unmounted before detach. */
export function deviceMayBeMounted(volume: Pick<AttachedVolume, 'deviceMountState'>): boolean {
  return volume.deviceMountState !== 'not-mounted'
}

/** Arguments of `markVolumeAsMounted` and friends (kubelet `MarkVolumeOpts`). */
export interface MarkVolumeOptions {
  readonly podName: UniquePodName
  readonly podUID: string
  readonly volumeName: UniqueVolumeName
  readonly outerVolumeSpecName: string
  readonly volumeGidValue: string
  readonly spec: VolumeSpec
  readonly seLinuxMountContext?: string
}

/** What a pod's entry keeps apart from its spec and state, when any of it is not the usual. */
interface PodDetails {
  readonly podUID: string
  readonly outerVolumeSpecName: string
  readonly volumeGidValue: string
}

const uncertainFlag = 1
const remountRequiredFlag = 2

/**
 * One pod's mount of a volume. Nearly every entry has the pod's name as its UID, the spec's name as
 * its outer name and no gid: such an entry keeps its spec and one small integer of state, and the
 * rest only when it differs (three fields instead of six, for an object every mounted volume has).
 */
class PodEntry {
  spec: VolumeSpec
  #flags: number
  /** Undefined when the UID is the pod's name, the outer name the spec's name, and the gid empty. */
  #details: PodDetails | undefined

  constructor(podName: UniquePodName, options: MarkVolumeOptions, state: 'mounted' | 'uncertain') {
    this.spec = options.spec
    this.#flags = state === 'uncertain' ? uncertainFlag : 0
    this.#details = detailsOf(podName, options.spec, options)
  }

  get state(): 'mounted' | 'uncertain' {
    return this.#flags & uncertainFlag ? 'uncertain' : 'mounted'
  }

  set state(state: 'mounted' | 'uncertain') {
    this.#flags = state === 'uncertain' ? this.#flags | uncertainFlag : this.#flags & ~uncertainFlag
  }

  get remountRequired(): boolean {
    return (this.#flags & remountRequiredFlag) !== 0
  }

  set remountRequired(required: boolean) {
    this.#flags = required ? this.#flags | remountRequiredFlag : this.#flags & ~remountRequiredFlag
  }

  podUID(podName: UniquePodName): string {
    return this.#details?.podUID ?? podName
  }

  get outerVolumeSpecName(): string {
    return this.#details?.outerVolumeSpecName ?? this.spec.name
  }

  get volumeGidValue(): string {
    return this.#details?.volumeGidValue ?? ''
  }

  /** Replaces the spec, keeping the UID, outer name and gid the entry had. */
  setSpec(podName: UniquePodName, spec: VolumeSpec): void {
    const details = { podUID: this.podUID(podName), outerVolumeSpecName: this.outerVolumeSpecName, volumeGidValue: this.volumeGidValue }
    this.spec = spec
    this.#details = detailsOf(podName, spec, details)
  }
}

/** `details` when any of it differs from what the pod's name and the spec imply, else undefined. */
function detailsOf(podName: UniquePodName, spec: VolumeSpec, details: PodDetails): PodDetails | undefined {
  const { podUID, outerVolumeSpecName, volumeGidValue } = details
  if (podUID === podName && outerVolumeSpecName === spec.name && volumeGidValue === '') return undefined
  return { podUID, outerVolumeSpecName, volumeGidValue }
}

/** The fields of a volume that only attachable, device-mountable, SELinux or resized volumes set. */
interface DeviceFields {
  devicePath: string
  deviceMountPath: string
  deviceMountState: DeviceMountState
  seLinuxMountContext: string | undefined
  persistentVolumeSize: number | undefined
  inUseExpansionError: boolean
}

/**
 * The device fields of a volume that has none, before and after its first mount gave it an SELinux
 * context ('' without SELinux): shared by every such volume.
 */
const noDeviceFields: Readonly<DeviceFields> = Object.freeze(deviceFields('', '', 'not-mounted', undefined, undefined, false))
const noDeviceFieldsMounted: Readonly<DeviceFields> = Object.freeze(deviceFields('', '', 'not-mounted', '', undefined, false))

// Spelled out: an object spread from another one keeps its fields out of line, in a second object.
function deviceFields(
  devicePath: string,
  deviceMountPath: string,
  deviceMountState: DeviceMountState,
  seLinuxMountContext: string | undefined,
  persistentVolumeSize: number | undefined,
  inUseExpansionError: boolean,
): DeviceFields {
  return { devicePath, deviceMountPath, deviceMountState, seLinuxMountContext, persistentVolumeSize, inUseExpansionError }
}

/** `fields` with `key` set to `value`: the same object when nothing changes, a shared one for the defaults. */
function withDeviceField<K extends keyof DeviceFields>(fields: Readonly<DeviceFields>, key: K, value: DeviceFields[K]): Readonly<DeviceFields> {
  if (fields[key] === value) return fields
  const f = fields
  const next = deviceFields(f.devicePath, f.deviceMountPath, f.deviceMountState, f.seLinuxMountContext, f.persistentVolumeSize, f.inUseExpansionError)
  next[key] = value
  for (const shared of [noDeviceFields, noDeviceFieldsMounted]) {
    if (
      next.devicePath === shared.devicePath &&
      next.deviceMountPath === shared.deviceMountPath &&
      next.deviceMountState === shared.deviceMountState &&
      next.seLinuxMountContext === shared.seLinuxMountContext &&
      next.persistentVolumeSize === shared.persistentVolumeSize &&
      next.inUseExpansionError === shared.inUseExpansionError
    ) {
      return shared
    }
  }
  return next
}

/**
 * A volume of the actual state, which is also the map of its pods' entries: nearly every volume has
 * one pod, and a map object of its own for each of 100,000 volumes cost more than the entry's fields.
 * Its device, SELinux and size fields are one object, shared by every volume that has the defaults
 * (seven fields instead of twelve, for most volumes of a node).
 */
class VolumeEntry extends SmallMap<UniquePodName, PodEntry> {
  readonly volumeName: UniqueVolumeName
  spec: VolumeSpec
  pluginName: string
  attachability: Attachability
  /** Never changed in place: replaced through {@link withDeviceField}. A plain field, see SmallMap. */
  device: Readonly<DeviceFields> = noDeviceFields

  constructor(volumeName: UniqueVolumeName, spec: VolumeSpec, pluginName: string, attachability: Attachability, devicePath: string) {
    super()
    this.volumeName = volumeName
    this.spec = spec
    this.pluginName = pluginName
    this.attachability = attachability
    this.devicePath = devicePath
  }

  /** The pods' entries, by pod. */
  get pods(): SmallMap<UniquePodName, PodEntry> {
    return this
  }

  get devicePath(): string {
    return this.device.devicePath
  }
  set devicePath(value: string) {
    this.device = withDeviceField(this.device, 'devicePath', value)
  }
  get deviceMountPath(): string {
    return this.device.deviceMountPath
  }
  set deviceMountPath(value: string) {
    this.device = withDeviceField(this.device, 'deviceMountPath', value)
  }
  get deviceMountState(): DeviceMountState {
    return this.device.deviceMountState
  }
  set deviceMountState(value: DeviceMountState) {
    this.device = withDeviceField(this.device, 'deviceMountState', value)
  }
  get seLinuxMountContext(): string | undefined {
    return this.device.seLinuxMountContext
  }
  set seLinuxMountContext(value: string | undefined) {
    this.device = withDeviceField(this.device, 'seLinuxMountContext', value)
  }
  get persistentVolumeSize(): number | undefined {
    return this.device.persistentVolumeSize
  }
  set persistentVolumeSize(value: number | undefined) {
    this.device = withDeviceField(this.device, 'persistentVolumeSize', value)
  }
  get inUseExpansionError(): boolean {
    return this.device.inUseExpansionError
  }
  set inUseExpansionError(value: boolean) {
    this.device = withDeviceField(this.device, 'inUseExpansionError', value)
  }
}

/** "no volume with the name %q exists in the list of attached volumes". */
export class VolumeNotInActualStateError extends KubevolError {
  constructor(volumeName: string) {
    super('VolumeNotAttached', `no volume with the name "${volumeName}" exists in the list of attached volumes`)
  }
}

/**
 * The actual state of the world. One class in one file, longer than the others: every transition
 * works on the same `#private` maps (volumes, their pods, what reconstruction found, final
 * expansion errors), and a split would have to expose them to a second file, which is what rule 9
 * of the style guide forbids. The record types above it are what its views return.
 */
export class ActualStateOfWorld {
  readonly #volumes = new Map<UniqueVolumeName, VolumeEntry>()
  readonly #podVolumes = new Map<UniquePodName, NameList<UniqueVolumeName>>()
  readonly #foundDuringReconstruction = new Map<UniqueVolumeName, Set<UniquePodName>>()
  readonly #finalExpansionErrors = new Set<UniqueVolumeName>()
  readonly #plugins: PluginManager
  #seLinuxEnabled: boolean
  readonly changes = new ChangeFeed()

  constructor(plugins: PluginManager, options: { seLinuxEnabled?: boolean } = {}) {
    this.#plugins = plugins
    this.#seLinuxEnabled = options.seLinuxEnabled ?? false
  }

  /** Whether mounts carry SELinux contexts (a volume mounted with another label is held back). */
  setSELinuxEnabled(enabled: boolean): void {
    this.#seLinuxEnabled = enabled
  }

  // ---- attach ------------------------------------------------------------------------------

  /**
   * Adds the volume (or updates its device path and attachability); returns its unique name. An
   * empty `volumeName` is derived from the spec through its attachable plugin, as the kubelet's
   * `addVolume` does (SPEC §3.3); throws "failed to get AttachablePlugin from volumeSpec for volume
   * %q err=%v" when no plugin attaches it.
   */
  markVolumeAsAttached(volumeName: UniqueVolumeName, spec: VolumeSpec, devicePath: string): UniqueVolumeName {
    const attachable = this.#attachability(spec)
    const name = volumeName || this.#attachableVolumeName(spec)
    this.#addVolume(name, spec, devicePath, attachable)
    return name
  }

  #attachableVolumeName(spec: VolumeSpec): UniqueVolumeName {
    let plugin: VolumePlugin | null
    try {
      plugin = this.#plugins.findAttachablePluginBySpec(spec)
    } catch (err) {
      throw new VolumeSpecError(`failed to get AttachablePlugin from volumeSpec for volume "${spec.name}" err=${errorMessage(err)}`, { cause: err })
    }
    if (!plugin) throw new VolumeSpecError(`failed to get AttachablePlugin from volumeSpec for volume "${spec.name}" err=<nil>`)
    try {
      // An attachable plugin always names the volume by its device: no pod is needed.
      return uniqueVolumeNameOf(plugin, spec, '')
    } catch (err) {
      throw new VolumeSpecError(
        `failed to GetUniqueVolumeNameFromSpec for volumeSpec "${spec.name}" using volume plugin "${plugin.name}" err=${errorMessage(err)}`,
        { cause: err },
      )
    }
  }

  /** Like {@link markVolumeAsAttached}, with attachability unknown (reconstruction). */
  addAttachUncertainReconstructedVolume(volumeName: UniqueVolumeName, spec: VolumeSpec, devicePath: string): void {
    this.#addVolume(volumeName, spec, devicePath, 'uncertain')
  }

  /**
   * Forgets the volume. While pods are still mounted it stays, and this returns false (the kubelet
   * only logs "failed to DeleteVolume %q, it still has %v mountedPods"). Absent → true.
   */
  markVolumeAsDetached(volumeName: UniqueVolumeName): boolean {
    const volume = this.#volumes.get(volumeName)
    if (!volume) return true
    if (volume.pods.size > 0) return false
    this.#volumes.delete(volumeName)
    this.#foundDuringReconstruction.delete(volumeName)
    this.changes.emit(volumeName)
    return true
  }

  // ---- pod mounts --------------------------------------------------------------------------

  /** SetUp succeeded. Throws {@link VolumeNotInActualStateError} when the volume is not attached. */
  markVolumeAsMounted(options: MarkVolumeOptions): void {
    this.#setPodState(options, 'mounted')
  }

  /** SetUp or TearDown may have been partly done. */
  markVolumeMountAsUncertain(options: MarkVolumeOptions): void {
    this.#setPodState(options, 'uncertain')
  }

  /** Removes the pod's entry. No error when absent. */
  markVolumeAsUnmounted(podName: UniquePodName, volumeName: UniqueVolumeName): void {
    const volume = this.#volumes.get(volumeName)
    this.#foundDuringReconstruction.get(volumeName)?.delete(podName)
    if (!volume?.pods.delete(podName)) return
    const podVolumes = this.#podVolumes.get(podName)
    if (podVolumes) {
      const names = deleteName(podVolumes, volumeName)
      if (nameCount(names) === 0) this.#podVolumes.delete(podName)
      else if (names !== podVolumes) this.#podVolumes.set(podName, names)
    }
    this.changes.emit(volumeName, podName)
  }

  /** Marks every volume of the pod whose plugin requires remount. */
  markRemountRequired(podName: UniquePodName): void {
    for (const name of this.#podVolumes.get(podName) ?? []) {
      const volume = this.#volumes.get(name)
      const pod = volume?.pods.get(podName)
      if (!volume || !pod || pod.remountRequired) continue
      let plugin: VolumePlugin
      try {
        plugin = this.#plugins.findPluginBySpec(pod.spec)
      } catch {
        continue
      }
      if (plugin.requiresRemount(pod.spec)) {
        pod.remountRequired = true
        this.changes.emit(name, podName)
      }
    }
  }

  // ---- devices -----------------------------------------------------------------------------

  /** MountDevice succeeded. `devicePath` is kept when "" is given. */
  markDeviceAsMounted(volumeName: UniqueVolumeName, devicePath: string, deviceMountPath: string, seLinuxMountContext = ''): void {
    this.#setDeviceState(volumeName, 'mounted', devicePath, deviceMountPath, seLinuxMountContext)
  }

  markDeviceAsUncertain(volumeName: UniqueVolumeName, devicePath: string, deviceMountPath: string, seLinuxMountContext = ''): void {
    this.#setDeviceState(volumeName, 'uncertain', devicePath, deviceMountPath, seLinuxMountContext)
  }

  /** UnmountDevice succeeded: clears the device mount path, keeps the device path for a later mount. */
  markDeviceAsUnmounted(volumeName: UniqueVolumeName): void {
    this.#setDeviceState(volumeName, 'not-mounted', '', '', '')
  }

  // ---- reconstruction ----------------------------------------------------------------------

  /** Adds the pod as uncertain when it has no entry yet; records it as reconstructed. */
  checkAndMarkVolumeAsUncertainViaReconstruction(options: MarkVolumeOptions): boolean {
    const volume = this.#volumes.get(options.volumeName)
    if (!volume || volume.pods.has(options.podName)) return false
    this.#setPodState(options, 'uncertain')
    let pods = this.#foundDuringReconstruction.get(options.volumeName)
    if (!pods) this.#foundDuringReconstruction.set(options.volumeName, (pods = new Set()))
    pods.add(options.podName)
    return true
  }

  /**
   * Records that reconstruction found the volume's device (the journal knows device mounts no pod
   * directory shows): while it is uncertain, a final MountDevice error does not mark it unmounted.
   */
  markDeviceFoundDuringReconstruction(volumeName: UniqueVolumeName): void {
    if (!this.#foundDuringReconstruction.has(volumeName)) this.#foundDuringReconstruction.set(volumeName, new Set())
  }

  /** Device NotMounted → Uncertain. */
  checkAndMarkDeviceUncertainViaReconstruction(volumeName: UniqueVolumeName, deviceMountPath: string): boolean {
    const volume = this.#volumes.get(volumeName)
    if (volume?.deviceMountState !== 'not-mounted') return false
    this.#setDeviceState(volumeName, 'uncertain', '', deviceMountPath, '')
    return true
  }

  /** Only while the device is still uncertain (reconstructed). */
  updateReconstructedDevicePath(volumeName: UniqueVolumeName, devicePath: string): void {
    const volume = this.#volumes.get(volumeName)
    if (volume?.deviceMountState === 'uncertain') {
      volume.devicePath = devicePath
      this.changes.emit(volumeName)
    }
  }

  /** Only while attachability is uncertain. */
  updateReconstructedVolumeAttachability(volumeName: UniqueVolumeName, attachable: boolean): void {
    const volume = this.#volumes.get(volumeName)
    if (volume?.attachability === 'uncertain') {
      volume.attachability = attachable ? 'attachable' : 'not-attachable'
      this.changes.emit(volumeName)
    }
  }

  isVolumeReconstructed(volumeName: UniqueVolumeName, podName: UniquePodName): boolean {
    return (
      this.#volumes.get(volumeName)?.pods.get(podName)?.state === 'uncertain' &&
      (this.#foundDuringReconstruction.get(volumeName)?.has(podName) ?? false)
    )
  }

  isVolumeDeviceReconstructed(volumeName: UniqueVolumeName): boolean {
    return this.#foundDuringReconstruction.has(volumeName)
  }

  // ---- expansion ---------------------------------------------------------------------------

  /** Records the size the file system was expanded to; false when the volume is absent. */
  markVolumeAsResized(volumeName: UniqueVolumeName, claimSize: number): boolean {
    const volume = this.#volumes.get(volumeName)
    if (!volume) return false
    volume.persistentVolumeSize = claimSize
    this.changes.emit(volumeName)
    return true
  }

  /** Sets the claim size only when unknown. */
  initializeClaimSize(volumeName: UniqueVolumeName, claimSize: number | undefined): void {
    const volume = this.#volumes.get(volumeName)
    if (volume && !volume.persistentVolumeSize && claimSize) {
      volume.persistentVolumeSize = claimSize
      this.changes.emit(volumeName)
    }
  }

  getClaimSize(volumeName: UniqueVolumeName): number | undefined {
    return this.#volumes.get(volumeName)?.persistentVolumeSize
  }

  /** Suppresses fs-resize-required until the volume is added again. */
  markForInUseExpansionError(volumeName: UniqueVolumeName): void {
    const volume = this.#volumes.get(volumeName)
    if (volume) volume.inUseExpansionError = true
  }

  /**
   * Lets fs-resize-required be seen again: the claim asks for a node resize anew
   * (`NodeResizePending`), so a resize held back for the old request may run for the new one.
   */
  clearInUseExpansionError(volumeName: UniqueVolumeName): void {
    const volume = this.#volumes.get(volumeName)
    if (!volume?.inUseExpansionError) return
    volume.inUseExpansionError = false
    this.changes.emit(volumeName)
  }

  markVolumeExpansionFailedWithFinalError(volumeName: UniqueVolumeName): void {
    this.#finalExpansionErrors.add(volumeName)
  }

  removeVolumeFromFailedWithFinalErrors(volumeName: UniqueVolumeName): void {
    this.#finalExpansionErrors.delete(volumeName)
  }

  checkVolumeInFailedExpansionWithFinalErrors(volumeName: UniqueVolumeName): boolean {
    return this.#finalExpansionErrors.has(volumeName)
  }

  // ---- queries -----------------------------------------------------------------------------

  /**
   * The reconciler's question for each desired (volume, pod) pair, checked in the kubelet's order
   * (SPEC §3.3): not attached; SELinux mismatch; pod absent or uncertain; remount required; file
   * system resize required; mounted.
   */
  podExistsInVolume(
    podName: UniquePodName,
    volumeName: UniqueVolumeName,
    desiredVolumeSize: number | undefined,
    seLinuxLabel = '',
  ): PodVolumeCheck {
    const volume = this.#volumes.get(volumeName)
    if (!volume) return notAttached
    const devicePath = volume.devicePath
    if (this.#seLinuxEnabled && volume.seLinuxMountContext !== undefined && volume.seLinuxMountContext !== seLinuxLabel) {
      return { status: 'selinux-mismatch', devicePath }
    }
    const pod = volume.pods.get(podName)
    if (!pod || pod.state === 'uncertain') return devicePath === '' ? notMountedNoDevice : { status: 'not-mounted', devicePath }
    if (pod.remountRequired) return { status: 'remount-required', devicePath }
    const current = volume.persistentVolumeSize
    if (desiredVolumeSize && current && desiredVolumeSize > current && !volume.inUseExpansionError) {
      const plugin = this.#pluginFor(pod.spec)
      if (plugin?.nodeExpand?.requiresFSResize()) return { status: 'fs-resize-required', devicePath, currentSize: current }
    }
    return devicePath === '' ? mountedNoDevice : { status: 'mounted', devicePath }
  }

  /** True when the pod's entry is absent or not mounted (false while mounted or uncertain). */
  podRemovedFromVolume(podName: UniquePodName, volumeName: UniqueVolumeName): boolean {
    return !this.#volumes.get(volumeName)?.pods.has(podName)
  }

  volumeExistsWithSpecName(podName: UniquePodName, specName: string): boolean {
    for (const name of this.#podVolumes.get(podName) ?? []) {
      if (this.#volumes.get(name)?.pods.get(podName)?.spec.name === specName) return true
    }
    return false
  }

  volumeExists(volumeName: UniqueVolumeName): boolean {
    return this.#volumes.has(volumeName)
  }

  /** Any entry of the pod in state mounted. */
  podHasMountedVolumes(podName: UniquePodName): boolean {
    for (const name of this.#podVolumes.get(podName) ?? []) {
      if (this.#volumes.get(name)?.pods.get(podName)?.state === 'mounted') return true
    }
    return false
  }

  /** Any entry of the pod, mounted or uncertain. */
  podHasPossiblyMountedVolumes(podName: UniquePodName): boolean {
    const podVolumes = this.#podVolumes.get(podName)
    return podVolumes !== undefined && nameCount(podVolumes) > 0
  }

  /** Another pod's entry exists (RWOP enforcement). */
  isVolumeMountedElsewhere(volumeName: UniqueVolumeName, podName: UniquePodName): boolean {
    const pods = this.#volumes.get(volumeName)?.pods
    return pods !== undefined && pods.size > (pods.has(podName) ? 1 : 0)
  }

  /** Any pod's entry (mounted or uncertain) exists for the volume: what `mountedPods` of its view lists. */
  volumeHasPods(volumeName: UniqueVolumeName): boolean {
    return (this.#volumes.get(volumeName)?.pods.size ?? 0) > 0
  }

  /** Every (volume, pod) in state mounted. */
  getMountedVolumes(): MountedVolume[] {
    return this.#collect((pod) => pod.state === 'mounted')
  }

  /** Mounted and uncertain: the reconciler's unmount candidates. */
  getAllMountedVolumes(): MountedVolume[] {
    return this.#collect(() => true)
  }

  /**
   * Mounted and uncertain entries of one volume; with `where`, only those it picks, asked before
   * their views are built (the reconciler looks for pods no longer desired, and nearly always finds
   * none).
   */
  getAllMountedVolumesFor(volumeName: UniqueVolumeName, where?: MountedVolumeFilter): MountedVolume[] {
    const volume = this.#volumes.get(volumeName)
    if (!volume) return []
    const result: MountedVolume[] = []
    volume.pods.forEach((pod, podName) => {
      if (where && !where(podName, volume.volumeName, volume.seLinuxMountContext ?? '')) return
      result.push(this.#mountedView(volume, podName, pod))
    })
    return result
  }

  getMountedVolumesForPod(podName: UniquePodName): MountedVolume[] {
    return this.#podViews(podName, true)
  }

  /**
   * True when `test` holds for some mounted entry of the pod, given its volume and its outer name
   * (as {@link getMountedVolumesForPod} reports them), without building the views: a waiter asks
   * after every change to its pod.
   */
  someMountedVolumeOfPod(podName: UniquePodName, test: (volumeName: UniqueVolumeName, outerVolumeSpecName: string) => boolean): boolean {
    for (const name of this.#podVolumes.get(podName) ?? []) {
      const pod = this.#volumes.get(name)?.pods.get(podName)
      if (pod?.state === 'mounted' && test(name, pod.outerVolumeSpecName)) return true
    }
    return false
  }

  getPossiblyMountedVolumesForPod(podName: UniquePodName): MountedVolume[] {
    return this.#podViews(podName, false)
  }

  getMountedVolumeForPod(podName: UniquePodName, volumeName: UniqueVolumeName): MountedVolume | undefined {
    const volume = this.#volumes.get(volumeName)
    const pod = volume?.pods.get(podName)
    return volume && pod ? this.#mountedView(volume, podName, pod) : undefined
  }

  /** Volumes whose device is mounted. */
  getGloballyMountedVolumes(): AttachedVolume[] {
    return [...this.#volumes.values()].filter((v) => v.deviceMountState === 'mounted').map(attachedView)
  }

  /** Volumes with no pod entries: candidates for unmount device and detach. */
  getUnmountedVolumes(): AttachedVolume[] {
    return [...this.#volumes.values()].filter((v) => v.pods.size === 0).map(attachedView)
  }

  getAttachedVolumes(): AttachedVolume[] {
    return [...this.#volumes.values()].map(attachedView)
  }

  getAttachedVolume(volumeName: UniqueVolumeName): AttachedVolume | undefined {
    const volume = this.#volumes.get(volumeName)
    return volume && attachedView(volume)
  }

  volumeNames(): UniqueVolumeName[] {
    return [...this.#volumes.keys()]
  }

  getVolumeMountState(volumeName: UniqueVolumeName, podName: UniquePodName): VolumeMountState {
    return this.#volumes.get(volumeName)?.pods.get(podName)?.state ?? 'not-mounted'
  }

  getDeviceMountState(volumeName: UniqueVolumeName): DeviceMountState {
    return this.#volumes.get(volumeName)?.deviceMountState ?? 'not-mounted'
  }

  /** Number of mounted (volume, pod) pairs per plugin, for metrics. */
  countByPlugin(): Map<string, number> {
    const counts = new Map<string, number>()
    for (const v of this.#volumes.values()) {
      let n = 0
      v.pods.forEach((pod) => {
        if (pod.state === 'mounted') n++
      })
      if (n > 0) counts.set(v.pluginName, (counts.get(v.pluginName) ?? 0) + n)
    }
    return counts
  }

  // ---- internals ---------------------------------------------------------------------------

  #pluginFor(spec: VolumeSpec) {
    try {
      return this.#plugins.findPluginBySpec(spec)
    } catch {
      return undefined
    }
  }

  #attachability(spec: VolumeSpec): Attachability {
    try {
      return this.#plugins.findAttachablePluginBySpec(spec) ? 'attachable' : 'not-attachable'
    } catch {
      return 'not-attachable'
    }
  }

  #addVolume(volumeName: UniqueVolumeName, spec: VolumeSpec, devicePath: string, attachability: Attachability): void {
    const existing = this.#volumes.get(volumeName)
    if (existing) {
      existing.devicePath = devicePath
      existing.attachability = attachability
      existing.spec = spec
      existing.inUseExpansionError = false
    } else {
      this.#volumes.set(volumeName, new VolumeEntry(volumeName, spec, this.#pluginFor(spec)?.name ?? 'N/A', attachability, devicePath))
    }
    this.changes.emit(volumeName)
  }

  #setPodState(options: MarkVolumeOptions, state: 'mounted' | 'uncertain'): void {
    const volume = this.#volumes.get(options.volumeName)
    if (!volume) throw new VolumeNotInActualStateError(options.volumeName)
    const existing = volume.pods.get(options.podName)
    if (existing?.state !== 'mounted' || state === 'mounted') {
      volume.pods.set(options.podName, new PodEntry(options.podName, options, state))
    } else {
      existing.state = state
      existing.setSpec(options.podName, options.spec)
      existing.remountRequired = false
    }
    volume.spec = options.spec
    if (state === 'mounted') this.#foundDuringReconstruction.get(options.volumeName)?.delete(options.podName)
    if (volume.seLinuxMountContext === undefined && options.seLinuxMountContext !== undefined) {
      volume.seLinuxMountContext = options.seLinuxMountContext
    }
    const podVolumes = this.#podVolumes.get(options.podName)
    const names = podVolumes ? addName(podVolumes, options.volumeName) : nameListOf(options.volumeName)
    if (names !== podVolumes) this.#podVolumes.set(options.podName, names)
    this.changes.emit(options.volumeName, options.podName)
  }

  #setDeviceState(
    volumeName: UniqueVolumeName,
    state: DeviceMountState,
    devicePath: string,
    deviceMountPath: string,
    seLinuxMountContext: string,
  ): void {
    const volume = this.#volumes.get(volumeName)
    if (!volume) throw new VolumeNotInActualStateError(volumeName)
    volume.deviceMountState = state
    volume.deviceMountPath = deviceMountPath
    if (devicePath !== '') volume.devicePath = devicePath
    if (seLinuxMountContext !== '') volume.seLinuxMountContext = seLinuxMountContext
    this.changes.emit(volumeName)
  }

  /** Views of the pod's entries, all of them or only the mounted ones. */
  #podViews(podName: UniquePodName, mountedOnly: boolean): MountedVolume[] {
    const result: MountedVolume[] = []
    for (const name of this.#podVolumes.get(podName) ?? []) {
      const volume = this.#volumes.get(name)
      const pod = volume?.pods.get(podName)
      if (volume && pod && (!mountedOnly || pod.state === 'mounted')) result.push(this.#mountedView(volume, podName, pod))
    }
    return result
  }

  #collect(keep: (pod: PodEntry) => boolean): MountedVolume[] {
    const result: MountedVolume[] = []
    for (const volume of this.#volumes.values()) {
      volume.pods.forEach((pod, podName) => {
        if (keep(pod)) result.push(this.#mountedView(volume, podName, pod))
      })
    }
    return result
  }

  #mountedView(volume: VolumeEntry, podName: UniquePodName, pod: PodEntry): MountedVolume {
    return {
      volumeName: volume.volumeName,
      podName,
      podUID: pod.podUID(podName),
      innerVolumeSpecName: pod.spec.name,
      outerVolumeSpecName: pod.outerVolumeSpecName,
      pluginName: volume.pluginName,
      spec: pod.spec,
      volumeGidValue: pod.volumeGidValue,
      mountState: pod.state,
      deviceMountPath: volume.deviceMountPath,
      seLinuxMountContext: volume.seLinuxMountContext ?? '',
      remountRequired: pod.remountRequired,
      reconstructed: this.#foundDuringReconstruction.get(volume.volumeName)?.has(podName) ?? false,
    }
  }
}

function attachedView(volume: VolumeEntry): AttachedVolume {
  const mountedPods: UniquePodName[] = []
  volume.pods.forEach((_, podName) => {
    mountedPods.push(podName)
  })
  return {
    volumeName: volume.volumeName,
    spec: volume.spec,
    pluginName: volume.pluginName,
    attachability: volume.attachability,
    devicePath: volume.devicePath,
    deviceMountPath: volume.deviceMountPath,
    deviceMountState: volume.deviceMountState,
    seLinuxMountContext: volume.seLinuxMountContext,
    persistentVolumeSize: volume.persistentVolumeSize,
    mountedPods,
  }
}
