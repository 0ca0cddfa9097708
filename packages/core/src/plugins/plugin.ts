/**
 * The volume plugin interfaces (SPEC §7.1). A plugin holds one volume type's logic and touches the
 * machine only through the Host port it is given in `init`. Optional members are capabilities: a
 * plugin is attachable exactly when it has `attacher`, device-mountable when it has `deviceMounter`.
 */
import type { Pod } from '../api/kubernetes.js'
import type { VolumeSpec } from '../api/volume-spec.js'
import type { Clock } from '../clock.js'
import type { FsStats, Host } from '../host/host.js'
import type { Logger, Metrics, Recorder } from '../observability.js'
import type { Paths } from '../paths.js'
import type { ObjectReader } from '../populator/sources.js'
import type { TokenSource } from './token-source.js'

/** What a plugin is given when the plugin manager starts it. */
export interface VolumePluginContext {
  readonly host: Host
  readonly paths: Paths
  readonly nodeName: string
  readonly objects: ObjectReader
  readonly clock: Clock
  readonly logger: Logger
  readonly recorder: Recorder
  readonly metrics: Metrics
  /** Service account tokens, when the node can issue them (projected serviceAccountToken sources). */
  readonly tokens?: TokenSource
}

/** Arguments of `Mounter.setUp` (kubelet `MounterArgs`). */
export interface MounterArgs {
  readonly fsUser?: number
  readonly fsGroup?: number
  readonly fsGroupChangePolicy?: string
  /** Size limit for local ephemeral volumes, bytes (SPEC §3.2.2). */
  readonly desiredSize?: number
  readonly seLinuxLabel?: string
}

export interface MounterAttributes {
  readonly readOnly: boolean
  /** The plugin manages ownership (fsGroup applies). */
  readonly managed: boolean
  readonly seLinuxRelabel: boolean
}

/** Sets up one volume for one pod. Must be idempotent: after a restart SetUp runs again on a mounted volume. */
export interface Mounter {
  /** The pod's volume directory. */
  getPath(): string
  setUp(args: MounterArgs): Promise<void>
  getAttributes(): MounterAttributes
  /** Capacity and usage; absent when the plugin cannot tell ("metrics are not supported"). */
  getMetrics?(): Promise<VolumeMetrics>
}

/**
 * A volume's usage (kubelet `volume.Metrics`) and, when its plugin can tell, its health: a CSI
 * driver with the VOLUME_CONDITION capability reports `volume_condition` in NodeGetVolumeStats.
 * No `volumeCondition` means nobody said, not healthy.
 */
export interface VolumeMetrics extends FsStats {
  readonly volumeCondition?: { readonly abnormal: boolean; readonly message: string }
}

/** Tears one pod's volume down. Must be idempotent and succeed when there is nothing left to do. */
export interface Unmounter {
  getPath(): string
  tearDown(): Promise<void>
  /**
   * Optional: {@link tearDown} in two parts, for a plugin whose tear-down begins with reads that
   * change nothing (CSI: vol_data.json, which the kubelet reads in NewUnmounter, before the
   * operation runs). Called as the operation starts, while it checks the pod's directories, it may
   * start only such reads, never a change, and does not throw; the step it returns is run once the
   * checks passed (never, when they fail) and does everything else, with tearDown's results and
   * errors. Without it, tearDown runs after the checks.
   */
  prepareTearDown?(): () => Promise<void>
}

/** Attach and detach (kubelet `Attacher`/`Detacher`). */
export interface AttachCapability {
  canAttach(spec: VolumeSpec): boolean
  /** Attaches the volume to the node; returns the device path. */
  attach(spec: VolumeSpec, nodeName: string): Promise<string>
  /** Waits until the device is present on the node; returns its path. */
  waitForAttach(spec: VolumeSpec, devicePath: string, pod: Pod, timeoutMs: number): Promise<string>
  /** `volumeName` is `plugin.getVolumeName(spec)`. */
  detach(volumeName: string, nodeName: string): Promise<void>
  /**
   * True when the volume cannot be attached because the node ran out of what attaching takes (the
   * kubelet's `VerifyExhaustedResource`; CSI: the VolumeAttachment's `attachError.errorCode` is
   * ResourceExhausted). Asked only when a pod's wait for its volumes fails with a volume still not
   * attached; true turns that failure into the attach-limit error. Absent: never exhausted.
   */
  verifyExhaustedResource?(spec: VolumeSpec): Promise<boolean>
}

