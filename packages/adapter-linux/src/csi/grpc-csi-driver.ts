/**
 * The CsiDriver port over gRPC on a unix socket (@grpc/grpc-js). Each call carries the deadline the
 * plugin gives it; gRPC failures become core's CsiError with the status code, so the plugin can
 * tell uncertain from final outcomes. A connection that cannot be made fails as Unavailable.
 *
 * One channel is kept while it works; a channel that failed to connect is replaced before the next
 * call, so a restarted driver is reached on the first call after it is back (the kubelet dials per
 * call for the same reason). A gRPC channel that failed to connect waits out a reconnect backoff
 * (1 s growing to 120 s) and fails every call meanwhile, even once the driver listens again.
 */
import type * as grpc from '@grpc/grpc-js'
import {
  type CsiAccessMode,
  type CsiCallOptions,
  type CsiDriver,
  CsiError,
  type CsiNodeCapability,
  type CsiVolumeCapability,
  type CsiVolumeStats,
} from '@kubevol/core/plugins'
import { grpc as loadGrpc } from './grpc-module.js'
import { csiProto, unixAddress } from './proto.js'

export interface GrpcCsiDriverOptions {
  /** The driver's socket: `/var/lib/kubelet/plugins/<driver>/csi.sock` or `unix:///...`. */
  readonly endpoint: string
}

/** A gRPC CSI driver, with its address. */
export interface GrpcCsiDriver extends CsiDriver {
  readonly address: string
}

type Unary = (request: object, metadata: grpc.Metadata, options: grpc.CallOptions, callback: (err: grpc.ServiceError | null, response?: unknown) => void) => void

/** core's CsiError from a gRPC failure; other errors pass through. */
function toCsiError(err: unknown): unknown {
  const e = err as Partial<grpc.ServiceError>
  if (typeof e?.code === 'number') return new CsiError(e.code, e.details ?? e.message ?? '', { cause: err })
  return err
}

/**
 * Connections of its own: grpc-js otherwise shares connections (subchannels), and their reconnect
 * backoff, between all channels to one address, so another client of the same socket still in its
 * backoff could hand it to a replacement channel.
 */
const CHANNEL_OPTIONS: grpc.ChannelOptions = { 'grpc.use_local_subchannel_pool': 1 }

/** The channel states in which a call cannot reach the driver before a reconnect backoff ends (grpc-js loaded on first use). */
let broken: ReadonlySet<grpc.connectivityState> | undefined
const isBroken = (state: grpc.connectivityState): boolean => {
  const { connectivityState } = loadGrpc()
  broken ??= new Set([connectivityState.TRANSIENT_FAILURE, connectivityState.SHUTDOWN])
  return broken.has(state)
}

/** One driver's connection: a unary call on the current channel, and closing it. */
interface GrpcConnection {
  unary<T>(service: 'identity' | 'node', method: string, request: object, o: CsiCallOptions): Promise<T>
  close(): void
}

/** The clients of both services on one channel, replaced before a call once the channel failed to connect. */
function createGrpcConnection(address: string): GrpcConnection {
  const proto = csiProto()
  const { Metadata, credentials: channelCredentials } = loadGrpc()
  const credentials = channelCredentials.createInsecure()
  const open = () => {
    const identity = new proto.Identity(address, credentials, CHANNEL_OPTIONS)
    // Both services over one connection.
    return { identity, node: new proto.Node(address, credentials, { channelOverride: identity.getChannel() }) }
  }
  let clients: ReturnType<typeof open> | undefined = open()
  /** The clients, on a new channel when the current one failed to connect (nothing is in flight on it then). */
  const current = (): ReturnType<typeof open> => {
    if (!clients) throw new Error(`the CSI client of ${address} is closed`)
    if (isBroken(clients.identity.getChannel().getConnectivityState(false))) {
      clients.identity.close()
      clients = open()
    }
    return clients
  }

  return {
    unary: <T>(service: 'identity' | 'node', method: string, request: object, o: CsiCallOptions): Promise<T> =>
      new Promise<T>((resolve, reject) => {
        let client: grpc.Client
        try {
          client = current()[service]
        } catch (err) {
          reject(err)
          return
        }
        const fn = (client as unknown as Record<string, Unary>)[method]
        if (!fn) {
          reject(new Error(`the CSI proto has no method ${method}`))
          return
        }
        fn.call(client, request, new Metadata(), { deadline: Date.now() + o.timeoutMs }, (err, response) => {
          if (err) reject(toCsiError(err))
          else resolve(response as T)
        })
      }),
    close() {
      // The node client shares the identity client's channel: closing that closes both.
      clients?.identity.close()
      clients = undefined
    },
  }
}

