/**
 * A Host that reads through to another and refuses every call that would change it: what `plan`,
 * `reconstruct` and `gc --dry-run` run on, so that a bug in them cannot touch the machine.
 */
import type { Host } from '@kubevol/core'

/**
 * The Host members (and capability members) that only read: the ones a read-only host lets through.
 * Every other member is refused, including one this list has not heard of (a capability added to
 * the Host port later), so a new way to change the machine is refused until it is named here as a
 * read, never let through until it is named as a write.
 */
export const READING_HOST_METHODS: readonly string[] = [
  'lstat',
  'stat',
  'readdir',
  'readFile',
  'readlink',
  'mounts',
  'isMountPoint',
  'mountReferences',
  'holders',
  'statfs',
  'loopDevices.find',
  'loopDevices.status',
  'blockDevices.size',
  'blockDevices.isOpen',
  'filesystems.detect',
  'filesystems.size',
  'filesystems.needResize',
  'selinux.enabled',
]

/**
 * The Host members that change the machine, as the port has them now: each is refused (the tests
 * check every one). Not what decides: a member is refused unless {@link READING_HOST_METHODS} names it.
 */
export const MUTATING_HOST_METHODS: readonly string[] = [
  'mkdir',
  'writeFile',
  'rename',
  'symlink',
  'remove',
  'removeAll',
  'removeUnmounted',
  'fileSteps',
  'chmod',
  'lchown',
  'mount',
  'unmount',
  'appendFile',
  'writeFileAt',
  'syncFile',
  'truncate',
  // It makes the lock's directory and file.
  'lockRoot',
  'loopDevices.attach',
  'loopDevices.detach',
  'loopDevices.refreshCapacity',
  // fsck may repair, so it counts as a change.
  'filesystems.format',
  'filesystems.check',
  'filesystems.resize',
  'subPaths.bind',
]

/** What a refused call rejects with. */
export class ReadOnlyHostError extends Error {
  readonly method: string
  readonly args: readonly unknown[]
  constructor(method: string, args: readonly unknown[]) {
    const about = typeof args[0] === 'string' ? args[0] : ((args[0] as { target?: string } | undefined)?.target ?? '')
    super(`refused ${method} ${about}: the host is read-only here`)
    this.name = 'ReadOnlyHostError'
    this.method = method
    this.args = args
  }
}

/** A read-only host and the calls it refused, in order. */
export interface ReadOnlyHost {
  readonly host: Host
  readonly refused: readonly ReadOnlyHostError[]
}

function wrap<T extends object>(target: T, prefix: string, refused: ReadOnlyHostError[]): T {
  return new Proxy(target, {
    get(obj, key) {
      // Read on the host itself, not through the proxy: a getter may use private fields.
      const value = Reflect.get(obj, key)
      if (typeof key !== 'string') return value
      // Absent here: holding the root may make its directory, and a read-only look changes nothing
      // that the root rule would guard.
      if (prefix === '' && key === 'openRoot') return undefined
      const name = `${prefix}${key}`
      if (typeof value === 'function') {
        if (!READING_HOST_METHODS.includes(name)) {
          return (...args: unknown[]) => {
            const err = new ReadOnlyHostError(name, args)
            refused.push(err)
            return Promise.reject(err)
          }
        }
        return value.bind(obj)
      }
      // Every capability object is wrapped, a new one too: its members are refused unless named.
      if (prefix === '' && value && typeof value === 'object') {
        return wrap(value as object, `${key}.`, refused)
      }
      return value
    },
  })
}

/** Wraps `host` so that every mutating call rejects with {@link ReadOnlyHostError} (and is recorded). */
export function createReadOnlyHost(host: Host): ReadOnlyHost {
  const refused: ReadOnlyHostError[] = []
  return { host: wrap(host, '', refused), refused }
}
