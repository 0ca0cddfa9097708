/**
 * The manager's housekeeping of orphaned pod directories (SPEC §5.7; the removal itself is
 * reconstruction/orphans.ts): the kubelet's `orphan_pod_cleaned_volumes` gauges, and a directory
 * that cannot be removed is logged and reported as an `OrphanedPodCleanupFailed` Warning on the
 * node once per directory and reason, not on every pass.
 */
import type { UniquePodName } from '../api/names.js'
import type { Clock } from '../clock.js'
import type { Host } from '../host/host.js'
import type { Logger, Metrics, Recorder } from '../observability.js'
import type { Paths } from '../paths.js'
import { type OrphanCleanupReport, cleanupOrphanedPodDirs } from '../reconstruction/orphans.js'

export interface OrphanCleanupOptions {
  readonly host: Host
  readonly paths: Paths
  readonly nodeName: string
  readonly logger: Logger
  readonly metrics: Metrics
  readonly recorder: Recorder
  readonly clock: Clock
  /** True while a source knows the pod or it may still have a mount. */
  readonly podInUse: (podName: UniquePodName) => boolean
}

export class OrphanCleanup {
  readonly #o: OrphanCleanupOptions
  /** `<pod>\n<reason>` of each refusal already reported. */
  readonly #reported = new Set<string>()

  constructor(options: OrphanCleanupOptions) {
    this.#o = options
  }

  async run(options?: { dryRun?: boolean }): Promise<OrphanCleanupReport> {
    const { host, paths, logger, metrics, recorder } = this.#o
    const report = await cleanupOrphanedPodDirs({ host, paths, logger, podInUse: this.#o.podInUse }, options)
    metrics.set?.('orphan_pod_cleaned_volumes', {}, report.orphans.length)
    metrics.set?.('orphan_pod_cleaned_volumes_errors', {}, report.refused.length)
    for (const { pod, reason } of report.refused) {
      const key = `${pod}\n${reason}`
      if (this.#reported.has(key)) continue
      this.#reported.add(key)
      logger.warn('Orphaned pod found, but volumes are not cleaned up', { pod, reason })
      recorder.event({
        type: 'Warning',
        reason: 'OrphanedPodCleanupFailed',
        message: reason,
        target: { kind: 'Node', metadata: { name: this.#o.nodeName } },
        time: this.#o.clock.now(),
      })
    }
    for (const pod of report.removed) {
      for (const key of this.#reported) if (key.startsWith(`${pod}\n`)) this.#reported.delete(key)
    }
    return report
  }
}
