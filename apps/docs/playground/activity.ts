/**
 * What the playground's pictures are drawn from: every operation the volume manager reports (its
 * start, its end, its error) and every step the fake plugins run (attach, device mount, setup …),
 * kept as spans on one lane per volume. Nothing here knows the backoff policy: the engine asks the
 * manager's operation executor when a failed operation may be retried.
 */
import type { OperationRecord } from '@kubevol/core'
import type { FakePlugin } from '@kubevol/core/testing'

/** What a span stands for, as the pictures name and colour it. */
export type SpanKind = 'attach' | 'verify' | 'mount' | 'device mount' | 'setup' | 'teardown' | 'unmount' | 'device unmount' | 'detach' | 'other'

/** One operation, or one plugin step inside an operation, on the lane of its volume. */
export interface Span {
  readonly id: number
  /** The lane: the volume's unique name. */
  readonly lane: string
  readonly level: 'operation' | 'step'
  readonly kind: SpanKind
  /** The operation's name (`volume_mount`) or the plugin step's (`mountDevice`). */
  readonly name: string
  /** The pod it ran for ('' for the node). */
  readonly podName: string
  /** Milliseconds since the playground started. */
  readonly start: number
  readonly end?: number
  readonly error?: string
  /** 1 for a first try; n for the n-th try after n-1 failures in a row of the same operation. */
  readonly attempt: number
}

/** The kind an operation's span has. */
export function operationKind(name: string): SpanKind {
  switch (name) {
    case 'volume_attach':
      return 'attach'
    case 'verify_controller_attached_volume':
      return 'verify'
    case 'volume_mount':
    case 'map_volume':
      return 'mount'
    case 'volume_unmount':
    case 'unmap_volume':
      return 'unmount'
    case 'unmount_device':
    case 'unmap_device':
      return 'device unmount'
    case 'volume_detach':
      return 'detach'
    default:
      return 'other'
  }
}

/** The kind a plugin step's span has. */
export function stepKind(step: string): SpanKind {
  switch (step) {
    case 'attach':
      return 'attach'
    case 'waitForAttach':
      return 'verify'
    case 'mountDevice':
    case 'setUpDevice':
      return 'device mount'
    case 'setUp':
    case 'mapPodDevice':
      return 'setup'
    case 'tearDown':
    case 'unmapPodDevice':
      return 'teardown'
    case 'unmountDevice':
    case 'tearDownDevice':
      return 'device unmount'
    case 'detach':
      return 'detach'
    default:
      return 'other'
  }
}

/** Operations that bring a volume towards the desired state ('in') or take it away ('out'). */
export function operationDirection(name: string): 'in' | 'out' {
  const kind = operationKind(name)
  return kind === 'unmount' || kind === 'device unmount' || kind === 'detach' ? 'out' : 'in'
}

export interface Activity {
  /** Records an operation's start or end, as the manager reports it. */
  operation(record: OperationRecord): void
  /** Records the start of a plugin step; call the function returned when it ends. */
  step(lane: string, name: string, podName: string): (error?: unknown) => void
  /** Ends every open span as lost: the process that ran them is gone. */
  crash(): void
  /** The spans, oldest first. */
  spans(): readonly Span[]
  /** Operations started and not ended. */
  running(): readonly Span[]
  /** The last try of each operation that failed and has not been tried again since. */
  failed(): readonly Span[]
}

const keyOf = (name: string, lane: string, podName: string): string => `${name}|${lane}|${podName}`

export interface ActivityOptions {
  /**
   * Plugins whose steps are recorded through {@link recordPluginSteps}. For any other plugin, whose
   * `volume_mount` is its setup and `volume_unmount` its teardown, the operation is also recorded
   * as that step. @default none
   */
  readonly steppedPlugins?: readonly string[]
  /** How many spans are kept (the oldest go first). @default 400 */
  readonly limit?: number
}

