/**
 * The desired-state populator (SPEC §4): adds the volumes of the node's pods to the desired state
 * and removes those of pods that are gone, once their containers are.
 */
import type { Pod } from '../api/kubernetes.js'
import { type UniquePodName, getPodVolumeNames, } from '../api/names.js'
import { validatePodPathNames } from '../api/validation.js'
import { validatePodVolumes } from '../api/volume-validation.js'
import type { ActualStateOfWorld } from '../cache/actual-state.js'
import type { DesiredStateOfWorld } from '../cache/desired-state.js'
import { errorMessage } from '../errors.js'
import type { Logger } from '../observability.js'
import type { PluginManager } from '../plugins/plugin-manager.js'
import { checkVolumeFSResize, recheckVolumeSizes } from './expansion-check.js'
import type { ObjectReader, ObjectReference, PodSource } from './sources.js'
import { type ResolvedVolume, resolveVolumeSpec } from './volume-spec-resolver.js'

export interface PopulatorOptions {
  readonly dsw: DesiredStateOfWorld
  readonly asw: ActualStateOfWorld
  readonly pods: PodSource
  readonly objects: ObjectReader
  readonly plugins: PluginManager
  readonly logger: Logger
}

export class Populator {
  readonly #o: PopulatorOptions
  /** Pod → processed. false: re-add on the next pass (reprocess, or a previous failure). */
  readonly #processed = new Map<UniquePodName, boolean>()
  /** Pods whose volumes were not all added yet (a claim not bound, an object missing): retried. */
  readonly #unprocessed = new Set<UniquePodName>()
  /** Pods changed since the last pass; the next pass looks at these alone unless `#full`. */
  readonly #dirty = new Set<UniquePodName>()
  #full = true
  #hasAddedPods = false
  #running: Promise<void> | undefined
  #again = false
  /** An object changed since attachability was last looked at. */
  #attachabilityDue = true

  constructor(options: PopulatorOptions) {
    this.#o = options
  }

  /** Every source had delivered its pods before a full pass ran: unmounting is safe. */
  hasAddedPods(): boolean {
    return this.#hasAddedPods
  }

  /** The pod is added again on the next pass (content refresh, or to see a removal quickly). */
  reprocessPod(podName: UniquePodName): void {
    if (this.#processed.has(podName)) this.#setProcessed(podName, false)
    this.#dirty.add(podName)
  }

  /**
   * A pod changed (its UID), or any pod may have (no UID): the next pass looks at the named pods
   * only, or at every pod. Beyond the kubelet, whose populator loops over every pod each 100 ms:
   * a pod's arrival costs the same on a node of ten pods and of a thousand.
   */
  /**
   * An object changed (a CSIDriver among them, perhaps): the next pass looks again at whether each
   * desired volume still needs an attach.
   */
  objectsChanged(): void {
    this.#attachabilityDue = true
  }

  podChanged(uid?: UniquePodName): void {
    if (uid === undefined) this.#full = true
    else this.#dirty.add(uid)
  }

  /** Pods waiting to be (re)added, e.g. because a claim is not bound yet. */
  hasUnprocessedPods(): boolean {
    for (const uid of this.#unprocessed) {
      const pod = this.#o.pods.getPodByUID(uid)
      if (pod && hasVolumes(pod)) return true
      // Gone, or nothing to add: nothing to retry.
      this.#unprocessed.delete(uid)
    }
    return false
  }

  #setProcessed(podName: UniquePodName, processed: boolean): void {
    this.#processed.set(podName, processed)
    if (processed) this.#unprocessed.delete(podName)
    else this.#unprocessed.add(podName)
  }

