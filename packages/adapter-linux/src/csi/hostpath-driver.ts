/**
 * A reference CSI node driver, hostpath-style, served over gRPC on a unix socket: each volume is a
 * directory `<dataDir>/<volume id>`. NodeStage bind-mounts it onto the staging path (which the CO
 * creates); NodePublish bind-mounts the staging path into the target (creating it); inline
 * ephemeral volumes (`csi.storage.k8s.io/ephemeral: "true"`) get a tmpfs. It behaves like
 * csi-driver-host-path and democratic-csi (KUBE-API.md): idempotent calls, FAILED_PRECONDITION
 * when publishing an unstaged volume, NOT_FOUND for stats of an unpublished volume. Mounts go
 * through a kubevol Host (the Linux host in tests and examples).
 */
import { existsSync, unlinkSync } from 'node:fs'
import * as grpc from '@grpc/grpc-js'
import type { CsiNodeCapability, Host } from '@kubevol/core'
import { csiProto, socketPath, unixAddress } from './proto.js'

export interface HostpathCsiDriverOptions {
  readonly host: Host
  /** The socket to listen on (a stale socket file is replaced). */
  readonly endpoint: string
  /** Where volume directories live. */
  readonly dataDir: string
  /** @default 'hostpath.csi.kubevol.io' */
  readonly name?: string
  /** @default 'node-1' */
  readonly nodeId?: string
  /** @default ['STAGE_UNSTAGE_VOLUME', 'GET_VOLUME_STATS', 'EXPAND_VOLUME', 'VOLUME_CONDITION'] */
  readonly capabilities?: readonly CsiNodeCapability[]
  /**
   * Runs before each Node call with the method name ('NodeStageVolume', ...) and the request:
   * throw `{ code, details }` to fail it, or wait to delay it.
   */
  readonly intercept?: (method: string, request: Record<string, unknown>) => Promise<void> | void
}

export interface HostpathCsiDriverServer {
  readonly name: string
  readonly address: string
  /** Stops serving; in-flight calls are cancelled. */
  stop(): Promise<void>
}

/** A gRPC status failure, as a handler reports it. */
class Status extends Error {
  constructor(
    readonly code: grpc.status,
    readonly details: string,
  ) {
    super(details)
  }
}

/** The request fields the driver reads (camelCase, as proto-loader decodes them). */
interface Request {
  readonly volumeId?: string
  readonly stagingTargetPath?: string
  readonly targetPath?: string
  readonly volumePath?: string
  readonly readonly?: boolean
  readonly volumeCapability?: unknown
  readonly volumeContext?: Readonly<Record<string, string>>
  readonly capacityRange?: { readonly requiredBytes?: number }
}

type PathField = 'volumeId' | 'stagingTargetPath' | 'targetPath' | 'volumePath'