/**
 * Connects lazily: the first call opens the channel; a channel that failed to connect is replaced
 * by the next call; `close()` releases it, and calls after it fail.
 */
export function createGrpcCsiDriver(options: GrpcCsiDriverOptions): GrpcCsiDriver {
  const address = unixAddress(options.endpoint)
  const connection = createGrpcConnection(address)
  const unary = connection.unary

  return {
    address,
    async getPluginInfo(o) {
      const r = await unary<{ name: string; vendorVersion: string }>('identity', 'getPluginInfo', {}, o)
      return { name: r.name, vendorVersion: r.vendorVersion }
    },
    async nodeGetInfo(o) {
      const r = await unary<{ nodeId: string; maxVolumesPerNode: number; accessibleTopology?: { segments: Record<string, string> } | null }>(
        'node',
        'nodeGetInfo',
        {},
        o,
      )
      return { nodeId: r.nodeId, maxVolumesPerNode: Number(r.maxVolumesPerNode), ...(r.accessibleTopology ? { accessibleTopology: r.accessibleTopology.segments } : {}) }
    },
    async nodeGetCapabilities(o) {
      const r = await unary<{ capabilities: { rpc?: { type: string } | null }[] }>('node', 'nodeGetCapabilities', {}, o)
      return r.capabilities.map((c) => c.rpc?.type).filter((t): t is CsiNodeCapability => !!t && t !== 'UNKNOWN')
    },
    async nodeStageVolume(r, o) {
      await unary('node', 'nodeStageVolume', { ...r, volumeCapability: capability(r.volumeCapability) }, o)
    },
    async nodeUnstageVolume(r, o) {
      await unary('node', 'nodeUnstageVolume', r, o)
    },
    async nodePublishVolume(r, o) {
      await unary('node', 'nodePublishVolume', { ...r, volumeCapability: capability(r.volumeCapability) }, o)
    },
    async nodeUnpublishVolume(r, o) {
      await unary('node', 'nodeUnpublishVolume', r, o)
    },
    async nodeExpandVolume(r, o) {
      const res = await unary<{ capacityBytes: number }>(
        'node',
        'nodeExpandVolume',
        {
          volumeId: r.volumeId,
          volumePath: r.volumePath,
          capacityRange: { requiredBytes: r.requiredBytes, limitBytes: 0 },
          stagingTargetPath: r.stagingTargetPath,
          ...(r.volumeCapability ? { volumeCapability: capability(r.volumeCapability) } : {}),
          secrets: r.secrets,
        },
        o,
      )
      return Number(res.capacityBytes)
    },
    async nodeGetVolumeStats(r, o) {
      const res = await unary<{ usage: { available: number; total: number; used: number; unit: string }[]; volumeCondition?: { abnormal: boolean; message: string } | null }>(
        'node',
        'nodeGetVolumeStats',
        r,
        o,
      )
      return statsOf(res.usage, res.volumeCondition ?? undefined)
    },
    close: () => connection.close(),
  }
}

/** The wire form: exactly one access type (the `access_type` oneof), block or mount. */
function capability(c: CsiVolumeCapability): object {
  const accessMode = { mode: c.accessMode satisfies CsiAccessMode }
  if (c.block) return { block: {}, accessMode }
  return { mount: { fsType: c.mount.fsType, mountFlags: [...c.mount.mountFlags], volumeMountGroup: c.mount.volumeMountGroup ?? '' }, accessMode }
}

function statsOf(
  usage: readonly { available: number; total: number; used: number; unit: string }[],
  condition: { abnormal: boolean; message: string } | undefined,
): CsiVolumeStats {
  const bytes = usage.find((u) => u.unit === 'BYTES')
  const inodes = usage.find((u) => u.unit === 'INODES')
  return {
    capacityBytes: Number(bytes?.total ?? 0),
    availableBytes: Number(bytes?.available ?? 0),
    usedBytes: Number(bytes?.used ?? 0),
    inodes: Number(inodes?.total ?? 0),
    inodesFree: Number(inodes?.available ?? 0),
    inodesUsed: Number(inodes?.used ?? 0),
    ...(condition ? { volumeCondition: { abnormal: condition.abnormal, message: condition.message } } : {}),
  }
}