/** Creates an activity record. `now` is the playground's clock in milliseconds since it started. */
export function createActivity(now: () => number, options: ActivityOptions = {}): Activity {
  const limit = options.limit ?? 400
  const stepped = new Set(options.steppedPlugins ?? [])
  /** The setup or teardown step of a built-in plugin's running operation, by operation key. */
  const builtinSteps = new Map<string, (error?: unknown) => void>()
  const spans: Span[] = []
  const open = new Map<string, Span>()
  /** Failures in a row per operation key, and the failed span while no retry has started. */
  const streaks = new Map<string, { failures: number; last?: Span }>()
  let nextId = 0

  const push = (span: Span): Span => {
    spans.push(span)
    if (spans.length > limit) spans.splice(0, spans.length - limit)
    return span
  }
  const close = (span: Span, fields: { end: number; error?: string }): Span => {
    const ended: Span = { ...span, ...fields }
    const i = spans.lastIndexOf(span)
    if (i >= 0) spans[i] = ended
    return ended
  }

  const activity: Activity = {
    operation(record) {
      const key = keyOf(record.name, record.volumeName, record.podName)
      const builtinStep = stepped.has(record.pluginName) ? undefined : record.name === 'volume_mount' ? 'setUp' : record.name === 'volume_unmount' ? 'tearDown' : undefined
      const streak = streaks.get(key) ?? { failures: 0 }
      streaks.set(key, streak)
      if (record.endedAt === undefined) {
        streak.last = undefined
        const span = push({
          id: nextId++,
          lane: record.volumeName,
          level: 'operation',
          kind: operationKind(record.name),
          name: record.name,
          podName: record.podName,
          start: now(),
          attempt: streak.failures + 1,
        })
        open.set(key, span)
        if (builtinStep) builtinSteps.set(key, activity.step(record.volumeName, builtinStep, record.podName))
        return
      }
      if (builtinStep) {
        builtinSteps.get(key)?.(record.error === undefined ? undefined : new Error(record.error))
        builtinSteps.delete(key)
      }
      const span = open.get(key)
      if (!span) return
      open.delete(key)
      const ended = close(span, record.error === undefined ? { end: now() } : { end: now(), error: record.error })
      if (record.error === undefined) streak.failures = 0
      else {
        streak.failures++
        streak.last = ended
      }
    },
    step(lane, name, podName) {
      const span = push({ id: nextId++, lane, level: 'step', kind: stepKind(name), name, podName, start: now(), attempt: 1 })
      return (error) => {
        close(span, error === undefined ? { end: now() } : { end: now(), error: error instanceof Error ? error.message : String(error) })
      }
    },
    crash() {
      const at = now()
      for (const [i, span] of spans.entries()) if (span.end === undefined) spans[i] = { ...span, end: at, error: 'lost in the crash' }
      open.clear()
      streaks.clear()
      builtinSteps.clear()
    },
    spans: () => [...spans],
    running: () => [...open.values()],
    failed: () => [...streaks.values()].flatMap((s) => (s.last ? [s.last] : [])),
  }
  return activity
}

/**
 * Records every step of a fake plugin on the lane of the operation running it. Add it before any
 * fault, so it is the outermost interceptor and sees a step fail or hang as the manager does.
 * `shared`: the plugin's volumes are shared by pods (named `plugin/volume`), not per pod
 * (`plugin/<pod uid>-volume`).
 */
export function recordPluginSteps(activity: Activity, plugin: FakePlugin, shared: boolean): void {
  plugin.intercept(async (call, next) => {
    // After a restart the plugin sees a reconstructed volume by its pod volume name, so the lane
    // comes from the operation running the step, and from the plugin's names only when none is found.
    const own = shared ? `${plugin.name}/${call.volume}` : `${plugin.name}/${call.podUID ?? ''}-${call.volume}`
    const running = activity
      .running()
      .filter((op) => op.lane.startsWith(`${plugin.name}/`) && (call.podUID === undefined || op.podName === call.podUID || op.podName === ''))
    const lane = (running.find((op) => op.lane === own) ?? running.at(-1))?.lane ?? own
    const done = activity.step(lane, call.step, call.podUID ?? '')
    try {
      await next()
      done()
    } catch (err) {
      done(err)
      throw err
    }
  })
}
