/**
 * A reference CSI node driver served over gRPC on a unix socket (Identity and Node services).
 *
 * File system volumes (the `mount` access type) are directories `<dataDir>/<volume id>`: NodeStage
 * bind-mounts the directory onto the staging path (which the CO creates), NodePublish bind-mounts
 * the staging path into the target (creating it). Inline ephemeral volumes
 * (`csi.storage.k8s.io/ephemeral: "true"`) get a tmpfs.
 *
 * Raw block volumes (the `block` access type) are sparse image files `<dataDir>/<volume id>.img` on
 * loop devices: NodeStage creates the image (`volume_context.size` bytes, else `blockSizeBytes`) and
 * attaches it; NodePublish binds the loop device node onto the target file (creating the file);
 * NodeUnpublish unbinds and removes it; NodeUnstage detaches the loop device. The image and its data
 * stay, so the volume survives a restart of the driver or of the CO.
 *
 * It behaves like csi-driver-host-path and democratic-csi: idempotent calls, FAILED_PRECONDITION
 * when publishing an unstaged volume, NOT_FOUND for the stats of an unpublished volume. Every call
 * goes through a kubevol Host (the Linux host when run for real).
 */
import { existsSync, unlinkSync } from 'node:fs'
import * as grpc from '@grpc/grpc-js'
import { csiProto, socketPath, unixAddress } from '@kubevol/adapter-linux'
import type { Host } from '@kubevol/core'
import type { CsiNodeCapability } from '@kubevol/core/plugins'

export interface HostpathCsiDriverOptions {
  readonly host: Host
  /** The socket to listen on (a stale socket file is replaced). */
  readonly endpoint: string
  /** Where volume directories and block images live. */
  readonly dataDir: string
  /** @default 'hostpath.csi.kubevol.io' */
  readonly name?: string
  /** @default 'node-1' */
  readonly nodeId?: string
  /** NodeGetInfo `max_volumes_per_node` (0: no limit). @default 0 */
  readonly maxVolumesPerNode?: number
  /** NodeGetInfo `accessible_topology` segments. @default none */
  readonly topology?: Readonly<Record<string, string>>
  /** @default ['STAGE_UNSTAGE_VOLUME', 'GET_VOLUME_STATS', 'EXPAND_VOLUME', 'VOLUME_CONDITION'] */
  readonly capabilities?: readonly CsiNodeCapability[]
  /** The size of a new block volume image when the volume context has no `size`, bytes. @default 64 MiB */
  readonly blockSizeBytes?: number
  /**
   * The `volume_condition` NodeGetVolumeStats reports for a volume; undefined leaves it out of the
   * answer. @default healthy: `{ abnormal: false, message: 'volume is healthy' }`
   */
  readonly volumeCondition?: (volumeId: string) => { readonly abnormal: boolean; readonly message: string } | undefined
  /**
   * Runs before each call with the method name ('NodeStageVolume', ...) and the request: throw
   * `{ code, details }` to fail it, or wait to delay it.
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

/** The request fields the driver reads (camelCase, as proto-loader decodes them; unset messages are null). */
interface Request {
  readonly volumeId?: string
  readonly stagingTargetPath?: string
  readonly targetPath?: string
  readonly volumePath?: string
  readonly readonly?: boolean
  readonly volumeCapability?: { readonly block?: object | null; readonly mount?: object | null } | null
  readonly volumeContext?: Readonly<Record<string, string>>
  readonly capacityRange?: { readonly requiredBytes?: number } | null
}

type PathField = 'volumeId' | 'stagingTargetPath' | 'targetPath' | 'volumePath'

const DEFAULT_BLOCK_SIZE = 64 * 1024 * 1024

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
  const isBlock = (r: Request): boolean => !!r.volumeCapability?.block
  const checkId = (id: string): string => {
    if (id.includes('/') || id === '.' || id === '..') throw new Status(grpc.status.INVALID_ARGUMENT, `invalid volume id "${id}"`)
    return id
  }
  const volumeDir = (id: string): string => `${options.dataDir}/${checkId(id)}`
  const imageOf = (id: string): string => `${options.dataDir}/${checkId(id)}.img`
  const conditionOf = (volumeId: string): object => {
    const condition = options.volumeCondition ? options.volumeCondition(volumeId) : { abnormal: false, message: 'volume is healthy' }
    return condition ? { volumeCondition: { abnormal: condition.abnormal, message: condition.message } } : {}
  }
  const mounted = async (path: string): Promise<boolean> => (await host.lstat(path)) !== null && (await host.isMountPoint(path))
  const unmountAll = async (path: string): Promise<void> => {
    while (await mounted(path)) await host.unmount(path)
  }

