/**
 * The kubelet's volume stats: capacity and usage of each mounted volume, from its plugin's metrics
 * (volumes whose plugin cannot tell are left out), with the claim for the
 * `namespace`/`persistentvolumeclaim` labels. A disk emptyDir whose usage exceeds its sizeLimit is
 * reported with a Warning event `EmptyDirSizeLimitExceeded` on the pod, once per crossing.
 */
import type { Pod } from '../api/kubernetes.js'
import type { UniquePodName, UniqueVolumeName } from '../api/names.js'
import type { ActualStateOfWorld } from '../cache/actual-state.js'
import type { DesiredStateOfWorld } from '../cache/desired-state.js'
import type { Clock } from '../clock.js'
import { errorMessage } from '../errors.js'
import type { Logger, Recorder } from '../observability.js'
import type { PluginManager } from '../plugins/plugin-manager.js'
import type { VolumeMetrics } from '../plugins/plugin.js'

/** One mounted volume's usage, as `collectVolumeStats` reports it. */
export interface VolumeStats {
  readonly podName: UniquePodName
  readonly pod: Pod
  readonly outerVolumeSpecName: string
  readonly volumeName: UniqueVolumeName
  readonly pluginName: string
  /** The claim, for the `namespace`/`persistentvolumeclaim` labels. */
  readonly claim?: string
  /** Usage, and the health the plugin reports (`volumeCondition`, CSI drivers with VOLUME_CONDITION). */
  readonly stats: VolumeMetrics
}

export interface VolumeStatsCollectorOptions {
  readonly dsw: DesiredStateOfWorld
  readonly asw: ActualStateOfWorld
  readonly plugins: PluginManager
  readonly logger: Logger
  readonly recorder: Recorder
  readonly clock: Clock
}

export class VolumeStatsCollector {
  readonly #o: VolumeStatsCollectorOptions
  /** (pod, volume) pairs whose emptyDir is over its sizeLimit, so the event is sent once per crossing. */
  readonly #overLimit = new Set<string>()

  constructor(options: VolumeStatsCollectorOptions) {
    this.#o = options
  }

  async collect(): Promise<VolumeStats[]> {
    const { dsw, asw, plugins, logger } = this.#o
    const result: VolumeStats[] = []
    for (const vtm of dsw.getVolumesToMount()) {
      if (asw.getVolumeMountState(vtm.volumeName, vtm.podName) !== 'mounted') continue
      let stats: VolumeMetrics | undefined
      try {
        stats = await plugins.findPluginBySpec(vtm.spec).newMounter(vtm.spec, vtm.pod).getMetrics?.()
      } catch (err) {
        logger.debug('Volume stats unavailable', { volume: vtm.volumeName, err: errorMessage(err) })
      }
      if (!stats) continue
      const outer = vtm.outerVolumeSpecNames[0] ?? vtm.spec.name
      const claim = vtm.pod.spec?.volumes?.find((v) => v.name === outer)?.persistentVolumeClaim?.claimName
      result.push({ podName: vtm.podName, pod: vtm.pod, outerVolumeSpecName: outer, volumeName: vtm.volumeName, pluginName: vtm.pluginName, ...(claim ? { claim } : {}), stats })
      const limit = vtm.spec.volume?.emptyDir && !vtm.spec.volume.emptyDir.medium ? vtm.spec.volume.emptyDir.sizeLimit : undefined
      const over = limit !== undefined && stats.capacityBytes > 0 && stats.usedBytes > stats.capacityBytes
      const key = `${vtm.podName}/${vtm.volumeName}`
      if (over && !this.#overLimit.has(key)) {
        this.#overLimit.add(key)
        this.#o.recorder.event({
          type: 'Warning',
          reason: 'EmptyDirSizeLimitExceeded',
          message: `Usage of EmptyDir volume "${outer}" exceeds the limit "${String(limit)}".`,
          target: { kind: 'Pod', metadata: vtm.pod.metadata },
          time: this.#o.clock.now(),
        })
      } else if (!over) this.#overLimit.delete(key)
    }
    return result
  }
}
