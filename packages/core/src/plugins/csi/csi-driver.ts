/**
 * The CsiDriver port: the CSI node service of one registered driver (CSI spec, Identity and Node
 * services), as the CSI plugin uses it. adapter-linux implements it over gRPC on a unix socket; the
 * in-memory driver in `@kubevol/core/testing` implements it for tests. Requests and responses use
 * the CSI field names in camelCase; failures are {@link CsiError}s carrying the gRPC status code.
 */

/** Node service capabilities (`NodeServiceCapability.RPC.Type`), by their proto enum names. */
export type CsiNodeCapability =
  | 'STAGE_UNSTAGE_VOLUME'
  | 'GET_VOLUME_STATS'
  | 'EXPAND_VOLUME'
  | 'VOLUME_CONDITION'
  | 'SINGLE_NODE_MULTI_WRITER'
  | 'VOLUME_MOUNT_GROUP'

/** `VolumeCapability.AccessMode.Mode`, by proto enum name. */
export type CsiAccessMode =
  | 'SINGLE_NODE_WRITER'
  | 'SINGLE_NODE_READER_ONLY'
  | 'MULTI_NODE_READER_ONLY'
  | 'MULTI_NODE_SINGLE_WRITER'
  | 'MULTI_NODE_MULTI_WRITER'
  | 'SINGLE_NODE_SINGLE_WRITER'
  | 'SINGLE_NODE_MULTI_WRITER'

/** `VolumeCapability.MountVolume`: the volume is published as a mounted file system. */
export interface CsiMountAccess {
  readonly fsType: string
  readonly mountFlags: readonly string[]
  readonly volumeMountGroup?: string
}

/**
 * `VolumeCapability`: the access type (exactly one of `mount` and `block`) and the access mode.
 * `block` (`BlockVolume`, no fields) asks for a raw block device: NodeStage gets a staging
 * directory, NodePublish a target path that must become the device (a file the driver binds it onto).
 */
export type CsiVolumeCapability =
  | { readonly mount: CsiMountAccess; readonly block?: undefined; readonly accessMode: CsiAccessMode }
  | { readonly block: Readonly<Record<string, never>>; readonly mount?: undefined; readonly accessMode: CsiAccessMode }

export interface NodeStageVolumeRequest {
  readonly volumeId: string
  readonly publishContext: Readonly<Record<string, string>>
  readonly stagingTargetPath: string
  readonly volumeCapability: CsiVolumeCapability
  readonly secrets: Readonly<Record<string, string>>
  readonly volumeContext: Readonly<Record<string, string>>
}

export interface NodeUnstageVolumeRequest {
  readonly volumeId: string
  readonly stagingTargetPath: string
}

export interface NodePublishVolumeRequest {
  readonly volumeId: string
  readonly publishContext: Readonly<Record<string, string>>
  /** "" when the driver has no STAGE_UNSTAGE_VOLUME. */
  readonly stagingTargetPath: string
  readonly targetPath: string
  readonly volumeCapability: CsiVolumeCapability
  readonly readonly: boolean
  readonly secrets: Readonly<Record<string, string>>
  readonly volumeContext: Readonly<Record<string, string>>
}

export interface NodeUnpublishVolumeRequest {
  readonly volumeId: string
  readonly targetPath: string
}

export interface NodeExpandVolumeRequest {
  readonly volumeId: string
  readonly volumePath: string
  /** Bytes. */
  readonly requiredBytes: number
  readonly stagingTargetPath: string
  readonly volumeCapability?: CsiVolumeCapability
  readonly secrets: Readonly<Record<string, string>>
}

export interface NodeGetVolumeStatsRequest {
  readonly volumeId: string
  readonly volumePath: string
  readonly stagingTargetPath: string
}

/** `VolumeUsage` entries folded into one record; `volumeCondition` when the driver reports it. */
export interface CsiVolumeStats {
  readonly capacityBytes: number
  readonly availableBytes: number
  readonly usedBytes: number
  readonly inodes: number
  readonly inodesFree: number
  readonly inodesUsed: number
  readonly volumeCondition?: { readonly abnormal: boolean; readonly message: string }
}

export interface CsiNodeInfo {
  readonly nodeId: string
  readonly maxVolumesPerNode: number
  readonly accessibleTopology?: Readonly<Record<string, string>>
}

export interface CsiPluginInfo {
  readonly name: string
  readonly vendorVersion: string
}

/** Per call: the deadline the transport must honour (gRPC deadline). */
export interface CsiCallOptions {
  readonly timeoutMs: number
}

/**
 * One CSI driver's Identity and Node services. Every call may be re-driven with the same request
 * after an uncertain outcome: drivers are idempotent by the CSI spec.
 */
export interface CsiDriver {
  getPluginInfo(options: CsiCallOptions): Promise<CsiPluginInfo>
  nodeGetInfo(options: CsiCallOptions): Promise<CsiNodeInfo>
  nodeGetCapabilities(options: CsiCallOptions): Promise<readonly CsiNodeCapability[]>
  nodeStageVolume(request: NodeStageVolumeRequest, options: CsiCallOptions): Promise<void>
  nodeUnstageVolume(request: NodeUnstageVolumeRequest, options: CsiCallOptions): Promise<void>
  nodePublishVolume(request: NodePublishVolumeRequest, options: CsiCallOptions): Promise<void>
  nodeUnpublishVolume(request: NodeUnpublishVolumeRequest, options: CsiCallOptions): Promise<void>
  /** Returns the new capacity in bytes (0 when the driver does not say). */
  nodeExpandVolume(request: NodeExpandVolumeRequest, options: CsiCallOptions): Promise<number>
  nodeGetVolumeStats(request: NodeGetVolumeStatsRequest, options: CsiCallOptions): Promise<CsiVolumeStats>
  /** Releases the connection. */
  close?(): void
}
