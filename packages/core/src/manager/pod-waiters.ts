/**
 * The waits of a pod's volume manager calls (kubelet `WaitForAttachAndMount`, `WaitForUnmount`,
 * SPEC §2.1): a wait ends when the pod's volumes are all mounted (or all unmounted), when the
 * populator records an error for the pod, or at its deadline, with the kubelet's texts. Waiters are
 * resolved by notification: what a waiter asks depends only on the pod's own entries in the two
 * caches, and every change to those names the pod, so a change checks that pod's waiters alone and
 * a volume-wide change (attach, detach, device state) none. A node with many pods waiting does not
 * pay pods × changes. With `polling`, waiters poll every 300 ms as the kubelet does instead.
 */
import type { Pod } from '../api/kubernetes.js'
import { type UniquePodName, type UniqueVolumeName, expectedVolumeNames, uniquePodName } from '../api/names.js'
import { podUIDError } from '../api/validation.js'
import type { ActualStateOfWorld, MountedVolume } from '../cache/actual-state.js'
import { isBlockSpec } from '../api/volume-spec.js'
import { type Paths, joinPath } from '../paths.js'
import type { MounterAttributes } from '../plugins/plugin.js'
import type { DesiredStateOfWorld } from '../cache/desired-state.js'
import type { Clock, Timer } from '../clock.js'
import { ConfigError, VolumeAttachLimitExceededError, WaitError } from '../errors.js'
import { type PluginManager, attachResourceExhausted } from '../plugins/plugin-manager.js'
import type { AbortSignalLike } from '../signal.js'

/** 2 min 3 s: longer than the 2 min 2 s maximum backoff, so at least one retry fits. */
export const POD_ATTACH_AND_MOUNT_TIMEOUT_MS = 123_000
/** The kubelet's poll interval of waitForAttachAndMount (used with `pollingCompat`). */
export const POD_ATTACH_AND_MOUNT_RETRY_INTERVAL_MS = 300

export interface WaitOptions {
  readonly signal?: AbortSignalLike
  /** @default 123000 (2 min 3 s) */
  readonly timeoutMs?: number
}

/**
 * A mounted volume as `getMountedVolumesForPod` reports it, keyed by outer name: what a runtime
 * needs to give it to the pod's containers (see `containerMounts`).
 */
export interface MountedVolumeInfo {
  readonly volumeName: UniqueVolumeName
  readonly innerVolumeSpecName: string
  readonly pluginName: string
  /** The volume's spec says read-only (`persistentVolumeClaim.readOnly`); a device is then given `r`. */
  readonly readOnly: boolean
  readonly volumeGidValue: string
  /**
   * A file system volume: where it is on the host for this pod (the kubelet's `Mounter.GetPath()`),
   * what its plugin says of it (`readOnly`: the plugin mounts it read-only, as configMap, secret,
   * downwardAPI and projected; `managed` and `seLinuxRelabel`: the runtime may relabel it), and the
   * directory under which the manager binds the pod's subPaths of it (`<dir>/<container>/<index>`).
   */
  readonly filesystem?: { readonly path: string; readonly attributes: MounterAttributes; readonly subPathsDir: string }
  /** A block volume: the pod's link to the mapped device (the kubelet's `GetPodDeviceMapPath()` joined). */
  readonly block?: { readonly devicePath: string }
  /** The SELinux context the volume is mounted with (`-o context=`), or empty: then it is not relabelled again. */
  readonly seLinuxMountContext: string
}

export interface PodWaitersOptions {
  readonly dsw: DesiredStateOfWorld
  readonly asw: ActualStateOfWorld
  readonly plugins: PluginManager
  readonly paths: Paths
  readonly clock: Clock
  /** Poll every 300 ms (the kubelet's way) instead of being told of changes. */
  readonly polling: boolean
}

interface Waiter {
  readonly podName: UniquePodName
  check(): boolean
}

