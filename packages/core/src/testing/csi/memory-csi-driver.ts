/**
 * An in-memory CSI node driver on a Host: NodeStage mounts a tmpfs at the staging path, NodePublish
 * bind-mounts it into the target (or mounts a tmpfs there when the driver does not stage), as
 * csi-driver-host-path and democratic-csi do (KUBE-API.md). Raw block volumes (the `block` access
 * type) are sparse images under `dataDir` on loop devices: NodeStage attaches the image, NodePublish
 * binds the loop device onto the target file (creating it), NodeUnstage detaches. It records every
 * call and lets tests inject gRPC errors and hangs through interceptors.
 */
import type { Host } from '../../host/host.js'
import type { CsiCallOptions, CsiDriver, CsiNodeCapability, CsiVolumeStats } from '../../plugins/csi/csi-driver.js'
import { csiError } from '../../plugins/csi/csi-error.js'

/** One call as the driver received it. */
export interface MemoryCsiCall {
  readonly method: string
  readonly request: Readonly<Record<string, unknown>>
}

/** Sees each call before the driver runs it: return `next()`, throw, or never resolve. */
export type MemoryCsiInterceptor = (call: MemoryCsiCall, next: () => Promise<unknown>) => Promise<unknown>

export interface MemoryCsiDriverOptions {
  readonly host: Host
  /** @default 'memory.csi.kubevol.io' */
  readonly name?: string
  /** @default ['STAGE_UNSTAGE_VOLUME', 'GET_VOLUME_STATS', 'EXPAND_VOLUME'] */
  readonly capabilities?: readonly CsiNodeCapability[]
  /** @default 'node-1' */
  readonly nodeId?: string
  /** Where block volume images live (`<dataDir>/<volume id>.img`). @default '/var/lib/memory-csi' */
  readonly dataDir?: string
  /** The size of a new block volume image, bytes. @default 64 MiB */
  readonly blockSizeBytes?: number
  /**
   * The `volume_condition` NodeGetVolumeStats reports for a volume (a driver with VOLUME_CONDITION);
   * undefined leaves it out of the answer. @default none for every volume
   */
  readonly volumeCondition?: (volumeId: string) => { readonly abnormal: boolean; readonly message: string } | undefined
}

export interface MemoryCsiDriver extends CsiDriver {
  readonly name: string
  /** Every call received, in order (including ones an interceptor failed). */
  readonly calls: MemoryCsiCall[]
  /** Adds an interceptor; returns its removal. */
  intercept(interceptor: MemoryCsiInterceptor): () => void
  /** Volume sizes in bytes by handle (after NodeExpandVolume). */
  readonly sizes: ReadonlyMap<string, number>
}

type Request<K extends keyof CsiDriver> = Parameters<NonNullable<CsiDriver[K]>>[0]

const requireId = (id: string, path: string, what: string): void => {
  if (!id) throw csiError('InvalidArgument', 'volume ID missing in request')
  if (!path) throw csiError('InvalidArgument', `${what} missing in request`)
}

/** The driver's node side: what each call does to the host, and what it keeps between calls. */
class MemoryCsiNode {
  readonly sizes = new Map<string, number>()
  readonly #staged = new Map<string, string>()
  readonly #host: Host
  readonly #dataDir: string
  readonly #stages: boolean

  constructor(readonly options: MemoryCsiDriverOptions, capabilities: readonly CsiNodeCapability[]) {
    this.#host = options.host
    this.#dataDir = options.dataDir ?? '/var/lib/memory-csi'
    this.#stages = capabilities.includes('STAGE_UNSTAGE_VOLUME')
  }

