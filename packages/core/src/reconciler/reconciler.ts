/**
 * The reconcile pass (SPEC §5.2–5.3): compares the desired with the actual state and starts the
 * operations that close the gap. It never waits for an operation.
 *
 * Beyond the kubelet, the pass is incremental: both caches report which volumes changed, and a pass
 * looks only at those (all of them on a full pass), in the kubelet's order. The decisions per
 * volume are the kubelet's; only the set of volumes looked at differs, so a node with ten thousand
 * mounted volumes pays for a change in proportion to the change.
 */
import type { UniqueVolumeName } from '../api/names.js'
import { type ActualStateOfWorld, type MountedVolumeFilter, deviceMayBeMounted } from '../cache/actual-state.js'
import type { DesiredStateOfWorld, VolumeToMount, VolumeToMountFilter } from '../cache/desired-state.js'
import type { Clock } from '../clock.js'
import type { Logger, Metrics } from '../observability.js'
import type { PodVolumeOnDisk } from '../reconstruction/scan.js'
import type { MountRequestVolume } from '../operations/mount-operations.js'
import type { OperationExecutor, OperationStart } from '../operations/operation-executor.js'

export interface ReconcilerOptions {
  readonly dsw: DesiredStateOfWorld
  readonly asw: ActualStateOfWorld
  readonly executor: OperationExecutor
  readonly clock: Clock
  readonly logger: Logger
  /** The populator has read every source once: unmounting is safe. */
  readonly populatorHasAddedPods: () => boolean
  /**
   * An attach/detach controller attaches volumes and kubevol only verifies (the kubelet's default);
   * false: kubevol attaches and detaches itself (static mode, no cluster).
   */
  readonly controllerAttachDetach: boolean
  readonly metrics?: Metrics
  /** Volumes a periodic resync looks at per pass. @default 1000 */
  readonly resyncSlice?: number
}

export class Reconciler {
  readonly #o: ReconcilerOptions
  readonly #dirty = new Set<UniqueVolumeName>()
  #fullPass = true
  /** Volumes a resync has still to look at; each pass takes a slice, so a big node never stalls. */
  #resync: UniqueVolumeName[] = []
  #lastSyncTime = 0
  #lastPassAt = 0
  /** Volume directories that failed reconstruction, cleaned up once unmounting is safe (SPEC §5.6). */
  #failedReconstruction: PodVolumeOnDisk[] = []
  /** Reconstructed volumes waiting for their device path from node status (SPEC §5.5). */
  readonly #needUpdateFromNodeStatus = new Set<UniqueVolumeName>()

  constructor(options: ReconcilerOptions) {
    this.#o = options
  }

  /** The next pass looks at this volume. */
  markDirty(volumeName: UniqueVolumeName): void {
    this.#dirty.add(volumeName)
  }

  /** The next pass looks at every volume. */
  markAllDirty(): void {
    this.#fullPass = true
  }

  /**
   * A periodic resync: every volume is looked at again, a slice per pass (see `resyncSlice`), so a
   * node of 100,000 volumes does not hold the event loop for a whole pass over them.
   */
  queueResync(): void {
    this.#resync = [...new Set([...this.#o.dsw.volumeNames(), ...this.#o.asw.volumeNames()])]
  }

  /** A resync has volumes left for the next passes. */
  get resyncPending(): boolean {
    return this.#resync.length > 0
  }

  /** Something is left for the next pass. */
  get hasWork(): boolean {
    return this.#fullPass || this.#dirty.size > 0 || this.#resync.length > 0
  }

  /** True once the first pass after start-up finished with no reconstructed volume waiting for node status. */
  statesHaveBeenSynced(): boolean {
    return this.#lastSyncTime !== 0
  }

  /** Reconstructed volumes whose device path must come from node status before anything is unmounted. */
  addVolumesNeedingNodeStatus(names: Iterable<UniqueVolumeName>): void {
    for (const name of names) this.#needUpdateFromNodeStatus.add(name)
  }

  /** What reconstruction could not rebuild: torn down by name once, when unmounting is safe. */
  setFailedReconstruction(volumes: readonly PodVolumeOnDisk[]): void {
    this.#failedReconstruction = [...volumes]
  }

  /** Node status was read (or there is none): unmounting may proceed. */
  clearVolumesNeedingNodeStatus(): void {
    this.#needUpdateFromNodeStatus.clear()
    this.#fullPass = true
  }