/** The pods' waits, and the views of a pod's mounted volumes they decide by. */
export class PodWaiters {
  readonly #o: PodWaitersOptions
  readonly #waiters = new Map<UniquePodName, Set<Waiter>>()
  readonly #podsToCheck = new Set<UniquePodName>()
  #scheduled = false

  constructor(options: PodWaitersOptions) {
    this.#o = options
  }

  /** A change named the pod: its waiters look again, once per turn however many changes there were. */
  podChanged(podName: UniquePodName | undefined): void {
    if (this.#o.polling || podName === undefined || !this.#waiters.has(podName)) return
    this.#podsToCheck.add(podName)
    if (this.#scheduled) return
    this.#scheduled = true
    void Promise.resolve().then(() => {
      this.#scheduled = false
      const pods = [...this.#podsToCheck]
      this.#podsToCheck.clear()
      for (const name of pods) this.checkNow(name)
    })
  }

  /** The pod's waiters look now (after a populator pass recorded errors for it). */
  checkNow(podName: UniquePodName): void {
    const set = this.#waiters.get(podName)
    if (set) for (const waiter of [...set]) waiter.check()
  }

  /**
   * Until every volume the pod's containers name is mounted. The expected names are read once,
   * when the wait starts, as the kubelet does. An unattached volume whose plugin says the node ran
   * out of attachments turns a failed wait into {@link VolumeAttachLimitExceededError}.
   */
  async waitForAttachAndMount(pod: Pod, podName: UniquePodName, wait: WaitOptions | undefined): Promise<void> {
    const { dsw, asw } = this.#o
    const expected = expectedVolumeNames(pod)
    if (expected.length === 0) return
    // The names before `next` were mounted when last looked at: a check resumes there, and the
    // answer "all mounted" is given only by a look at every name at once.
    let next = 0
    const allMounted = (): boolean => {
      next = this.firstUnmounted(expected, podName, next)
      if (next < expected.length) return false
      next = this.firstUnmounted(expected, podName, 0)
      return next === expected.length
    }
    try {
      await this.#waitFor(
        podName,
        allMounted,
        (cause) => {
          const unmounted = this.unmountedVolumes(pod, podName)
          const inDsw = dsw.getVolumesToMountForPod(podName)
          const desiredOuter = new Set(inDsw.flatMap((v) => v.outerVolumeSpecNames))
          const unattached = inDsw
            .filter((v) => v.pluginIsAttachable && !asw.volumeExists(v.volumeName))
            .flatMap((v) => v.outerVolumeSpecNames)
            .sort()
          const notInDsw = expected.filter((name) => !desiredOuter.has(name)).sort()
          return `unmounted volumes=${goList(unmounted)}, unattached volumes=${goList(unattached)}, failed to process volumes=${goList(notInDsw)}: ${cause}`
        },
        wait,
      )
    } catch (err) {
      // SPEC §2.1: an unattached volume whose plugin says the node ran out of attachments rejects the pod.
      const unattached = dsw.getVolumesToMountForPod(podName).filter((v) => v.pluginIsAttachable && !asw.volumeExists(v.volumeName))
      if (err instanceof WaitError && unattached.length > 0 && (await attachResourceExhausted(this.#o.plugins, unattached))) {
        throw new VolumeAttachLimitExceededError(err.message, { cause: err, interrupted: err.interrupted })
      }
      throw err
    }
  }

  /** Until none of the pod's volumes is mounted. */
  waitForUnmount(podName: UniquePodName, wait: WaitOptions | undefined): Promise<void> {
    const { asw } = this.#o
    return this.#waitFor(
      podName,
      () => !asw.podHasMountedVolumes(podName),
      (cause) => {
        const names = asw
          .getMountedVolumesForPod(podName)
          .map((v) => v.outerVolumeSpecName)
          .sort()
        return `mounted volumes=${goList(names)}: ${cause}`
      },
      wait,
    )
  }

  /** The pod's mounted volumes by outer name (two pod volumes may resolve to one volume). */
  mountedVolumesForPod(podName: UniquePodName): Map<string, MountedVolumeInfo> {
    const { dsw, asw } = this.#o
    const result = new Map<string, MountedVolumeInfo>()
    const mounted = asw.getMountedVolumesForPod(podName)
    if (mounted.length === 0) return result
    // Outer names come from the desired state.
    const outerByVolume = new Map<UniqueVolumeName, string[]>()
    for (const [outer, volumeName] of dsw.getVolumeNamesForPod(podName)) {
      const list = outerByVolume.get(volumeName) ?? []
      list.push(outer)
      outerByVolume.set(volumeName, list)
    }
    const podOf = (): Pod => dsw.getVolumesToMountForPod(podName)[0]?.pod ?? { metadata: { uid: mounted[0]?.podUID ?? podName } }
    let pod: Pod | undefined
    for (const mv of mounted) {
      const info: MountedVolumeInfo = {
        volumeName: mv.volumeName,
        innerVolumeSpecName: mv.innerVolumeSpecName,
        pluginName: mv.pluginName,
        readOnly: mv.spec.readOnly,
        volumeGidValue: mv.volumeGidValue,
        seLinuxMountContext: mv.seLinuxMountContext,
        ...this.#placeOf(mv, (pod ??= podOf())),
      }
      for (const outer of outerByVolume.get(mv.volumeName) ?? [mv.outerVolumeSpecName]) result.set(outer, info)
    }
    return result
  }

  /**
   * Where a mounted volume is for its pod, as its plugin says (a mounter or a block mapper is made
   * and asked, nothing run). Nothing when the plugin is gone or cannot say: a runtime then finds no
   * volume to give the container, as the kubelet with a nil mounter.
   */
  #placeOf(mv: MountedVolume, pod: Pod): Pick<MountedVolumeInfo, 'filesystem' | 'block'> {
    try {
      const plugin = this.#o.plugins.findPluginByName(mv.pluginName)
      if (isBlockSpec(mv.spec)) {
        const mapper = plugin.block?.newBlockVolumeMapper(mv.spec, pod)
        if (!mapper) return {}
        const { dir, linkName } = mapper.getPodDeviceMapPath()
        return { block: { devicePath: joinPath(dir, linkName) } }
      }
      const mounter = plugin.newMounter(mv.spec, pod)
      const subPathsDir = this.#o.paths.podSubPathsDir(mv.podUID, mv.innerVolumeSpecName)
      return { filesystem: { path: mounter.getPath(), attributes: mounter.getAttributes(), subPathsDir } }
    } catch {
      return {}
    }
  }

  /**
   * True when every name in `expected` has a mounted volume, exactly as {@link unmountedVolumes}
   * decides it, without building the pod's mounted-volume views: a waiter asks after every change to
   * its pod, and a pod's volumes mount one by one.
   */
  allMounted(expected: readonly string[], podName: UniquePodName): boolean {
    return this.firstUnmounted(expected, podName, 0) === expected.length
  }

  /**
   * The index of the first name in `expected` from `from` on that has no mounted volume (as
   * {@link unmountedVolumes} decides it), or `expected.length`.
   */
  firstUnmounted(expected: readonly string[], podName: UniquePodName, from: number): number {
    const { dsw, asw } = this.#o
    let desired: Set<UniqueVolumeName> | undefined
    for (let i = from; i < expected.length; i++) {
      const outer = expected[i] as string
      const volumeName = dsw.getVolumeNameForPod(podName, outer)
      if (volumeName !== undefined && asw.getVolumeMountState(volumeName, podName) === 'mounted') continue
      // Not mounted under the desired volume; a mounted volume the desired state does not list for
      // the pod still counts under its own outer name, as getMountedVolumesForPod reports it.
      const undesired = asw.someMountedVolumeOfPod(
        podName,
        (name, outerName) => outerName === outer && !(desired ??= new Set(dsw.getVolumeNamesForPod(podName).values())).has(name),
      )
      if (!undesired) return i
    }
    return expected.length
  }

  /** The names the pod's containers use that have no mounted volume. */
  unmountedVolumes(pod: Pod, podName: UniquePodName): string[] {
    const expected = expectedVolumeNames(pod)
    if (expected.length === 0) return []
    const mounted = this.mountedVolumesForPod(podName)
    return expected.filter((name) => !mounted.has(name))
  }

  #podErrorsOrNull(podName: UniquePodName): string | null {
    const errors = this.#o.dsw.popPodErrors(podName)
    return errors.length > 0 ? errors.join('; ') : null
  }

  #add(waiter: Waiter): void {
    let set = this.#waiters.get(waiter.podName)
    if (!set) this.#waiters.set(waiter.podName, (set = new Set()))
    set.add(waiter)
  }