export interface DeviceMounterArgs {
  readonly fsGroup?: number
  readonly seLinuxLabel?: string
}

/** The rest of a device step begun by {@link DeviceMountCapability.prepareMountDevice}. */
export interface PreparedDeviceMount {
  /** The step, once the device's intent is durable. */
  (): Promise<void>
  /** Instead of the step when the intent failed: removes what the preparation made. Does not throw. */
  abandon?(): Promise<void>
}

/** The global (per volume, per node) device mount (kubelet `DeviceMounter`/`DeviceUnmounter`). */
export interface DeviceMountCapability {
  canDeviceMount(spec: VolumeSpec): boolean
  getDeviceMountPath(spec: VolumeSpec): string
  mountDevice(spec: VolumeSpec, devicePath: string, deviceMountPath: string, args: DeviceMounterArgs): Promise<void>
  /**
   * Optional: {@link mountDevice} in two parts, for a plugin whose device step begins with a query
   * that changes nothing (CSI's NodeGetCapabilities) or with files the disk scan finds without the
   * journal (CSI's staging directory and vol_data.json, which the kubelet writes before
   * NodeStageVolume: a crash after them leaves what it leaves in the kubelet). Called before the
   * device's intent is durable, it may start only those, never another change on the node or any in
   * a driver, and does not throw. The step it returns is run once the intent is durable and does
   * everything else, with mountDevice's results and errors; when the intent fails, the step's
   * `abandon` is run instead, to remove what was made. Without it, mountDevice runs after the intent.
   */
  prepareMountDevice?(spec: VolumeSpec, devicePath: string, deviceMountPath: string, args: DeviceMounterArgs): PreparedDeviceMount
  unmountDevice(deviceMountPath: string): Promise<void>
  /**
   * Optional: {@link unmountDevice} in two parts, for a plugin whose device tear-down begins with
   * reads that change nothing (CSI: vol_data.json, and NodeGetCapabilities of the driver `spec`
   * names). Called before the operation checks the device's mount references, it may start only
   * such reads, never a change on the node or in a driver, and does not throw; the step it returns
   * is run once the check passed (never, when other mounts still reference the device) and does
   * everything else, with unmountDevice's results and errors. `spec`: the volume's, as the actual
   * state holds it. Without it, unmountDevice runs after the check.
   */
  prepareUnmountDevice?(deviceMountPath: string, spec?: VolumeSpec): () => Promise<void>
  /** Mount points other than `deviceMountPath` that mount the same device. */
  getDeviceMountRefs(deviceMountPath: string): Promise<readonly string[]>
}

/** Maps a block volume for one pod (kubelet `BlockVolumeMapper`/`CustomBlockVolumeMapper`). */
export interface BlockVolumeMapper {
  getGlobalMapPath(spec: VolumeSpec): string
  /** Directory and link name of the pod's device link. */
  getPodDeviceMapPath(): { readonly dir: string; readonly linkName: string }
  /** Stages the device (CSI NodeStage); returns the staging path. */
  setUpDevice?(): Promise<string>
  /** Publishes the device for the pod (CSI NodePublish); returns a device path or "". */
  mapPodDevice?(): Promise<string>
}

export interface BlockVolumeUnmapper {
  getGlobalMapPath(spec: VolumeSpec): string
  getPodDeviceMapPath(): { readonly dir: string; readonly linkName: string }
  tearDownDevice?(mapPath: string, devicePath: string): Promise<void>
  unmapPodDevice?(): Promise<void>
}