  /** Clock time of the last pass (0 before the first). */
  get lastPassAt(): number {
    return this.#lastPassAt
  }

  /** One pass over the changed volumes (or all of them). */
  reconcileOnce(): void {
    const { dsw, asw } = this.#o
    this.#lastPassAt = this.#o.clock.now()
    let names: Iterable<UniqueVolumeName>
    if (this.#fullPass) {
      this.#fullPass = false
      this.#dirty.clear()
      this.#resync = []
      names = new Set([...dsw.volumeNames(), ...asw.volumeNames()])
    } else {
      const slice = this.#resync.length > 0 ? this.#resync.splice(Math.max(0, this.#resync.length - (this.#o.resyncSlice ?? 1000))) : []
      names = slice.length > 0 ? new Set([...this.#dirty, ...slice]) : this.#dirty
    }
    const volumes = [...names]
    this.#dirty.clear()
    // Never unmount before every pod source was read once, nor before reconstructed volumes know
    // their device path: a restart must not unmount what pods not yet re-listed still use.
    const readyToUnmount = this.#o.populatorHasAddedPods() && this.#needUpdateFromNodeStatus.size === 0
    // Unmount first, so a volume moving to another pod is released before it is mounted again.
    if (readyToUnmount) for (const name of volumes) this.#unmountVolumes(name)
    // Mounting is safe before population completes.
    for (const name of volumes) this.#mountOrAttachVolumes(name)
    // Devices last: never unmount a device or detach while a pod may still use it.
    if (readyToUnmount) {
      for (const name of volumes) this.#unmountDetachDevices(name)
      this.#cleanOrphanVolumes()
    }
    if (this.#needUpdateFromNodeStatus.size === 0 && this.#lastSyncTime === 0) this.#lastSyncTime = this.#o.clock.now()
  }

  // A mounted (volume, pod) the desired state no longer has: the only ones unmounted, and the only
  // ones whose view is built.
  readonly #notDesired: MountedVolumeFilter = (podName, volumeName, seLinuxMountContext) =>
    !this.#o.dsw.podExistsInVolume(podName, volumeName, seLinuxMountContext)

  #unmountVolumes(volumeName: UniqueVolumeName): void {
    const { asw, executor } = this.#o
    for (const mv of asw.getAllMountedVolumesFor(volumeName, this.#notDesired)) {
      this.#report('UnmountVolume', mv.volumeName, executor.unmountVolume(mv))
    }
  }

  // Whether a desired (volume, pod) needs more than a look. A pass looks at a volume on every change
  // to it, and nearly always finds each pod mounted, or its mount (or expansion) still running, which
  // the executor would refuse to start again: no view is built for those. An unattached volume and an
  // SELinux mismatch are always looked at (they log or record an error even then).
  readonly #notMounted: VolumeToMountFilter = (podName, volumeName, size, seLinuxLabel) => {
    const { status } = this.#o.asw.podExistsInVolume(podName, volumeName, size, seLinuxLabel)
    if (status === 'mounted') return false
    if (status === 'not-attached' || status === 'selinux-mismatch') return true
    return !this.#o.executor.isOperationPending(volumeName, podName)
  }

  #mountOrAttachVolumes(volumeName: UniqueVolumeName): void {
    const { dsw, asw, executor } = this.#o
    for (const vtm of dsw.getVolumesToMountFor(volumeName, this.#notMounted)) {
      const check = asw.podExistsInVolume(vtm.podName, vtm.volumeName, vtm.desiredPersistentVolumeSize, vtm.seLinuxLabel)
      switch (check.status) {
        case 'selinux-mismatch':
          dsw.addErrorToPod(
            vtm.podName,
            `waiting for unmount of volume "${vtm.volumeName}", because it is already mounted to a different pod with a different SELinux label`,
          )
          break
        case 'not-attached':
          this.#waitForVolumeAttach(vtm)
          break
        case 'not-mounted':
        case 'remount-required': {
          const isRemount = check.status === 'remount-required'
          this.#report('MountVolume', vtm.volumeName, executor.mountVolume(mountRequest(vtm, check.devicePath), isRemount))
          break
        }
        case 'fs-resize-required':
          this.#report(
            'ExpandInUseVolume',
            vtm.volumeName,
            executor.expandInUseVolume(mountRequest(vtm, check.devicePath), check.currentSize),
          )
          break
        case 'mounted':
          break
      }
    }
  }

  #waitForVolumeAttach(vtm: VolumeToMount): void {
    const { executor } = this.#o
    const request = mountRequest(vtm, '')
    if (this.#o.controllerAttachDetach || !vtm.pluginIsAttachable) {
      // Waiting for the node status to list the volume is pointless before it is reported in use.
      if (vtm.pluginIsAttachable && !vtm.reportedInUse) {
        this.#o.logger.debug('Volume not marked in-use, waiting for node status', { volume: vtm.volumeName })
        return
      }
      this.#report('VerifyControllerAttachedVolume', vtm.volumeName, executor.verifyControllerAttachedVolume(request))
    } else {
      this.#report('AttachVolume', vtm.volumeName, executor.attachVolume(request))
    }
  }

