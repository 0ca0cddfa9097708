/**
 * Driver registration compatible with the kubelet's plugin-registration protocol: a plugin (the
 * node-driver-registrar sidecar of a CSI driver) places a socket in `<root>/plugins_registry/` and
 * serves Registration on it; kubevol calls GetInfo, checks the type and versions, connects to the
 * driver's endpoint and calls NodeGetInfo, registers it, then calls NotifyRegistrationStatus with
 * the outcome. Removing the socket unregisters the driver.
 */
import { type FSWatcher, lstatSync, mkdirSync, readdirSync, watch } from 'node:fs'
import { join } from 'node:path'
import type * as grpc from '@grpc/grpc-js'
import type { Host, Logger } from '@kubevol/core'
import type { CsiDriverRegistry } from '@kubevol/core/plugins'
import { type GrpcCsiDriver, createGrpcCsiDriver } from './grpc-csi-driver.js'
import { grpc as loadGrpc } from './grpc-module.js'
import { registrationProto, unixAddress } from './proto.js'

/** The plugin type CSI drivers register with. */
export const CSI_PLUGIN_TYPE = 'CSIPlugin'

export interface PluginWatcherOptions {
  /** The agent's root directory (`/var/lib/kubevol`; `/var/lib/kubelet` for drivers that hard-code it). */
  readonly rootDir: string
  /** The directory to watch (the agent's `pluginRegistrationDir`). @default `<rootDir>/plugins_registry` */
  readonly dir?: string
  readonly registry: CsiDriverRegistry
  readonly logger?: Logger
  /** Deadline of each registration call. @default 10_000 */
  readonly timeoutMs?: number
  /** A rescan this often catches what the directory watch missed. @default 10_000 */
  readonly rescanIntervalMs?: number
  /**
   * The host whose calls make and read the directory: the agent's, whose root resolves every path
   * beneath it without following a symlink, so a `plugins_registry` swapped for a link to another
   * directory is refused rather than scanned. @default node:fs (the path as the kernel resolves it)
   */
  readonly host?: Pick<Host, 'mkdir' | 'readdir' | 'lstat'>
}

export interface PluginWatcher {
  /** The watched directory: `dir`, else `<root>/plugins_registry`. */
  readonly dir: string
  /** Looks at the directory again (the watch calls it on every change). Resolves when done. */
  rescan(): Promise<void>
  stop(): void
}

interface PluginInfo {
  type: string
  name: string
  endpoint: string
  supportedVersions: string[]
}

type Unary = (request: object, options: grpc.CallOptions, callback: (err: grpc.ServiceError | null, response?: unknown) => void) => void

function callUnary<T>(client: grpc.Client, method: string, request: object, timeoutMs: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const fn = (client as unknown as Record<string, Unary>)[method] as Unary
    fn.call(client, request, { deadline: Date.now() + timeoutMs }, (err, response) => (err ? reject(err) : resolve(response as T)))
  })
}

/** A CSI version kubevol speaks: any 1.x (the kubelet accepts ≥ 1.0.0). */
function supportsV1(versions: readonly string[]): boolean {
  return versions.some((v) => /^v?1(\.|$)/.test(v))
}

/**
 * The driver a registration socket announced, once it is a CSI plugin with a name and a 1.x version
 * and answers NodeGetInfo; throws the reason the registration fails otherwise.
 */
async function connectDriver(info: PluginInfo, socket: string, timeoutMs: number): Promise<{ driver: GrpcCsiDriver; endpoint: string }> {
  if (info.type !== CSI_PLUGIN_TYPE) throw new Error(`plugin type "${info.type}" is not supported`)
  if (!info.name) throw new Error('plugin name is empty')
  if (!supportsV1(info.supportedVersions)) throw new Error(`none of the versions [${info.supportedVersions.join(', ')}] is supported (need 1.x)`)
  const endpoint = info.endpoint || socket
  const driver = createGrpcCsiDriver({ endpoint })
  try {
    await driver.nodeGetInfo({ timeoutMs })
  } catch (err) {
    driver.close?.()
    throw new Error(`NodeGetInfo of driver ${info.name} failed: ${(err as Error).message}`)
  }
  return { driver, endpoint }
}