  #image(id: string): string {
    if (id.includes('/')) throw csiError('InvalidArgument', `invalid volume id "${id}"`)
    return `${this.#dataDir}/${id}.img`
  }

  #loops() {
    const host = this.#host
    if (!host.loopDevices || !host.truncate) throw csiError('FailedPrecondition', 'block volumes need a host with loop devices and truncate')
    return { loopDevices: host.loopDevices, truncate: host.truncate.bind(host) }
  }

  /** The loop device of a block volume's image, creating and attaching it when `attach`. */
  async #blockDevice(id: string, attach: boolean): Promise<string | undefined> {
    const { loopDevices, truncate } = this.#loops()
    const file = this.#image(id)
    if (!(await this.#host.lstat(file))) {
      if (!attach) return undefined
      await this.#host.mkdir(this.#dataDir, { recursive: true })
      await this.#host.writeFile(file, '')
      await truncate(file, this.options.blockSizeBytes ?? 64 << 20)
    }
    const [device] = await loopDevices.find(file)
    if (device || !attach) return device
    return loopDevices.attach(file)
  }

  async stage(r: Request<'nodeStageVolume'>): Promise<void> {
    const host = this.#host
    requireId(r.volumeId, r.stagingTargetPath, 'staging target path')
    if (!(await host.lstat(r.stagingTargetPath))) throw csiError('NotFound', `staging path ${r.stagingTargetPath} does not exist`)
    const { mount } = r.volumeCapability
    if (!mount) {
      await this.#blockDevice(r.volumeId, true)
      this.#staged.set(r.volumeId, r.stagingTargetPath)
      return
    }
    if (await host.isMountPoint(r.stagingTargetPath)) return
    await host.mount({ source: `csi-${r.volumeId}`, target: r.stagingTargetPath, fstype: 'tmpfs', options: [...mount.mountFlags] })
    this.#staged.set(r.volumeId, r.stagingTargetPath)
  }

  async unstage(r: Request<'nodeUnstageVolume'>): Promise<void> {
    const host = this.#host
    requireId(r.volumeId, r.stagingTargetPath, 'staging target path')
    while ((await host.lstat(r.stagingTargetPath)) && (await host.isMountPoint(r.stagingTargetPath))) await host.unmount(r.stagingTargetPath)
    if (host.loopDevices && (await host.lstat(this.#image(r.volumeId)))) {
      for (const device of await host.loopDevices.find(this.#image(r.volumeId))) await host.loopDevices.detach(device)
    }
    this.#staged.delete(r.volumeId)
  }

  async publish(r: Request<'nodePublishVolume'>): Promise<void> {
    const host = this.#host
    requireId(r.volumeId, r.targetPath, 'target path')
    // Inline ephemeral volumes are never staged; the driver knows them by the pod info key.
    const ephemeral = r.volumeContext['csi.storage.k8s.io/ephemeral'] === 'true'
    const bind = this.#stages && !ephemeral
    if (bind && !r.stagingTargetPath) throw csiError('InvalidArgument', 'staging target path missing in request')
    if (bind && this.#staged.get(r.volumeId) !== r.stagingTargetPath) throw csiError('FailedPrecondition', 'volume must be staged before publishing')
    if (r.volumeCapability.block) return this.#publishBlock(r)
    await host.mkdir(r.targetPath, { recursive: true, mode: 0o750 })
    if (await host.isMountPoint(r.targetPath)) return
    if (bind) await host.mount({ source: r.stagingTargetPath, target: r.targetPath, bind: true, readOnly: r.readonly })
    else await host.mount({ source: `csi-${r.volumeId}`, target: r.targetPath, fstype: 'tmpfs', readOnly: r.readonly })
  }

  // The target is a file; the device is bound onto it.
  async #publishBlock(r: Request<'nodePublishVolume'>): Promise<void> {
    const host = this.#host
    const device = await this.#blockDevice(r.volumeId, !this.#stages)
    if (!device) throw csiError('FailedPrecondition', 'volume must be staged before publishing')
    if (!(await host.lstat(r.targetPath))) {
      await host.mkdir(r.targetPath.slice(0, r.targetPath.lastIndexOf('/')), { recursive: true, mode: 0o750 })
      await host.writeFile(r.targetPath, '', { mode: 0o660 })
    }
    if (!(await host.isMountPoint(r.targetPath))) await host.mount({ source: device, target: r.targetPath, bind: true, readOnly: r.readonly })
  }

  async unpublish(r: Request<'nodeUnpublishVolume'>): Promise<void> {
    const host = this.#host
    requireId(r.volumeId, r.targetPath, 'target path')
    if (!(await host.lstat(r.targetPath))) return
    while (await host.isMountPoint(r.targetPath)) await host.unmount(r.targetPath)
    await host.remove(r.targetPath)
  }

  async expand(r: Request<'nodeExpandVolume'>): Promise<number> {
    requireId(r.volumeId, r.volumePath, 'volume path')
    if (r.volumeCapability?.block) {
      const device = await this.#blockDevice(r.volumeId, false)
      if (!device) throw csiError('NotFound', `block volume ${r.volumeId} is not staged`)
      await this.#loops().truncate(this.#image(r.volumeId), r.requiredBytes)
      await this.#loops().loopDevices.refreshCapacity(device)
    }
    this.sizes.set(r.volumeId, r.requiredBytes)
    return r.requiredBytes
  }

  async stats(r: Request<'nodeGetVolumeStats'>): Promise<CsiVolumeStats> {
    requireId(r.volumeId, r.volumePath, 'volume path')
    if (!(await this.#host.lstat(r.volumePath)) || !(await this.#host.isMountPoint(r.volumePath))) throw csiError('NotFound', `volume ${r.volumeId} is not published at ${r.volumePath}`)
    const capacity = this.sizes.get(r.volumeId) ?? 1 << 30
    const condition = this.options.volumeCondition?.(r.volumeId)
    return { capacityBytes: capacity, availableBytes: capacity, usedBytes: 0, inodes: 1000, inodesFree: 1000, inodesUsed: 0, ...(condition ? { volumeCondition: condition } : {}) }
  }
}

export function createMemoryCsiDriver(options: MemoryCsiDriverOptions): MemoryCsiDriver {
  const name = options.name ?? 'memory.csi.kubevol.io'
  const capabilities = options.capabilities ?? ['STAGE_UNSTAGE_VOLUME', 'GET_VOLUME_STATS', 'EXPAND_VOLUME']
  const node = new MemoryCsiNode(options, capabilities)
  const calls: MemoryCsiCall[] = []
  const interceptors: MemoryCsiInterceptor[] = []
  // Every call is recorded, then runs through the interceptors to its work.
  const run = <T>(method: string, request: object, work: () => Promise<T>): Promise<T> => {
    const call: MemoryCsiCall = { method, request: request as Record<string, unknown> }
    calls.push(call)
    const chain = interceptors.reduceRight<() => Promise<unknown>>((next, interceptor) => () => interceptor(call, next), work)
    return chain() as Promise<T>
  }
  return {
    name,
    calls,
    sizes: node.sizes,
    intercept(interceptor) {
      interceptors.push(interceptor)
      return () => void interceptors.splice(interceptors.indexOf(interceptor), 1)
    },
    getPluginInfo: (_o: CsiCallOptions) => run('GetPluginInfo', {}, async () => ({ name, vendorVersion: '0.1.0' })),
    nodeGetInfo: () => run('NodeGetInfo', {}, async () => ({ nodeId: options.nodeId ?? 'node-1', maxVolumesPerNode: 0 })),
    nodeGetCapabilities: () => run('NodeGetCapabilities', {}, async () => capabilities),
    nodeStageVolume: (r) => run('NodeStageVolume', r, () => node.stage(r)),
    nodeUnstageVolume: (r) => run('NodeUnstageVolume', r, () => node.unstage(r)),
    nodePublishVolume: (r) => run('NodePublishVolume', r, () => node.publish(r)),
    nodeUnpublishVolume: (r) => run('NodeUnpublishVolume', r, () => node.unpublish(r)),
    nodeExpandVolume: (r) => run('NodeExpandVolume', r, () => node.expand(r)),
    nodeGetVolumeStats: (r) => run('NodeGetVolumeStats', r, () => node.stats(r)),
  }
}
