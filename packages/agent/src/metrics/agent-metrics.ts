/**
 * Prometheus metrics with prom-client, in a registry of their own (prom-client's default Node.js
 * metrics are left out: they do not pass `promtool check metrics`).
 *
 * - The core's {@link Metrics} port is mapped onto the kubelet's counters and histograms by name
 *   (SPEC §9): same names, labels and buckets, so existing dashboards and alerts work.
 * - Gauges are computed at scrape time from the manager: `volume_manager_total_volumes`,
 *   `kubelet_volume_stats_*` per PVC (from the last collection), and kubevol's own `kubevol_*`.
 */
import {
  type MetricLabels,
  type Metrics,
  OPERATION_DURATION_BUCKETS,
  type VolumeManager,
  type VolumeStats,
} from '@kubevol/core'
import { Counter, Gauge, Histogram, Registry } from 'prom-client'
import { registerScrapeGauges } from './scrape-gauges.js'

type Kind = 'counter' | 'histogram' | 'gauge'

interface Definition {
  readonly type: Kind
  /** The exposed name, when it differs from the core's (the kubelet prefixes some). */
  readonly exposed?: string
  readonly help: string
  readonly labelNames: readonly string[]
  readonly buckets?: readonly number[]
}

const OPERATION_LABELS = ['volume_plugin', 'operation_name', 'status', 'migrated']

