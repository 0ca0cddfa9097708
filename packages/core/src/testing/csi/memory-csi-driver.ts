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

export function createMemoryCsiDriver(options: MemoryCsiDriverOptions): MemoryCsiDriver {
  const { host } = options
  const name = options.name ?? 'memory.csi.kubevol.io'
  const capabilities = options.capabilities ?? ['STAGE_UNSTAGE_VOLUME', 'GET_VOLUME_STATS', 'EXPAND_VOLUME']
  const stages = capabilities.includes('STAGE_UNSTAGE_VOLUME')
  const calls: MemoryCsiCall[] = []
  const interceptors: MemoryCsiInterceptor[] = []
  const sizes = new Map<string, number>()
  const staged = new Map<string, string>()
  const dataDir = options.dataDir ?? '/var/lib/memory-csi'
  const image = (id: string): string => {
    if (id.includes('/')) throw csiError('InvalidArgument', `invalid volume id "${id}"`)
    return `${dataDir}/${id}.img`
  }
  const loops = () => {
    if (!host.loopDevices || !host.truncate) throw csiError('FailedPrecondition', 'block volumes need a host with loop devices and truncate')
    return { loopDevices: host.loopDevices, truncate: host.truncate.bind(host) }
  }
  /** The loop device of a block volume's image, creating and attaching it when `attach`. */
  const blockDevice = async (id: string, attach: boolean): Promise<string | undefined> => {
    const { loopDevices, truncate } = loops()
    const file = image(id)
    if (!(await host.lstat(file))) {
      if (!attach) return undefined
      await host.mkdir(dataDir, { recursive: true })
      await host.writeFile(file, '')
      await truncate(file, options.blockSizeBytes ?? 64 << 20)
    }
    const [device] = await loopDevices.find(file)
    if (device || !attach) return device
    return loopDevices.attach(file)
  }

  const run = <T>(method: string, request: object, work: () => Promise<T>): Promise<T> => {
    const call: MemoryCsiCall = { method, request: request as Record<string, unknown> }
    calls.push(call)
    const chain = interceptors.reduceRight<() => Promise<unknown>>((next, interceptor) => () => interceptor(call, next), work)
    return chain() as Promise<T>
  }
  const unmountAndRemove = async (path: string): Promise<void> => {
    if (!(await host.lstat(path))) return
    while (await host.isMountPoint(path)) await host.unmount(path)
    await host.remove(path)
  }
  const requireId = (id: string, path: string, what: string): void => {
    if (!id) throw csiError('InvalidArgument', 'volume ID missing in request')
    if (!path) throw csiError('InvalidArgument', `${what} missing in request`)
  }

  return {
    name,
    calls,
    sizes,
    intercept(interceptor) {
      interceptors.push(interceptor)
      return () => void interceptors.splice(interceptors.indexOf(interceptor), 1)
    },
    getPluginInfo: (_o: CsiCallOptions) => run('GetPluginInfo', {}, async () => ({ name, vendorVersion: '0.1.0' })),
    nodeGetInfo: () => run('NodeGetInfo', {}, async () => ({ nodeId: options.nodeId ?? 'node-1', maxVolumesPerNode: 0 })),
    nodeGetCapabilities: () => run('NodeGetCapabilities', {}, async () => capabilities),
    nodeStageVolume: (r) =>
      run('NodeStageVolume', r, async () => {
        requireId(r.volumeId, r.stagingTargetPath, 'staging target path')
        if (!(await host.lstat(r.stagingTargetPath))) throw csiError('NotFound', `staging path ${r.stagingTargetPath} does not exist`)
        const { mount } = r.volumeCapability
        if (!mount) {
          await blockDevice(r.volumeId, true)
          staged.set(r.volumeId, r.stagingTargetPath)
          return
        }
        if (await host.isMountPoint(r.stagingTargetPath)) return
        await host.mount({ source: `csi-${r.volumeId}`, target: r.stagingTargetPath, fstype: 'tmpfs', options: [...mount.mountFlags] })
        staged.set(r.volumeId, r.stagingTargetPath)
      }),
    nodeUnstageVolume: (r) =>
      run('NodeUnstageVolume', r, async () => {
        requireId(r.volumeId, r.stagingTargetPath, 'staging target path')
        while ((await host.lstat(r.stagingTargetPath)) && (await host.isMountPoint(r.stagingTargetPath))) await host.unmount(r.stagingTargetPath)
        if (host.loopDevices && (await host.lstat(image(r.volumeId)))) {
          for (const device of await host.loopDevices.find(image(r.volumeId))) await host.loopDevices.detach(device)
        }
        staged.delete(r.volumeId)
      }),
    nodePublishVolume: (r) =>
      run('NodePublishVolume', r, async () => {
        requireId(r.volumeId, r.targetPath, 'target path')
        // Inline ephemeral volumes are never staged; the driver knows them by the pod info key.
        const ephemeral = r.volumeContext['csi.storage.k8s.io/ephemeral'] === 'true'
        const bind = stages && !ephemeral
        if (bind && !r.stagingTargetPath) throw csiError('InvalidArgument', 'staging target path missing in request')
        if (bind && staged.get(r.volumeId) !== r.stagingTargetPath) throw csiError('FailedPrecondition', 'volume must be staged before publishing')
        if (r.volumeCapability.block) {
          // The target is a file; the device is bound onto it.
          const device = await blockDevice(r.volumeId, !stages)
          if (!device) throw csiError('FailedPrecondition', 'volume must be staged before publishing')
          if (!(await host.lstat(r.targetPath))) {
            await host.mkdir(r.targetPath.slice(0, r.targetPath.lastIndexOf('/')), { recursive: true, mode: 0o750 })
            await host.writeFile(r.targetPath, '', { mode: 0o660 })
          }
          if (!(await host.isMountPoint(r.targetPath))) await host.mount({ source: device, target: r.targetPath, bind: true, readOnly: r.readonly })
          return
        }
        await host.mkdir(r.targetPath, { recursive: true, mode: 0o750 })
        if (await host.isMountPoint(r.targetPath)) return
        if (bind) await host.mount({ source: r.stagingTargetPath, target: r.targetPath, bind: true, readOnly: r.readonly })
        else await host.mount({ source: `csi-${r.volumeId}`, target: r.targetPath, fstype: 'tmpfs', readOnly: r.readonly })
      }),
    nodeUnpublishVolume: (r) =>
      run('NodeUnpublishVolume', r, async () => {
        requireId(r.volumeId, r.targetPath, 'target path')
        await unmountAndRemove(r.targetPath)
      }),
    nodeExpandVolume: (r) =>
      run('NodeExpandVolume', r, async () => {
        requireId(r.volumeId, r.volumePath, 'volume path')
        if (r.volumeCapability?.block) {
          const device = await blockDevice(r.volumeId, false)
          if (!device) throw csiError('NotFound', `block volume ${r.volumeId} is not staged`)
          await loops().truncate(image(r.volumeId), r.requiredBytes)
          await loops().loopDevices.refreshCapacity(device)
        }
        sizes.set(r.volumeId, r.requiredBytes)
        return r.requiredBytes
      }),
    nodeGetVolumeStats: (r) =>
      run('NodeGetVolumeStats', r, async (): Promise<CsiVolumeStats> => {
        requireId(r.volumeId, r.volumePath, 'volume path')
        if (!(await host.lstat(r.volumePath)) || !(await host.isMountPoint(r.volumePath))) throw csiError('NotFound', `volume ${r.volumeId} is not published at ${r.volumePath}`)
        const capacity = sizes.get(r.volumeId) ?? 1 << 30
        const condition = options.volumeCondition?.(r.volumeId)
        return { capacityBytes: capacity, availableBytes: capacity, usedBytes: 0, inodes: 1000, inodesFree: 1000, inodesUsed: 0, ...(condition ? { volumeCondition: condition } : {}) }
      }),
  }
}
