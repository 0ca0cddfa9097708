/**
 * One lifecycle shape for every part of the agent (controller-runtime's Runnable, with the kubelet's
 * two-phase shutdown), and the runner that starts a list of them in order and stops them in reverse.
 */

/**
 * A part of the agent that starts, may report why it is not ready, and stops.
 *
 * Shutdown has two phases, as the kubelet's: first every service stops taking work (`quiesce`,
 * last-started first; the volume manager then lets running operations finish within the grace),
 * then every service releases what it holds (`stop`, last-started first).
 */
export interface Service {
  /** Also the name of its readiness check, when it has one. */
  readonly name: string
  /** Starts it. A service whose start throws is stopped all the same: `stop` copes with a half start. */
  start(): Promise<void> | void
  /** Why it is not ready, or `undefined` when it is. */
  ready?(): string | undefined
  /** Stops taking new work; `graceMs` is how long work in flight may still run. */
  quiesce?(graceMs: number): Promise<void> | void
  /** Releases what it holds; `deadlineMs` is the most it waits for work in flight (a flush) before giving up on it. */
  stop(deadlineMs: number): Promise<void> | void
}

/** A service around a value it makes at start, usually from what the services before it made. */
export interface ValueService<T> extends Service {
  /** What `create` made. Throws before the service has started. */
  readonly value: T
}

/** How `defineService` makes, starts and stops its value; every hook but `create` is optional. */
export interface ServiceSpec<T> {
  create(): Promise<T> | T
  start?(value: T): Promise<void> | void
  ready?(value: T): string | undefined
  quiesce?(value: T, graceMs: number): Promise<void> | void
  stop?(value: T, deadlineMs: number): Promise<void> | void
}

const isPromise = (x: unknown): x is Promise<unknown> => typeof (x as Promise<unknown> | undefined)?.then === 'function'

/**
 * A service from a spec. A synchronous `create` and `start` stay synchronous (no await between the
 * steps of a start that used to run in one turn). Hooks other than `create` run only once the value exists.
 */
export function defineService<T>(name: string, spec: ServiceSpec<T>): ValueService<T> {
  let made = false
  let value: T | undefined
  const begin = (v: T): Promise<void> | void => {
    value = v
    made = true
    return spec.start?.(v)
  }
  return {
    name,
    get value(): T {
      if (!made) throw new Error(`the ${name} service has not started`)
      return value as T
    },
    start() {
      const v = spec.create()
      return isPromise(v) ? v.then(begin) : begin(v)
    },
    ...(spec.ready ? { ready: () => (made ? spec.ready?.(value as T) : 'not started') } : {}),
    ...(spec.quiesce ? { quiesce: (graceMs: number) => (made ? spec.quiesce?.(value as T, graceMs) : undefined) } : {}),
    stop(deadlineMs) {
      return made ? spec.stop?.(value as T, deadlineMs) : undefined
    },
  }
}

/** What `ServiceRunner.stop` needs. */
export interface StopOptions {
  /** How long running work may still run once every service has stopped taking it. */
  readonly graceMs: number
  /** Given to each `stop`. @default 2000 (how long the event sink waits to flush) */
  readonly deadlineMs?: number
  /** A `stop` that failed; the others still run. */
  readonly onError: (err: unknown) => void
}

/** Starts services in order and stops the started ones in reverse. */
export class ServiceRunner {
  readonly #started: Service[] = []

  /** Starts each in turn; throws the first failure (call `abort` then). */
  async start(services: readonly Service[]): Promise<void> {
    for (const service of services) {
      this.#started.push(service)
      const starting = service.start()
      if (starting) await starting
    }
  }

  /** The `ready` answers of the started services that have one, in start order. */
  checks(): { readonly name: string; readonly ok: boolean; readonly message?: string }[] {
    return this.#started.flatMap((s) => {
      if (!s.ready) return []
      const reason = s.ready()
      return [reason === undefined ? { name: s.name, ok: true } : { name: s.name, ok: false, message: reason }]
    })
  }

  /** The orderly shutdown: every service quiesces, then stops, last-started first. */
  async stop(options: StopOptions): Promise<void> {
    const services = this.#started.splice(0).reverse()
    for (const service of services) {
      const quiescing = service.quiesce?.(options.graceMs)
      if (quiescing) await quiescing
    }
    for (const service of services) {
      try {
        await service.stop(options.deadlineMs ?? 2_000)
      } catch (err) {
        options.onError(err)
      }
    }
  }

  /** After a failed start: stops what started, last first, ignoring failures. */
  async abort(): Promise<void> {
    for (const service of this.#started.splice(0).reverse()) {
      try {
        await service.stop(2_000)
      } catch {
        // The start's own error is the one to report.
      }
    }
  }
}