export interface BlockCapability {
  newBlockVolumeMapper(spec: VolumeSpec, pod: Pod): BlockVolumeMapper
  newBlockVolumeUnmapper(innerName: string, podUID: string): BlockVolumeUnmapper
  /**
   * Rebuilds the spec of a block volume found on disk after a restart (kubelet
   * `ConstructBlockVolumeSpec`); `mapPath` is the pod's device link. Without it, block volumes are
   * reconstructed from the journal only.
   */
  constructBlockVolumeSpec?(innerName: string, mapPath: string): Promise<VolumeSpec>
}

/** kubelet `NodeResizeOptions`. Sizes in bytes. */
export interface NodeResizeOptions {
  readonly spec: VolumeSpec
  readonly devicePath: string
  readonly deviceMountPath: string
  readonly deviceStagePath: string
  readonly newSize: number
  readonly oldSize: number
}

export interface NodeExpandCapability {
  requiresFSResize(): boolean
  /** Grows the file system; true when done. */
  nodeExpand(options: NodeResizeOptions): Promise<boolean>
}

/** One volume type. */
export interface VolumePlugin {
  /** Qualified name, e.g. `kubernetes.io/empty-dir`. */
  readonly name: string
  /** Called once by the plugin manager before any other method. */
  init?(context: VolumePluginContext): void
  canSupport(spec: VolumeSpec): boolean
  /** Stable name of the underlying volume (unique names of shared-device volumes use it). */
  getVolumeName(spec: VolumeSpec): string
  /**
   * The plugin name unique volume names start with, when it is not `name` (see
   * `uniqueVolumeNameOf`). A plugin that serves a CSI driver name sets `kubernetes.io/csi`, so its
   * volumes carry the names the attach/detach controller and the kubelet give a CSI volume (in
   * `status.volumesAttached` and `status.volumesInUse`); its directories keep `name`.
   */
  readonly uniqueNamePrefix?: string
  /** SetUp must run again when the pod is re-synced (configMap, secret, projected, downwardAPI). */
  requiresRemount(spec: VolumeSpec): boolean
  /**
   * True when whatever a crash at any point of SetUp leaves is found by reconstruction's scan of the
   * pods directory without the journal: SetUp's first change is the volume's directory under
   * `pods/<uid>/volumes/`, and everything after it is at or beside it (emptyDir: its tmpfs, its
   * ready marker); or SetUp leaves nothing a tear-down would undo (hostPath: at most the node's own
   * path, made by DirectoryOrCreate and never removed). The set-up's journal intent is then handed
   * to the journal with the step, unsynced, and not waited for (a pod with sub paths keeps the
   * synced intent). Leave it unset for anything the disk layout cannot show: a device mount, a loop
   * device, a CSI publish.
   */
  readonly setUpFoundOnDisk?: boolean
  /**
   * For a volume that `requiresRemount`: true when its content is built only from the pod and from
   * objects the ObjectReader serves, so a reader that announces changes says when to set it up
   * again (configMap, secret, downwardAPI, projected without a token). False or absent when the
   * content also changes with time or comes from elsewhere (a service account token, a CSI driver
   * asking for republish): such a volume is set up again every `remountPeriodMs` whatever the reader.
   */
  refreshOnEvents?(spec: VolumeSpec): boolean
  supportsMountOption(): boolean
  supportsSELinuxContextMount?(spec: VolumeSpec): boolean
  /** A mounter for one pod. Throws when the spec cannot be mounted ("MountVolume.NewMounter initialization failed"). */
  newMounter(spec: VolumeSpec, pod: Pod): Mounter
  newUnmounter(innerName: string, podUID: string): Unmounter
  /** Rebuilds a spec from a volume found on disk after a restart. */
  constructVolumeSpec?(innerName: string, mountPath: string): Promise<VolumeSpec>
  readonly attach?: AttachCapability
  readonly deviceMount?: DeviceMountCapability
  readonly block?: BlockCapability
  readonly nodeExpand?: NodeExpandCapability
}