  #unmountDetachDevices(volumeName: UniqueVolumeName): void {
    const { dsw, asw, executor } = this.#o
    // Nearly every volume a pass looks at is in use: say so without building its view.
    if (asw.volumeHasPods(volumeName)) return
    const av = asw.getAttachedVolume(volumeName)
    if (!av) return
    if (dsw.volumeExists(volumeName, av.seLinuxMountContext ?? '')) return
    if (executor.isOperationPending(volumeName)) return
    if (deviceMayBeMounted(av)) {
      this.#report('UnmountDevice', volumeName, executor.unmountDevice(av))
    } else if (this.#o.controllerAttachDetach || av.attachability !== 'attachable') {
      // Nothing to do on the node: forget it; the controller detaches from volumesInUse.
      asw.markVolumeAsDetached(volumeName)
      this.#o.logger.info('Volume detached', { volume: volumeName })
    } else {
      this.#report('DetachVolume', volumeName, executor.detachVolume(av))
    }
  }

  /** SPEC §5.6: tear down, by plugin name alone, what could not be reconstructed and no pod wants. */
  #cleanOrphanVolumes(): void {
    const { dsw, asw, executor } = this.#o
    const failed = this.#failedReconstruction
    this.#failedReconstruction = []
    for (const v of failed) {
      if (dsw.volumeExistsWithSpecName(v.podName, v.volumeSpecName)) continue
      if (asw.volumeExistsWithSpecName(v.podName, v.volumeSpecName)) continue
      this.#o.metrics?.inc('force_cleaned_failed_volume_operations_total')
      const result = executor.unmountVolume({
        volumeName: v.volumeSpecName,
        podName: v.podName,
        podUID: v.podName,
        innerVolumeSpecName: v.volumeSpecName,
        outerVolumeSpecName: v.volumeSpecName,
        pluginName: v.pluginName,
        spec: { name: v.volumeSpecName, readOnly: false },
        volumeGidValue: '',
        mountState: 'uncertain',
        deviceMountPath: '',
        seLinuxMountContext: '',
        remountRequired: false,
        reconstructed: true,
      })
      if (result.status === 'generation-failed') this.#o.metrics?.inc('force_cleaned_failed_volume_operation_errors_total')
      this.#report('UnmountVolume', v.volumeSpecName, result)
    }
  }

  #report(what: string, volumeName: UniqueVolumeName, result: OperationStart): void {
    if (result.status === 'started') this.#o.logger.debug(`operationExecutor.${what} started`, { volume: volumeName })
    else if (result.status === 'generation-failed') this.#o.logger.error(result.error.message, { volume: volumeName })
  }
}

/**
 * The desired volume with the device path read from the actual state. Spelled out rather than
 * spread: a spread copy gets the extra property in a separate backing store, and an operation keeps
 * this object for as long as it runs.
 */
function mountRequest(vtm: VolumeToMount, devicePath: string): MountRequestVolume {
  return {
    volumeName: vtm.volumeName,
    podName: vtm.podName,
    pod: vtm.pod,
    spec: vtm.spec,
    pluginName: vtm.pluginName,
    outerVolumeSpecNames: vtm.outerVolumeSpecNames,
    pluginIsAttachable: vtm.pluginIsAttachable,
    pluginIsDeviceMountable: vtm.pluginIsDeviceMountable,
    volumeGidValue: vtm.volumeGidValue,
    reportedInUse: vtm.reportedInUse,
    desiredSizeLimit: vtm.desiredSizeLimit,
    desiredPersistentVolumeSize: vtm.desiredPersistentVolumeSize,
    seLinuxLabel: vtm.seLinuxLabel,
    mountRequestTime: vtm.mountRequestTime,
    devicePath,
  }
}
