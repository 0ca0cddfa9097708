/**
 * Fault injection through interceptors: every Host call (capabilities included) passes through the
 * interceptors before it reaches the in-memory kernel, most recently added first. `failOn`, `hangOn`
 * and `delay` are interceptors; `markBusy` marks a mount the kernel would refuse to unmount (EBUSY).
 */
import type { Clock, HostErrorCode } from '@kubevol/core'
import { HostError } from '@kubevol/core'
import { joinPath } from '@kubevol/core/host'

/**
 * One call into the host. `method` is the Host member (`mkdir`, `mount`, `statfs`) or
 * `capability.member` (`loopDevices.attach`, `filesystems.format`, `blockDevices.size`); `path` is
 * the path it is about (`mount`: the target; `rename`: the source; capabilities: the file or device).
 */
export interface HostCall {
  readonly method: string
  readonly args: readonly unknown[]
  readonly path?: string
}

/** Sees a call before the host runs it; `next()` runs the rest of the chain and the real call. */
export type Interceptor = (call: HostCall, next: () => Promise<unknown>) => unknown

/** Which calls a fault applies to: a predicate, or a method name and/or a path (exact or pattern). */
export type CallMatch = ((call: HostCall) => boolean) | { readonly method?: string; readonly path?: string | RegExp }

/** Removes what was added. Calling it twice is a no-op. */
export type Disposer = () => void

/** What `failOn` rejects with: an errno (a HostError naming the call is built), an error, or a function of the call. */
export type InjectedError = HostErrorCode | Error | ((call: HostCall) => Error)

/** A hang set by `hangOn`. */
export interface HangHandle {
  /** The calls being held right now. */
  readonly held: readonly HostCall[]
  /** Resolves with the first call held (at once when one is held already). */
  reached(): Promise<HostCall>
  /** Lets every held call run, and stops holding new ones. */
  release(): void
}

/** The fault controls of a memory host. */
export interface Faults {
  /** Adds an interceptor; it runs before those added earlier. */
  intercept(interceptor: Interceptor): Disposer
  /** Rejects matching calls with `error` without running them; nothing changes on the host. */
  failOn(match: CallMatch, error: InjectedError): Disposer
  /** Holds matching calls (they neither run nor settle) until `release()`. */
  hangOn(match: CallMatch): HangHandle
  /** Adds `ms` of latency, on the host's clock, before matching calls (all calls without `match`). */
  delay(ms: number, match?: CallMatch): Disposer
  /** Marks the mount at `path` busy (open files on it): a non-lazy unmount fails with EBUSY until disposed. */
  markBusy(path: string): Disposer
}

/** True when `call` is one `match` selects. */
export function matchesCall(match: CallMatch, call: HostCall): boolean {
  if (typeof match === 'function') return match(call)
  if (match.method !== undefined && match.method !== call.method) return false
  if (match.path === undefined) return true
  if (call.path === undefined) return false
  return typeof match.path === 'string' ? joinPath(match.path) === joinPath(call.path) : match.path.test(call.path)
}

function injected(error: InjectedError, call: HostCall): Error {
  if (typeof error === 'function') return error(call)
  if (typeof error === 'string') return new HostError(error, call.method, call.path ?? '', 'injected fault')
  return error
}

/** The interceptor chain behind a host, and the {@link Faults} built on it. */
export class FaultInjector implements Faults {
  #interceptors: Interceptor[] = []
  readonly #clock: Clock
  readonly #busy: string[]

  constructor(clock: Clock, busy: string[]) {
    this.#clock = clock
    this.#busy = busy
  }

  /** True when an interceptor is set: calls go through {@link dispatch}'s chain. */
  get intercepting(): boolean {
    return this.#interceptors.length > 0
  }

  /**
   * Runs the call of `method` (about `path`) through the interceptors, then `real`. The call's
   * description is built only when an interceptor is there to see it.
   */
  dispatch(method: string, args: readonly unknown[], path: string | undefined, real: () => unknown): Promise<unknown> {
    const chain = this.#interceptors
    // No faults set (the usual case): the call itself, with its throw turned into a rejection.
    if (chain.length === 0) {
      try {
        return Promise.resolve(real())
      } catch (err) {
        return Promise.reject(err)
      }
    }
    const call: HostCall = path === undefined ? { method, args } : { method, args, path }
    const step = async (index: number): Promise<unknown> => {
      const interceptor = chain[index]
      return interceptor ? interceptor(call, () => step(index - 1)) : real()
    }
    return step(chain.length - 1)
  }

  intercept(interceptor: Interceptor): Disposer {
    this.#interceptors = [...this.#interceptors, interceptor]
    return () => {
      this.#interceptors = this.#interceptors.filter((i) => i !== interceptor)
    }
  }

  failOn(match: CallMatch, error: InjectedError): Disposer {
    return this.intercept((call, next) => {
      if (!matchesCall(match, call)) return next()
      throw injected(error, call)
    })
  }

  hangOn(match: CallMatch): HangHandle {
    const held: HostCall[] = []
    const waiters: ((call: HostCall) => void)[] = []
    let releaseAll!: () => void
    const released = new Promise<void>((resolve) => {
      releaseAll = resolve
    })
    const dispose = this.intercept(async (call, next) => {
      if (!matchesCall(match, call)) return next()
      held.push(call)
      for (const waiter of waiters.splice(0)) waiter(call)
      await released
      held.splice(held.indexOf(call), 1)
      return next()
    })
    return {
      held,
      reached: () => (held[0] ? Promise.resolve(held[0]) : new Promise((resolve) => waiters.push(resolve))),
      release: () => {
        dispose()
        releaseAll()
      },
    }
  }

  delay(ms: number, match?: CallMatch): Disposer {
    return this.intercept(async (call, next) => {
      if (!match || matchesCall(match, call)) await this.#clock.sleep(ms)
      return next()
    })
  }

  markBusy(path: string): Disposer {
    const key = joinPath(path)
    this.#busy.push(key)
    let disposed = false
    return () => {
      if (disposed) return
      disposed = true
      this.#busy.splice(this.#busy.indexOf(key), 1)
    }
  }
}
