/** One harness per scenario: the manager on the in-memory host, sharing the fake clock. */
import { type HostCall, createMemoryHost } from '@kubevol/adapter-mock'
import { type Harness, type HarnessOptions, createFakeClock, createHarness } from '@kubevol/core/testing'

export function scenario(options: Omit<HarnessOptions, 'host'> = {}): Harness & { host: ReturnType<typeof createMemoryHost> } {
  const clock = options.clock ?? createFakeClock()
  const host = createMemoryHost({ clock })
  const harness = createHarness({ ...options, host, clock })
  return Object.assign(harness, { host })
}

/** Mount targets under the pods directory and the plugins directory, without the root prefix. */
export function podMounts(host: ReturnType<typeof createMemoryHost>): string[] {
  return host.mountTargets().map((t) => t.replace('/var/lib/kubevol/', ''))
}

/**
 * Watches `host`'s calls, telling `see` whether each is one its caller made or one the memory host
 * made inside a removeUnmounted (with an interceptor set it makes that call's checks, unmount and
 * removes as calls of their own, so that each is a crash point).
 */
export function watchCalls(host: ReturnType<typeof createMemoryHost>, see: (call: HostCall, outer: boolean) => void): void {
  let inside = 0
  host.intercept(async (call, next) => {
    see(call, inside === 0)
    if (call.method !== 'removeUnmounted') return next()
    inside++
    try {
      return await next()
    } finally {
      inside--
    }
  })
}
