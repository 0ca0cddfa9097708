/**
 * Logger, Recorder (Kubernetes-style events) and Metrics ports, each with a silent default so the
 * core runs with nothing wired. The agent implements them with pino, the events API and prom-client.
 */
import type { ObjectMeta } from './api/kubernetes.js'

export type LogFields = Readonly<Record<string, unknown>>

/** Structured logs. `debug` is the kubelet's higher verbosity. */
export interface Logger {
  debug(message: string, fields?: LogFields): void
  info(message: string, fields?: LogFields): void
  warn(message: string, fields?: LogFields): void
  error(message: string, fields?: LogFields): void
}

export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} }

/** The object an event is about (a pod, a PVC, a PV). */
export interface EventTarget {
  readonly kind: string
  readonly metadata: ObjectMeta
}

/** One Kubernetes-style event. */
export interface VolumeEvent {
  readonly type: 'Normal' | 'Warning'
  /** `FailedMount`, `SuccessfulAttachVolume`, ... (SPEC §9). */
  readonly reason: string
  readonly message: string
  readonly target: EventTarget
  /** Clock time of the event, ms. */
  readonly time: number
}

/** Where events go. */
export interface Recorder {
  event(event: VolumeEvent): void
}

export const silentRecorder: Recorder = { event() {} }

/** Label values of one series. */
export type MetricLabels = Readonly<Record<string, string>>

/** Counters and histograms. Names follow SPEC §9 without the `kubelet_` prefix. */
export interface Metrics {
  /** Adds `value` (default 1) to a counter. */
  inc(name: string, labels?: MetricLabels, value?: number): void
  /** Records one observation in seconds. */
  observe(name: string, labels: MetricLabels, seconds: number): void
  /** Sets a gauge. */
  set?(name: string, labels: MetricLabels, value: number): void
}

export const silentMetrics: Metrics = { inc() {}, observe() {} }

/** The histogram buckets of every volume operation metric (SPEC §9), in seconds. */
export const OPERATION_DURATION_BUCKETS: readonly number[] = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600]
