/** One harness per scenario: the manager on the in-memory host, sharing the fake clock. */
import { createMemoryHost } from '@kubevol/adapter-mock'
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