  const loops = () => {
    const { loopDevices } = host
    if (!loopDevices || !host.truncate) throw new Status(grpc.status.FAILED_PRECONDITION, 'block volumes need a host with loop devices')
    return loopDevices
  }
  /** The loop device serving the volume's image, or undefined when none does (or there is no image). */
  const attachedDevice = async (id: string): Promise<string | undefined> => {
    const image = imageOf(id)
    if (!host.loopDevices || !(await host.lstat(image))) return undefined
    const [device] = await host.loopDevices.find(image)
    return device
  }
  /** Creates the volume's sparse image when absent and attaches it (reusing an attached device). */
  const attachImage = async (r: Request, id: string): Promise<string> => {
    const loopDevices = loops()
    const image = imageOf(id)
    if (!(await host.lstat(image))) {
      const size = Number(r.volumeContext?.size ?? options.blockSizeBytes ?? DEFAULT_BLOCK_SIZE)
      if (!Number.isSafeInteger(size) || size <= 0) throw new Status(grpc.status.INVALID_ARGUMENT, `invalid size "${r.volumeContext?.size}"`)
      await host.mkdir(options.dataDir, { recursive: true, mode: 0o750 })
      await host.writeFile(`${image}.tmp`, '', { mode: 0o600 })
      await host.truncate?.(`${image}.tmp`, size)
      // Renamed into place only once it has its size: a crash leaves no short image behind.
      await host.rename(`${image}.tmp`, image)
    }
    return loopDevices.attach(image)
  }