  #forget(podName: UniquePodName): void {
    this.#processed.delete(podName)
    this.#unprocessed.delete(podName)
  }

  /**
   * One pass: add new pods' volumes, then remove those of deleted pods. Passes never overlap: a
   * call during a pass runs one more pass after it.
   */
  populateOnce(): Promise<void> {
    if (this.#running) {
      this.#again = true
      return this.#running
    }
    const run = async (): Promise<void> => {
      do {
        this.#again = false
        // Sample readiness before the pass, so at least one full pass runs after every source was ready.
        const ready = this.#o.pods.allReady()
        // Until the first full pass after every source was ready, and whenever a source could not
        // say which pod changed, every pod is looked at; otherwise the changed ones and those to retry.
        const full = this.#full || !this.#hasAddedPods
        this.#full = false
        const only = full ? undefined : new Set([...this.#dirty, ...this.#unprocessed])
        this.#dirty.clear()
        await this.#findAndAddNewPods(only)
        this.#findAndRemoveDeletedPods(only)
        if (ready && !this.#hasAddedPods && full) {
          this.#hasAddedPods = true
          this.#o.logger.info('Finished populating initial desired state of world')
        }
      } while (this.#again)
    }
    this.#running = run().finally(() => {
      this.#running = undefined
    })
    return this.#running
  }

  async #findAndAddNewPods(only: ReadonlySet<UniquePodName> | undefined): Promise<void> {
    const { pods } = this.#o
    const work: Promise<void>[] = []
    const candidates = only ? [...only].flatMap((uid) => pods.getPodByUID(uid) ?? []) : pods.getPods()
    for (const pod of candidates) {
      const uid = pod.metadata.uid
      if (!uid || this.#processed.get(uid) === true) continue
      if (this.#hasAddedPods && pods.shouldPodContainersBeTerminating(uid)) continue
      // During start-up still add terminating pods whose containers may run, so their volumes stay.
      if (!this.#hasAddedPods && pods.shouldPodRuntimeBeRemoved(uid)) continue
      work.push(this.#processPodVolumes(pod, uid))
    }
    await Promise.all(work)
  }

  async #processPodVolumes(pod: Pod, podName: UniquePodName): Promise<void> {
    const { dsw, asw, objects, logger } = this.#o
    // A pod from a manifest directory never met an API server: refuse what it would have refused
    // (a volume name becomes a directory name), on this pod alone. Whatever the source, a UID or a
    // name that is not one path component never reaches a path.
    // Volume names are checked more strictly (DNS-1123 labels) by validatePodVolumes.
    const pathErrors = validatePodPathNames(pod).filter((e) => e.path[1] !== 'volumes')
    const invalid = [...pathErrors, ...validatePodVolumes(pod.spec?.volumes)].map((e) => e.message)
    if (invalid.length > 0) {
      logger.error('Invalid pod', { pod: podName, err: invalid.join('; ') })
      for (const message of invalid) dsw.addErrorToPod(podName, message)
      this.#setProcessed(podName, this.#processed.has(podName))
      return
    }
    const { mounts, devices, seLinuxOptions } = getPodVolumeNames(pod)
    let allAdded = true
    const used = (pod.spec?.volumes ?? []).filter((v) => mounts.has(v.name) || devices.has(v.name))
    const resolved = await Promise.all(
      used.map((volume) =>
        resolveVolumeSpec(objects, pod, volume, { mount: mounts.has(volume.name), device: devices.has(volume.name) }).then(
          (r) => ({ volume, ...r }),
          (error: unknown) => ({ volume, error }),
        ),
      ),
    )
    for (const entry of resolved) {
      if ('error' in entry) {
        logger.error('Error processing volume', { pod: podName, volume: entry.volume.name, err: errorMessage(entry.error) })
        dsw.addErrorToPod(podName, errorMessage(entry.error))
        allAdded = false
        continue
      }
      try {
        const volumeName = dsw.addPodToVolume({
          podName,
          pod,
          spec: entry.spec,
          outerVolumeSpecName: entry.volume.name,
          seLinuxContainerContexts: seLinuxOptions.get(entry.volume.name) ?? [],
        })
        this.#checkVolumeFSResize(podName, volumeName, entry)
      } catch (err) {
        logger.error('Failed to add volume to desired state', { pod: podName, volume: entry.volume.name, err: errorMessage(err) })
        dsw.addErrorToPod(podName, errorMessage(err))
        allAdded = false
      }
    }
    if (allAdded) {
      this.#setProcessed(podName, true)
      asw.markRemountRequired(podName)
      dsw.popPodErrors(podName)
    } else if (this.#processed.has(podName)) {
      // Reprocessed once already: the error is recorded and waiters see it; do not spin.
      this.#setProcessed(podName, true)
    } else {
      this.#unprocessed.add(podName)
    }
  }

  /** SPEC §4.4: a mounted, writable PV whose capacity grew gets its desired and current size set. */
  #checkVolumeFSResize(
    podName: UniquePodName,
    volumeName: string,
    entry: ResolvedVolume,
  ): void {
    checkVolumeFSResize(this.#o, podName, volumeName, entry)
  }

  /**
   * SPEC §4.4 without a pod update: the claims and PVs of mounted volumes are read again (only the
   * volumes built from `changed`, when given) and a grown PV is expanded in use, as the kubelet's
   * periodic pod re-sync finds it.
   */
  checkVolumeExpansion(changed?: ObjectReference): Promise<void> {
    return recheckVolumeSizes(this.#o, changed)
  }

  /**
   * SPEC §4.5: a desired volume whose plugin no longer attaches it (a CSIDriver object that now says
   * `attachRequired: false`) is marked so, and its pods mount without waiting for an attach no one
   * will make. The change comes from an object, not a pod: every attachable volume is looked at on
   * a full pass and on the passes after an object changed ({@link objectsChanged}), not on every
   * pass, since a node may hold thousands of attachable volumes and a pod's pass would pay for all.
   * A plugin that learns of its CSIDriver object after that pass answers on the next full one (the
   * manager's resync).
   */
  #refreshAttachability(): void {
    this.#attachabilityDue = false
    const { dsw, plugins, logger } = this.#o
    for (const { volumeName, spec } of dsw.attachableVolumes()) {
      let attachable: boolean
      try {
        attachable = plugins.findAttachablePluginBySpec(spec) !== null
      } catch {
        continue
      }
      if (attachable) continue
      logger.info('Volume is no longer attachable', { volume: volumeName })
      dsw.markVolumeAttachability(volumeName, false)
    }
  }

  #findAndRemoveDeletedPods(only: ReadonlySet<UniquePodName> | undefined): void {
    const { dsw, asw, pods } = this.#o
    if (only === undefined || this.#attachabilityDue) this.#refreshAttachability()
    // Per pod, not per volume: a pod still running is skipped with one lookup.
    for (const podName of only ?? dsw.getPods()) {
      if (!pods.shouldPodRuntimeBeRemoved(podName)) continue
      const pod = pods.getPodByUID(podName)
      for (const vtm of dsw.getVolumesToMountForPod(podName)) {
        // Keep the entry while the actual state has no mount yet and the pod object still exists.
        if (asw.podRemovedFromVolume(podName, vtm.volumeName) && pod) continue
        dsw.deletePodFromVolume(podName, vtm.volumeName)
        this.#forget(podName)
      }
    }
    for (const podName of only ?? [...this.#processed.keys()]) {
      if (!pods.getPodByUID(podName) && pods.shouldPodRuntimeBeRemoved(podName)) this.#forget(podName)
    }
    for (const podName of only ?? dsw.getPodsWithErrors()) {
      if (!pods.getPodByUID(podName)) dsw.popPodErrors(podName)
    }
  }
}

function hasVolumes(pod: Pod): boolean {
  return (pod.spec?.volumes?.length ?? 0) > 0
}