  #remove(waiter: Waiter): void {
    const set = this.#waiters.get(waiter.podName)
    if (set?.delete(waiter) && set.size === 0) this.#waiters.delete(waiter.podName)
  }

  /**
   * Waits until `done()` holds, checking now, on every change to the pod and after every populator
   * pass (or every 300 ms when polling). Pod errors end the wait at once; so does the signal
   * (`context canceled`) and the deadline (`context deadline exceeded`, the kubelet's
   * wait.PollUntilContextTimeout text), both as interrupted waits.
   */
  #waitFor(podName: UniquePodName, done: () => boolean, failure: (cause: string) => string, wait: WaitOptions | undefined): Promise<void> {
    const { clock } = this.#o
    return new Promise<void>((resolve, reject) => {
      let finished = false
      let timer: Timer | undefined
      let poll: Timer | undefined
      const finish = (error?: string, interrupted = false): void => {
        if (finished) return
        finished = true
        this.#remove(waiter)
        timer?.cancel()
        poll?.cancel()
        wait?.signal?.removeEventListener('abort', onAbort)
        if (error === undefined) resolve()
        else reject(new WaitError(error, { interrupted }))
      }
      const waiter: Waiter = {
        podName,
        check: () => {
          if (finished) return true
          const errors = this.#podErrorsOrNull(podName)
          if (errors !== null) {
            finish(failure(errors))
            return true
          }
          if (done()) {
            finish()
            return true
          }
          return false
        },
      }
      const onAbort = (): void => {
        if (done()) finish()
        else finish(failure('context canceled'), true)
      }
      if (waiter.check()) return
      if (wait?.signal?.aborted) return onAbort()
      wait?.signal?.addEventListener('abort', onAbort, { once: true })
      timer = clock.setTimer(wait?.timeoutMs ?? POD_ATTACH_AND_MOUNT_TIMEOUT_MS, () => {
        if (done()) finish()
        else finish(failure('context deadline exceeded'), true)
      })
      if (this.#o.polling) {
        const tick = (): void => {
          if (!waiter.check()) poll = clock.setTimer(POD_ATTACH_AND_MOUNT_RETRY_INTERVAL_MS, tick)
        }
        poll = clock.setTimer(POD_ATTACH_AND_MOUNT_RETRY_INTERVAL_MS, tick)
      } else {
        this.#add(waiter)
      }
    })
  }
}

/**
 * The unique name of a pod given as a Pod or a string. A unique pod name is the pod's UID, so a
 * string that cannot be one (`namespace/name` is the usual mistake) is refused rather than matching
 * nothing.
 */
export function podNameOf(method: string, pod: Pod | UniquePodName): UniquePodName {
  if (typeof pod !== 'string') return uniquePodName(pod)
  const reason = podUIDError(pod)
  if (reason) {
    throw new ConfigError(`${method}: ${JSON.stringify(pod)} is not a pod's unique name, ${reason}; a pod's unique name is its UID (metadata.uid): pass the Pod or its UID`)
  }
  return pod
}

/** A list printed as Go prints a slice: `[a b]`. */
function goList(items: readonly string[]): string {
  return `[${items.join(' ')}]`
}