  const node: Record<string, (r: Request) => Promise<object>> = {
    NodeGetInfo: async () => ({
      nodeId: options.nodeId ?? 'node-1',
      maxVolumesPerNode: options.maxVolumesPerNode ?? 0,
      ...(options.topology ? { accessibleTopology: { segments: { ...options.topology } } } : {}),
    }),
    NodeGetCapabilities: async () => ({ capabilities: capabilities.map((type) => ({ rpc: { type } })) }),
    async NodeStageVolume(r) {
      const volumeId = need(r, 'volumeId')
      const staging = need(r, 'stagingTargetPath')
      needCapability(r)
      if (!stages) throw new Status(grpc.status.UNIMPLEMENTED, 'NodeStageVolume is not supported')
      if (!(await host.lstat(staging))) throw new Status(grpc.status.NOT_FOUND, `staging path ${staging} does not exist`)
      if (isBlock(r)) {
        await attachImage(r, volumeId)
        return {}
      }
      if (await mounted(staging)) return {}
      const dir = volumeDir(volumeId)
      await host.mkdir(dir, { recursive: true, mode: 0o777 })
      await host.mount({ source: dir, target: staging, bind: true })
      return {}
    },
    async NodeUnstageVolume(r) {
      const volumeId = need(r, 'volumeId')
      const staging = need(r, 'stagingTargetPath')
      await unmountAll(staging)
      // A block volume: release its loop device (the image stays).
      for (let device = await attachedDevice(volumeId); device; device = await attachedDevice(volumeId)) await loops().detach(device)
      return {}
    },
    async NodePublishVolume(r) {
      const volumeId = need(r, 'volumeId')
      const target = need(r, 'targetPath')
      needCapability(r)
      const ephemeral = r.volumeContext?.['csi.storage.k8s.io/ephemeral'] === 'true'
      const bind = stages && !ephemeral
      const staging = bind ? need(r, 'stagingTargetPath') : ''
      const readOnly = r.readonly === true
      if (isBlock(r)) {
        const device = stages ? await attachedDevice(volumeId) : await attachImage(r, volumeId)
        if (!device) throw new Status(grpc.status.FAILED_PRECONDITION, 'volume must be staged before publishing')
        // The target is a file the device node is bound onto.
        if (!(await host.lstat(target))) {
          await host.mkdir(target.slice(0, target.lastIndexOf('/')) || '/', { recursive: true, mode: 0o750 })
          await host.writeFile(target, '', { mode: 0o660 })
        }
        if (!(await mounted(target))) await host.mount({ source: device, target, bind: true, readOnly })
        return {}
      }
      if (bind && !(await mounted(staging))) throw new Status(grpc.status.FAILED_PRECONDITION, 'volume must be staged before publishing')
      await host.mkdir(target, { recursive: true, mode: 0o750 })
      if (await mounted(target)) return {}
      if (ephemeral) await host.mount({ source: 'tmpfs', target, fstype: 'tmpfs', readOnly, options: ['size=16m'] })
      else {
        const source = bind ? staging : volumeDir(volumeId)
        if (!bind) await host.mkdir(source, { recursive: true, mode: 0o777 })
        await host.mount({ source, target, bind: true, readOnly })
      }
      return {}
    },
    async NodeUnpublishVolume(r) {
      const volumeId = need(r, 'volumeId')
      const target = need(r, 'targetPath')
      await unmountAll(target)
      if (await host.lstat(target)) await host.remove(target)
      // Without staging, publish attached the image: the last unpublish releases it.
      if (!stages) for (let device = await attachedDevice(volumeId); device; device = await attachedDevice(volumeId)) await loops().detach(device)
      return {}
    },
    async NodeGetVolumeStats(r) {
      const volumeId = need(r, 'volumeId')
      const path = need(r, 'volumePath')
      if (!(await mounted(path))) throw new Status(grpc.status.NOT_FOUND, `volume ${volumeId} is not published at ${path}`)
      const info = await host.lstat(path)
      if (info?.type !== 'directory') {
        // A raw block volume: only its size means anything.
        const image = await host.stat(imageOf(volumeId))
        return { usage: [{ unit: 'BYTES', total: image?.size ?? 0 }], ...conditionOf(volumeId) }
      }
      if (!host.statfs) throw new Status(grpc.status.UNIMPLEMENTED, 'the host cannot statfs')
      const s = await host.statfs(path)
      return {
        usage: [
          { unit: 'BYTES', total: s.capacityBytes, available: s.availableBytes, used: s.usedBytes },
          { unit: 'INODES', total: s.inodes, available: s.inodesFree, used: s.inodesUsed },
        ],
        ...conditionOf(volumeId),
      }
    },
    async NodeExpandVolume(r) {
      const volumeId = need(r, 'volumeId')
      need(r, 'volumePath')
      const required = Number(r.capacityRange?.requiredBytes ?? 0)
      const image = await host.stat(imageOf(volumeId))
      if (image) {
        // A block volume: grow the image, then tell the loop device.
        if (image.size < required) await host.truncate?.(imageOf(volumeId), required)
        const device = await attachedDevice(volumeId)
        if (device) await loops().refreshCapacity(device)
        return { capacityBytes: Math.max(required, image.size) }
      }
      if (!(await host.lstat(volumeDir(volumeId)))) throw new Status(grpc.status.NOT_FOUND, `volume ${volumeId} does not exist`)
      // A directory has no file system of its own to grow: the new size is the one asked for.
      return { capacityBytes: required }
    },
  }

  const handler =
    (method: string, work: (r: Request) => Promise<object>): grpc.handleUnaryCall<Request, object> =>
    (call, callback) => {
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
