/**
 * A Host that reads through to another and refuses every call that would change it: what `plan`,
 * `reconstruct` and `gc --dry-run` run on, so that a bug in them cannot touch the machine.
 */
import type { Host } from '@kubevol/core'

/** The Host members (and capability members) that change the machine. */
export const MUTATING_HOST_METHODS: readonly string[] = [
  'mkdir',
  'writeFile',
  'rename',
  'symlink',
  'remove',
  'removeAll',
  'chmod',
  'lchown',
  'mount',
  'unmount',
  'appendFile',
  'syncFile',
  'truncate',
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
    get(obj, key, receiver) {
      const value = Reflect.get(obj, key, receiver)
      if (typeof key !== 'string') return value
      const name = `${prefix}${key}`
      if (typeof value === 'function') {
        if (MUTATING_HOST_METHODS.includes(name)) {
          return (...args: unknown[]) => {
            const err = new ReadOnlyHostError(name, args)
            refused.push(err)
            return Promise.reject(err)
          }
        }
        return value.bind(obj)
      }
      if (prefix === '' && value && typeof value === 'object' && ['loopDevices', 'blockDevices', 'filesystems', 'subPaths', 'selinux'].includes(key)) {
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