/** The sockets in `dir` (what cannot be looked at is left out; a symlink is not followed). */
async function socketsIn(host: Pick<Host, 'readdir' | 'lstat'>, dir: string): Promise<Set<string>> {
  const present = new Set<string>()
  const names = await host.readdir(dir)
  const infos = await Promise.all(names.map((name) => host.lstat(join(dir, name)).catch(() => null)))
  for (const [i, name] of names.entries()) if (infos[i]?.type === 'socket') present.add(join(dir, name))
  return present
}

/** node:fs as the three calls the watcher makes, for a caller that gives no host. */
const NODE_FS: Pick<Host, 'mkdir' | 'readdir' | 'lstat'> = {
  async mkdir(path, options) {
    mkdirSync(path, { recursive: options?.recursive === true, mode: options?.mode ?? 0o777 })
  },
  async readdir(path) {
    return readdirSync(path).sort()
  },
  async lstat(path) {
    const info = lstatSync(path, { throwIfNoEntry: false })
    if (info === undefined) return null
    return { type: info.isSocket() ? 'socket' : info.isSymbolicLink() ? 'symlink' : info.isDirectory() ? 'directory' : 'file', mode: info.mode & 0o7777, uid: info.uid, gid: info.gid, size: info.size, dev: info.dev, ino: info.ino, mtimeMs: info.mtimeMs }
  },
}

/** Creates the directory (`dir`, else `<root>/plugins_registry`), registers the sockets already there, and watches for more. */
export async function startPluginWatcher(options: PluginWatcherOptions): Promise<PluginWatcher> {
  const dir = options.dir ?? join(options.rootDir, 'plugins_registry')
  const host = options.host ?? NODE_FS
  await host.mkdir(dir, { recursive: true, mode: 0o750 })
  const timeoutMs = options.timeoutMs ?? 10_000
  const bySocket = new Map<string, string>()
  const inFlight = new Set<string>()
  let stopped = false
  let scanning: Promise<void> = Promise.resolve()

  async function registerSocket(socket: string): Promise<void> {
    const Registration = registrationProto().Registration
    const client = new Registration(unixAddress(socket), loadGrpc().credentials.createInsecure())
    try {
      const info = await callUnary<PluginInfo>(client, 'getInfo', {}, timeoutMs)
      let error = ''
      try {
        const { driver, endpoint } = await connectDriver(info, socket, timeoutMs)
        options.registry.register({ name: info.name, driver, endpoint, versions: info.supportedVersions })
        bySocket.set(socket, info.name)
        options.logger?.info('Registered CSI driver', { driver: info.name, endpoint })
      } catch (err) {
        error = (err as Error).message
        options.logger?.error('CSI driver registration failed', { socket, err: error })
      }
      await callUnary(client, 'notifyRegistrationStatus', { pluginRegistered: error === '', error }, timeoutMs)
    } finally {
      client.close()
    }
  }

  async function scan(): Promise<void> {
    if (stopped) return
    const present = await socketsIn(host, dir).catch((err: unknown) => {
      options.logger?.warn('Cannot read the plugin registration directory', { dir, err: (err as Error).message })
      return new Set<string>(bySocket.keys())
    })
    for (const [socket, name] of bySocket) {
      if (present.has(socket)) continue
      bySocket.delete(socket)
      options.registry.unregister(name)
      options.logger?.info('Unregistered CSI driver: its registration socket is gone', { driver: name, socket })
    }
    const work: Promise<void>[] = []
    for (const socket of present) {
      if (bySocket.has(socket) || inFlight.has(socket)) continue
      inFlight.add(socket)
      work.push(
        registerSocket(socket)
          .catch((err: unknown) => options.logger?.warn('Registration socket did not answer', { socket, err: (err as Error).message }))
          .finally(() => inFlight.delete(socket)),
      )
    }
    await Promise.all(work)
  }

  const rescan = (): Promise<void> => {
    scanning = scanning.then(scan, scan)
    return scanning
  }
  let watcher: FSWatcher | undefined = watch(dir, () => void rescan())
  const interval = setInterval(() => void rescan(), options.rescanIntervalMs ?? 10_000)
  interval.unref()
  await rescan()
  return {
    dir,
    rescan,
    stop() {
      stopped = true
      clearInterval(interval)
      watcher?.close()
      watcher = undefined
    },
  }
}
