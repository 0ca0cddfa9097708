/**
 * The gauges /metrics computes at each scrape from what the agent binds (`AgentMetrics.bind`): the
 * kubelet's volume manager and volume stats series, and kubevol's own. Registered in this order,
 * which is the order of the exposition.
 */
import type { VolumeManager, VolumeStats } from '@kubevol/core'
import { Gauge, type Registry } from 'prom-client'
import type { MetricsView } from './agent-metrics.js'

type View = () => MetricsView | undefined

/** Registers every scrape-time gauge on `registry`; each reads `view()` and is empty while nothing is bound. */
export function registerScrapeGauges(registry: Registry, view: View): void {
  const registers = [registry]
  volumeManagerGauge(registers, view)
  statGauges(registers, view)
  simpleGauges(registers, view)
  stateGauges(registers, view)
}

function volumeManagerGauge(registers: Registry[], view: View): void {
  new Gauge({
    name: 'volume_manager_total_volumes',
    help: 'Number of volumes in Volume Manager',
    labelNames: ['plugin_name', 'state'],
    registers,
    collect() {
      this.reset()
      const bound = view()
      if (!bound) return
      for (const [state, counts] of [
        ['desired_state_of_world', bound.manager.desiredState.countByPlugin()],
        ['actual_state_of_world', bound.manager.actualState.countByPlugin()],
      ] as const) {
        for (const [plugin, n] of counts) this.set({ plugin_name: plugin || 'N/A', state }, n)
      }
    },
  })
}

function statGauges(registers: Registry[], view: View): void {
  // `pick` answers undefined for a volume that has no value: it gets no series.
  const statGauge = (name: string, help: string, pick: (s: VolumeStats) => number | undefined): void => {
    new Gauge({
      name,
      help,
      labelNames: ['namespace', 'persistentvolumeclaim'],
      registers,
      collect() {
        this.reset()
        for (const s of view()?.stats() ?? []) {
          const value = s.claim ? pick(s) : undefined
          if (value === undefined) continue
          this.set({ namespace: s.pod.metadata.namespace ?? 'default', persistentvolumeclaim: s.claim as string }, value)
        }
      },
    })
  }
  statGauge('kubelet_volume_stats_capacity_bytes', 'Capacity in bytes of the volume', (s) => s.stats.capacityBytes)
  statGauge('kubelet_volume_stats_available_bytes', 'Number of available bytes in the volume', (s) => s.stats.availableBytes)
  statGauge('kubelet_volume_stats_used_bytes', 'Number of used bytes in the volume', (s) => s.stats.usedBytes)
  statGauge('kubelet_volume_stats_inodes', 'Maximum number of inodes in the volume', (s) => s.stats.inodes)
  statGauge('kubelet_volume_stats_inodes_free', 'Number of free inodes in the volume', (s) => s.stats.inodesFree)
  statGauge('kubelet_volume_stats_inodes_used', 'Number of used inodes in the volume', (s) => s.stats.inodesUsed)
  // The driver's volume condition (CSI VOLUME_CONDITION), as the kubelet exports it; no series
  // for a volume whose driver does not report one.
  statGauge(
    'kubelet_volume_stats_health_status_abnormal',
    'Abnormal volume health status. The count is either 1 or 0. 1 indicates the volume is unhealthy, 0 indicates volume is healthy',
    (s) => (s.stats.volumeCondition ? Number(s.stats.volumeCondition.abnormal) : undefined),
  )
}

function simpleGauges(registers: Registry[], view: View): void {
  const simple = (name: string, help: string, read: (view: MetricsView) => number | undefined): void => {
    new Gauge({
      name,
      help,
      registers,
      collect() {
        const bound = view()
        const value = bound ? read(bound) : undefined
        if (value === undefined) this.reset()
        else this.set(value)
      },
    })
  }
  simple('kubevol_volumes_backing_off', 'Volume operations waiting for their backoff to end after a failure.', (v) => v.backoffCount())
  simple('kubevol_operations_running', 'Volume operations running now.', (v) => v.manager.snapshot().runningOperations)
  simple(
    'kubevol_operations_queued',
    'Volume operations waiting for one of the maxRunningOperations slots (started in order as slots free).',
    (v) => v.manager.snapshot().queuedOperations,
  )
  simple('kubevol_sources_ready', '1 when every pod source has delivered its first full list.', (v) => (v.sourcesReady() ? 1 : 0))
  simple('kubevol_journal_records', 'Records in the durable journal.', (v) => journalOf(v.manager)?.records)
  simple('kubevol_journal_bytes', 'Size of the durable journal in bytes.', (v) => journalOf(v.manager)?.bytes)
  simple('kubevol_manifest_errors', 'Manifest documents refused in static mode.', (v) => v.manifestErrors?.())
}

function stateGauges(registers: Registry[], view: View): void {
  new Gauge({
    name: 'kubevol_volumes_uncertain',
    help: 'Volume mounts (kind mount) and device mounts (kind device) that may or may not be in place.',
    labelNames: ['kind'],
    registers,
    collect() {
      this.reset()
      const bound = view()
      if (!bound) return
      const snap = bound.manager.snapshot()
      this.set({ kind: 'mount' }, snap.mounted.filter((m) => m.mountState === 'uncertain').length)
      this.set({ kind: 'device' }, snap.attached.filter((a) => a.deviceMountState === 'uncertain').length)
    },
  })
  new Gauge({
    name: 'kubevol_volume_operations_stuck_seconds',
    help: 'How long each operation running past the stuck threshold has been running (a host call that does not return).',
    labelNames: ['operation', 'volume_name', 'pod_uid'],
    registers,
    collect() {
      this.reset()
      for (const op of view()?.stuckOperations?.() ?? []) this.set({ operation: op.operation, volume_name: op.volumeName, pod_uid: op.podUID }, op.runningMs / 1000)
    },
  })
  new Gauge({
    name: 'kubevol_pods',
    help: 'Pods by the phase of their volumes.',
    labelNames: ['phase'],
    registers,
    collect() {
      this.reset()
      for (const [phase, n] of view()?.podPhases() ?? []) this.set({ phase }, n)
    },
  })
}

/** The journal size, when the manager keeps a journal (newer cores report it in the snapshot). */
function journalOf(manager: VolumeManager): { records: number; bytes: number } | undefined {
  const snap = manager.snapshot() as { journal?: { records: number; bytes: number } }
  return snap.journal
}
