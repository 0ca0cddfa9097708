/**
 * Volume stats, collected by the agent every `statsPeriodMs` (the manager's own collection is off)
 * so that /metrics can export them.
 */
import type { Clock, VolumeStats } from '@kubevol/core'
import { errorMessage } from '@kubevol/core'
import type { AgentLogger } from '../logging/agent-logger.js'
import type { AgentMetrics } from '../metrics/agent-metrics.js'
import { type Service, defineService } from './service.js'
import type { VolumeManagerService } from './volume-manager-service.js'

export interface VolumeStatsOptions {
  readonly manager: VolumeManagerService
  /** 0: never collected, the stats stay empty. */
  readonly periodMs: number
  readonly clock: Clock
  readonly logger: AgentLogger
  readonly metrics: AgentMetrics
}

/** The service, and the last stats it collected. */
export function volumeStatsService(o: VolumeStatsOptions): { readonly service: Service; latest(): readonly VolumeStats[] } {
  let stats: readonly VolumeStats[] = []
  const collect = async (): Promise<void> => {
    const started = o.clock.now()
    try {
      stats = await o.manager.manager.collectVolumeStats()
      o.metrics.observe('volume_metric_collection_duration_seconds', { metric_source: 'fs' }, (o.clock.now() - started) / 1000)
    } catch (err) {
      o.logger.warn('Collecting volume stats failed', { err: errorMessage(err) })
    }
  }
  const service = defineService('volume-stats', {
    create: () => {
      if (o.periodMs <= 0) return undefined
      const timer = setInterval(() => void collect(), o.periodMs)
      timer.unref()
      return timer
    },
    stop: (timer) => clearInterval(timer),
  })
  return { service, latest: () => stats }
}