/** Starts the driver; resolves once it listens. */
export async function startHostpathCsiDriver(options: HostpathCsiDriverOptions): Promise<HostpathCsiDriverServer> {
  const { host } = options
  const name = options.name ?? 'hostpath.csi.kubevol.io'
  const capabilities = options.capabilities ?? ['STAGE_UNSTAGE_VOLUME', 'GET_VOLUME_STATS', 'EXPAND_VOLUME', 'VOLUME_CONDITION']
  const stages = capabilities.includes('STAGE_UNSTAGE_VOLUME')
  const proto = csiProto()
  const server = new grpc.Server()

  /** The field's value; INVALID_ARGUMENT when it is empty. */
  const need = (r: Request, field: PathField): string => {
    const value = r[field]
    if (!value) throw new Status(grpc.status.INVALID_ARGUMENT, `${field} missing in request`)
    return value
  }
  const needCapability = (r: Request): void => {
    if (!r.volumeCapability) throw new Status(grpc.status.INVALID_ARGUMENT, 'volumeCapability missing in request')
  }
  const volumeDir = (id: string): string => {
    if (id.includes('/') || id === '.' || id === '..') throw new Status(grpc.status.INVALID_ARGUMENT, `invalid volume id "${id}"`)
    return `${options.dataDir}/${id}`
  }
  const mounted = async (path: string): Promise<boolean> => (await host.lstat(path)) !== null && (await host.isMountPoint(path))

  const node: Record<string, (r: Request) => Promise<object>> = {
    NodeGetInfo: async () => ({ nodeId: options.nodeId ?? 'node-1', maxVolumesPerNode: 0 }),
    NodeGetCapabilities: async () => ({ capabilities: capabilities.map((type) => ({ rpc: { type } })) }),
    async NodeStageVolume(r) {
      const volumeId = need(r, 'volumeId')
      const staging = need(r, 'stagingTargetPath')
      needCapability(r)
      if (!stages) throw new Status(grpc.status.UNIMPLEMENTED, 'NodeStageVolume is not supported')
      if (!(await host.lstat(staging))) throw new Status(grpc.status.NOT_FOUND, `staging path ${staging} does not exist`)
      if (await mounted(staging)) return {}
      const dir = volumeDir(volumeId)
      await host.mkdir(dir, { recursive: true, mode: 0o777 })
      await host.mount({ source: dir, target: staging, bind: true })
      return {}
    },
    async NodeUnstageVolume(r) {
      need(r, 'volumeId')
      const staging = need(r, 'stagingTargetPath')
      while (await mounted(staging)) await host.unmount(staging)
      return {}
    },
    async NodePublishVolume(r) {
      const volumeId = need(r, 'volumeId')
      const target = need(r, 'targetPath')
      needCapability(r)
      const ephemeral = r.volumeContext?.['csi.storage.k8s.io/ephemeral'] === 'true'
      const bind = stages && !ephemeral
      const staging = bind ? need(r, 'stagingTargetPath') : ''
      if (bind && !(await mounted(staging))) throw new Status(grpc.status.FAILED_PRECONDITION, 'volume must be staged before publishing')
      await host.mkdir(target, { recursive: true, mode: 0o750 })
      if (await mounted(target)) return {}
      const readOnly = r.readonly === true
      if (ephemeral) await host.mount({ source: 'tmpfs', target, fstype: 'tmpfs', readOnly, options: ['size=16m'] })
      else {
        const source = bind ? staging : volumeDir(volumeId)
        if (!bind) await host.mkdir(source, { recursive: true, mode: 0o777 })
        await host.mount({ source, target, bind: true, readOnly })
      }
      return {}
    },
    async NodeUnpublishVolume(r) {
      need(r, 'volumeId')
      const target = need(r, 'targetPath')
      while (await mounted(target)) await host.unmount(target)
      if (await host.lstat(target)) await host.remove(target)
      return {}
    },
    async NodeGetVolumeStats(r) {
      const volumeId = need(r, 'volumeId')
      const path = need(r, 'volumePath')
      if (!(await mounted(path))) throw new Status(grpc.status.NOT_FOUND, `volume ${volumeId} is not published at ${path}`)
      if (!host.statfs) throw new Status(grpc.status.UNIMPLEMENTED, 'the host cannot statfs')
      const s = await host.statfs(path)
      return {
        usage: [
          { unit: 'BYTES', total: s.capacityBytes, available: s.availableBytes, used: s.usedBytes },
          { unit: 'INODES', total: s.inodes, available: s.inodesFree, used: s.inodesUsed },
        ],
        volumeCondition: { abnormal: false, message: 'volume is healthy' },
      }
    },
    async NodeExpandVolume(r) {
      const volumeId = need(r, 'volumeId')
      need(r, 'volumePath')
      if (!(await host.lstat(volumeDir(volumeId)))) throw new Status(grpc.status.NOT_FOUND, `volume ${volumeId} does not exist`)
      // A directory has no file system of its own to grow: the new size is the one asked for.
      return { capacityBytes: Number(r.capacityRange?.requiredBytes ?? 0) }
    },
  }

  const handler = (method: string, work: (r: Request) => Promise<object>): grpc.handleUnaryCall<Request, object> => (call, callback) => {
    void (async () => {
      await options.intercept?.(method, call.request as Record<string, unknown>)
      return work(call.request)
    })().then(
      (response) => callback(null, response),
      (err: unknown) => {
        const e = err as { code?: number; details?: string; message?: string }
        callback({ code: typeof e.code === 'number' ? e.code : grpc.status.INTERNAL, details: e.details ?? e.message ?? String(err) } as grpc.ServiceError)
      },
    )
  }
  const implementation = (methods: Record<string, (r: Request) => Promise<object>>): grpc.UntypedServiceImplementation =>
    Object.fromEntries(Object.entries(methods).map(([method, work]) => [method, handler(method, work)]))

  server.addService(proto.Identity.service, {
    GetPluginInfo: handler('GetPluginInfo', async () => ({ name, vendorVersion: '0.1.0' })),
    GetPluginCapabilities: handler('GetPluginCapabilities', async () => ({ capabilities: [] })),
    Probe: handler('Probe', async () => ({ ready: { value: true } })),
  })
  server.addService(proto.Node.service, implementation(node))

  const path = socketPath(options.endpoint)
  if (existsSync(path)) unlinkSync(path)
  const address = unixAddress(options.endpoint)
  await new Promise<void>((resolve, reject) => {
    server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve()))
  })
  return {
    name,
    address,
    stop: () =>
      new Promise<void>((resolve) => {
        server.forceShutdown()
        resolve()
      }),
  }
}
