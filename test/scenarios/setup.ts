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

/**
 * `path` with every symlink in it resolved, as a container's kernel follows the links of an
 * AtomicWriter volume (`<key> -> ..data/<key>`, `..data -> ..<version>`): read with lstat and
 * readlink, since the host, its root locked, follows no symlink beneath the root itself.
 */
export async function realPath(host: Pick<ReturnType<typeof createMemoryHost>, 'lstat' | 'readlink'>, path: string): Promise<string> {
  const pending = path.split('/').filter((part) => part !== '' && part !== '.')
  const done: string[] = []
  for (let links = 0; pending.length > 0; ) {
    const part = pending.shift() as string
    if (part === '..') {
      done.pop()
      continue
    }
    const current = `/${[...done, part].join('/')}`
    if ((await host.lstat(current))?.type !== 'symlink') {
      done.push(part)
      continue
    }
    if (++links > 40) throw new Error(`too many symlinks in ${path}`)
    const target = await host.readlink(current)
    if (target.startsWith('/')) done.length = 0
    pending.unshift(...target.split('/').filter((p) => p !== '' && p !== '.'))
  }
  return `/${done.join('/')}`
}
