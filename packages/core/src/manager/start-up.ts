/**
 * What a manager's `run()` starts, once reconstruction is done: the journal of intents before it,
 * the node status read for reconstructed volumes, the populator and reconciler loops, and the
 * periods beside them. Each step gets only the parts it needs (see {@link RunParts}).
 */
import type { UniqueVolumeName } from '../api/names.js'
import type { ActualStateOfWorld } from '../cache/actual-state.js'
import type { DesiredStateOfWorld } from '../cache/desired-state.js'
import type { Clock } from '../clock.js'
import { errorMessage } from '../errors.js'
import { VolumeJournal } from '../journal/journal.js'
import type { Logger } from '../observability.js'
import { type Paths, joinPath } from '../paths.js'
import type { Populator } from '../populator/populator.js'
import type { ObjectReference } from '../populator/sources.js'
import type { Reconciler } from '../reconciler/reconciler.js'
import type { VolumeManagerOptions } from '../volume-manager.js'
import type { PassScheduler } from './pass-scheduler.js'

/** The kubelet's reconciler and populator loop period (used with `pollingCompat`). */
export const LOOP_SLEEP_PERIOD_MS = 100

/** The manager's parts the start-up steps use. */
export interface RunParts {
  readonly options: VolumeManagerOptions
  readonly paths: Paths
  readonly logger: Logger
  readonly dsw: DesiredStateOfWorld
  readonly asw: ActualStateOfWorld
  readonly populator: Populator
  readonly reconciler: Reconciler
  readonly scheduler: PassScheduler
  readonly polling: boolean
  /** One populator pass, as the manager runs it. */
  readonly populate: () => Promise<void>
  readonly onPodChange: (uid?: string) => void
  readonly onObjectChange: (changed?: ObjectReference) => void
  readonly checkExpansion: () => void
  readonly cleanupOrphanedPods: () => Promise<unknown>
  readonly collectVolumeStats: () => Promise<unknown>
}

/**
 * The journal of intents: read only (`journal: 'read-only'`), opened for writing when the host can
 * append, or none.
 */
export async function openJournal(p: Pick<RunParts, 'options' | 'paths' | 'logger'> & { readonly clock?: Clock }): Promise<{ journal?: VolumeJournal; writable: boolean }> {
  const { host } = p.options
  const path = joinPath(p.paths.root, 'journal', 'volumes.log')
  if (p.options.journal === 'read-only') return { journal: await VolumeJournal.read({ host, path, logger: p.logger }), writable: false }
  if (!(p.options.journal ?? true) || !host.appendFile) return { writable: false }
  return { journal: await VolumeJournal.open({ host, path, logger: p.logger, clock: p.clock }), writable: true }
}

/**
 * Controller mode after a restart: unmounting waits until the reconstructed volumes know their
 * device paths (and attachability) from node status, read until it answers.
 */
export function followNodeStatus(p: RunParts, reconstructed: readonly UniqueVolumeName[]): void {
  const getNode = p.options.objects.getNode
  if (!getNode) return
  p.reconciler.addVolumesNeedingNodeStatus(reconstructed)
  const refresh = (): void => {
    void getNode(p.options.nodeName).then(
      (node) => {
        const attached = new Map((node.status?.volumesAttached ?? []).map((v) => [v.name, v.devicePath]))
        for (const name of reconstructed) {
          const devicePath = attached.get(name)
          if (devicePath !== undefined) p.asw.updateReconstructedDevicePath(name, devicePath)
          p.asw.updateReconstructedVolumeAttachability(name, devicePath !== undefined)
        }
        p.reconciler.clearVolumesNeedingNodeStatus()
        p.scheduler.scheduleReconcile()
      },
      (err: unknown) => {
        p.logger.warn('Could not read node status for reconstructed volumes; retrying', { err: errorMessage(err) })
        if (p.scheduler.running) p.scheduler.setTimer(1_000, refresh)
      },
    )
  }
  refresh()
}

/**
 * The populator and reconciler loops: the kubelet's 100 ms ticks with pollingCompat; otherwise
 * passes on pod and object changes, and a resync every `resyncPeriodMs` for what no event announced.
 * What it subscribes to is pushed on `unsubscribe`.
 */
export function startLoops(p: RunParts, unsubscribe: (() => void)[]): void {
  const { options, scheduler, reconciler, populator } = p
  if (p.polling) {
    const populateTick = (): void => {
      // The kubelet's loop: every pod, every time.
      populator.podChanged()
      void p.populate().then(() => scheduler.running && scheduler.setTimer(LOOP_SLEEP_PERIOD_MS, populateTick))
    }
    const reconcileTick = (): void => {
      reconciler.markAllDirty()
      reconciler.reconcileOnce()
      scheduler.setTimer(LOOP_SLEEP_PERIOD_MS, reconcileTick)
    }
    populateTick()
    reconcileTick()
    return
  }
  unsubscribe.push(options.podSource.subscribe(p.onPodChange))
  // A changed ConfigMap, Secret, ... refreshes the volumes built from objects (the kubelet does
  // this on each pod sync); a changed claim may unblock a pod waiting for it.
  if (options.objects.subscribe) unsubscribe.push(options.objects.subscribe(p.onObjectChange))
  reconciler.markAllDirty()
  scheduler.scheduleReconcile()
  scheduler.schedulePopulate()
  scheduler.every(options.resyncPeriodMs ?? 10_000, () => {
    reconciler.queueResync()
    scheduler.scheduleReconcile()
    populator.podChanged()
    scheduler.schedulePopulate()
  })
}

/** The periods beside the loops; each 0 turns its work off. */
export function startPeriodicWork(p: RunParts): void {
  const { options: o, scheduler, populator, reconciler } = p
  // The kubelet's pod sync period: what no event announces (a token at 80% of its lifetime,
  // every object read through a reader that finds changes only by reading) is refreshed at
  // least this often. With a reader that announces changes, volumes built only from objects
  // and the pod are left to those events: steady-state work follows changes, not node size.
  const eventsSuffice = !p.polling && o.objects.announcesChanges === true && o.objects.subscribe !== undefined
  scheduler.every(o.remountPeriodMs ?? 60_000, () => {
    for (const pod of p.dsw.podsRequiringRemount({ timedOnly: eventsSuffice })) populator.reprocessPod(pod)
    scheduler.schedulePopulate()
  })
  scheduler.every(o.expansionCheckPeriodMs ?? 60_000, () => p.checkExpansion())
  scheduler.every(o.housekeepingPeriodMs ?? 10_000, () => {
    if (populator.hasAddedPods() && reconciler.statesHaveBeenSynced()) void p.cleanupOrphanedPods().catch(() => undefined)
  })
  scheduler.every(o.statsPeriodMs ?? 60_000, () => {
    void p.collectVolumeStats().catch((err: unknown) => p.logger.warn('Collecting volume stats failed', { err: errorMessage(err) }))
  })
}