/** What the core reports, by the name it uses (SPEC §9). */
const CORE_METRICS: Readonly<Record<string, Definition>> = {
  storage_operation_duration_seconds: {
    type: 'histogram',
    help: 'Storage operation duration',
    labelNames: OPERATION_LABELS,
    buckets: OPERATION_DURATION_BUCKETS,
  },
  volume_operation_total_seconds: {
    type: 'histogram',
    help: 'Storage operation end to end duration in seconds',
    labelNames: ['plugin_name', 'operation_name'],
    buckets: OPERATION_DURATION_BUCKETS,
  },
  csi_operations_seconds: {
    type: 'histogram',
    help: 'Container Storage Interface operation duration with gRPC error code status total',
    labelNames: ['driver_name', 'method_name', 'grpc_status_code', 'migrated'],
    buckets: OPERATION_DURATION_BUCKETS,
  },
  reconstruct_volume_operations_total: {
    type: 'counter',
    help: 'The number of volumes that were attempted to be reconstructed from the operating system during kubelet startup. This includes both successful and failed reconstruction.',
    labelNames: [],
  },
  reconstruct_volume_operations_errors_total: {
    type: 'counter',
    help: 'The number of volumes that failed reconstruction from the operating system during kubelet startup.',
    labelNames: [],
  },
  force_cleaned_failed_volume_operations_total: {
    type: 'counter',
    help: 'The number of volumes that were force cleaned after their reconstruction failed during kubelet startup. This includes both successful and failed cleanups.',
    labelNames: [],
  },
  force_cleaned_failed_volume_operation_errors_total: {
    type: 'counter',
    help: 'The number of volumes that failed force cleanup after their reconstruction failed during kubelet startup.',
    labelNames: [],
  },
  orphan_pod_cleaned_volumes: {
    type: 'gauge',
    exposed: 'kubelet_orphan_pod_cleaned_volumes',
    help: 'The total number of orphaned Pods whose volumes were cleaned in the last periodic sweep.',
    labelNames: [],
  },
  orphan_pod_cleaned_volumes_errors: {
    type: 'gauge',
    exposed: 'kubelet_orphan_pod_cleaned_volumes_errors',
    help: 'The number of orphaned Pods whose volumes failed to be cleaned in the last periodic sweep.',
    labelNames: [],
  },
  volume_metric_collection_duration_seconds: {
    type: 'histogram',
    exposed: 'kubelet_volume_metric_collection_duration_seconds',
    help: 'Duration in seconds to calculate volume stats',
    labelNames: ['metric_source'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  },
}

/** What the scrape-time gauges read. */
export interface MetricsView {
  readonly manager: VolumeManager
  /** The last volume usage collection. */
  stats(): readonly VolumeStats[]
  /** Pods by worker phase. */
  podPhases(): ReadonlyMap<string, number>
  /** (volume, pod) keys whose last operation failed and whose retry time is still ahead. */
  backoffCount(): number
  sourcesReady(): boolean
  /** Static mode: refused manifest documents. */
  manifestErrors?(): number
  /** Operations running longer than the stuck threshold. */
  stuckOperations?(): readonly { readonly operation: string; readonly volumeName: string; readonly podUID: string; readonly runningMs: number }[]
  /** TLS bootstrapping: when the node's client certificate ends (ms since the epoch), if it has one. */
  clientCertificateNotAfter?(): number | undefined
}

/** The agent's metrics: the core's port, kubevol's own instruments, and the exposition. */
export class AgentMetrics implements Metrics {
  readonly registry = new Registry()
  readonly #instruments = new Map<string, Counter | Histogram | Gauge>()
  readonly #refused = new Set<string>()
  #view: MetricsView | undefined
  readonly #onError: (message: string) => void

  /** Time from a volume's mount request (desired) to mounted (actual). */
  readonly mountLatency: Histogram
  readonly events: Counter
  readonly watchRestarts: Counter
  readonly nodeStatusPatches: Counter
  readonly eventPosts: Counter

  constructor(options: { readonly version?: string; readonly onError?: (message: string) => void } = {}) {
    this.#onError = options.onError ?? (() => {})
    const registers = [this.registry]
    this.mountLatency = new Histogram({
      name: 'kubevol_volume_mount_latency_seconds',
      help: 'Time from a volume being desired for a pod to being mounted for it.',
      labelNames: ['plugin_name'],
      buckets: OPERATION_DURATION_BUCKETS as number[],
      registers,
    })
    this.events = new Counter({ name: 'kubevol_events_total', help: 'Events recorded, repeats included.', labelNames: ['type', 'reason'], registers })
    this.watchRestarts = new Counter({
      name: 'kubevol_watch_restarts_total',
      help: 'Lists and watches of the Kubernetes API restarted after an error, or listed again after a 410 Expired (reason "expired").',
      labelNames: ['resource', 'reason'],
      registers,
    })
    this.nodeStatusPatches = new Counter({ name: 'kubevol_node_status_patches_total', help: 'Patches of node.status.volumesInUse.', labelNames: ['result'], registers })
    this.eventPosts = new Counter({ name: 'kubevol_event_posts_total', help: 'Events posted to the Kubernetes API.', labelNames: ['result'], registers })
    new Gauge({ name: 'kubevol_build_info', help: 'Always 1; the version is a label.', labelNames: ['version'], registers }).set({ version: options.version ?? 'unknown' }, 1)
    registerScrapeGauges(this.registry, () => this.#view)
    const view = () => this.#view
    new Gauge({
      name: 'kubelet_certificate_manager_client_ttl_seconds',
      help: "Gauge of the TTL (time-to-live) of the Kubelet's client certificate. The value is in seconds until certificate expiry (negative if already expired). If client certificate is invalid or unused, the value will be +INF.",
      registers,
      collect() {
        const notAfter = view()?.clientCertificateNotAfter?.()
        this.set(notAfter === undefined ? Number.POSITIVE_INFINITY : Math.trunc((notAfter - Date.now()) / 1000))
      },
    })
  }

  /** Makes the scrape-time gauges read `view`. */
  bind(view: MetricsView): void {
    this.#view = view
  }

  inc(name: string, labels: MetricLabels = {}, value = 1): void {
    const metric = this.#instrument(name, 'counter', labels)
    if (metric instanceof Counter) this.#guard(name, () => metric.inc(labels, value))
  }

  observe(name: string, labels: MetricLabels, seconds: number): void {
    const metric = this.#instrument(name, 'histogram', labels)
    if (metric instanceof Histogram) this.#guard(name, () => metric.observe(labels, seconds))
  }

  set(name: string, labels: MetricLabels, value: number): void {
    const metric = this.#instrument(name, 'gauge', labels)
    if (metric instanceof Gauge) this.#guard(name, () => metric.set(labels, value))
  }

  /** The exposition text. */
  expose(): Promise<string> {
    return this.registry.metrics()
  }

  get contentType(): string {
    return this.registry.contentType
  }

  #guard(name: string, fn: () => void): void {
    try {
      fn()
    } catch (err) {
      if (this.#refused.has(name)) return
      this.#refused.add(name)
      this.#onError(`metric ${name} refused a sample: ${err instanceof Error ? err.message : String(err)}`)
    }
  }

  #instrument(name: string, kind: Kind, labels: MetricLabels): Counter | Histogram | Gauge | undefined {
    const known = this.#instruments.get(name)
    if (known) return known
    const def: Definition = CORE_METRICS[name] ?? CORE_METRICS[name.replace(/^kubelet_/, '')] ?? {
      type: kind,
      help: `kubevol core metric ${name}`,
      labelNames: Object.keys(labels),
      ...(kind === 'histogram' ? { buckets: OPERATION_DURATION_BUCKETS } : {}),
    }
    if (def.type !== kind) {
      this.#guard(name, () => {
        throw new Error(`${name} is a ${def.type}, not a ${kind}`)
      })
      return undefined
    }
    const config = { name: (def.exposed ?? name).replace(/[^a-zA-Z0-9_:]/g, '_'), help: def.help, labelNames: [...def.labelNames], registers: [this.registry] }
    let metric: Counter | Histogram | Gauge
    try {
      metric =
        def.type === 'counter'
          ? new Counter(config)
          : def.type === 'histogram'
            ? new Histogram({ ...config, buckets: [...(def.buckets ?? OPERATION_DURATION_BUCKETS)] })
            : new Gauge(config)
    } catch (err) {
      this.#guard(name, () => {
        throw err
      })
      return undefined
    }
    this.#instruments.set(name, metric)
    return metric
  }
}

