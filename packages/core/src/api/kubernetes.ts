/**
 * A structural subset of the Kubernetes JSON objects the volume manager reads.
 *
 * Every field is optional where the API allows it to be absent, so objects from
 * `@kubernetes/client-node`, a YAML manifest or `JSON.parse` pass straight in.
 * Only the fields kubevol reads are listed; extra fields are allowed and ignored.
 */

/** `metadata` of any object. */
export interface ObjectMeta {
  readonly name?: string
  readonly namespace?: string
  readonly uid?: string
  readonly resourceVersion?: string
  readonly generation?: number
  readonly deletionTimestamp?: string | Date
  readonly labels?: Readonly<Record<string, string>>
  readonly annotations?: Readonly<Record<string, string>>
  readonly ownerReferences?: readonly OwnerReference[]
}

export interface OwnerReference {
  readonly apiVersion?: string
  readonly kind?: string
  readonly name?: string
  readonly uid?: string
  readonly controller?: boolean
}

export interface KeyToPath {
  readonly key: string
  readonly path: string
  readonly mode?: number
}

export interface ObjectFieldSelector {
  readonly apiVersion?: string
  readonly fieldPath: string
}

export interface ResourceFieldSelector {
  readonly containerName?: string
  readonly resource: string
  readonly divisor?: string | number
}

export interface DownwardAPIVolumeFile {
  readonly path: string
  readonly fieldRef?: ObjectFieldSelector
  readonly resourceFieldRef?: ResourceFieldSelector
  readonly mode?: number
}

export interface VolumeProjection {
  readonly configMap?: { readonly name?: string; readonly items?: readonly KeyToPath[]; readonly optional?: boolean }
  readonly secret?: { readonly name?: string; readonly items?: readonly KeyToPath[]; readonly optional?: boolean }
  readonly downwardAPI?: { readonly items?: readonly DownwardAPIVolumeFile[] }
  readonly serviceAccountToken?: {
    readonly audience?: string
    readonly expirationSeconds?: number
    readonly path: string
  }
  readonly clusterTrustBundle?: Readonly<Record<string, unknown>>
}

export interface CSIVolumeSource {
  readonly driver: string
  readonly readOnly?: boolean
  readonly fsType?: string
  readonly volumeAttributes?: Readonly<Record<string, string>>
  readonly nodePublishSecretRef?: { readonly name?: string }
}

export interface CSIPersistentVolumeSource {
  readonly driver: string
  readonly volumeHandle: string
  readonly readOnly?: boolean
  readonly fsType?: string
  readonly volumeAttributes?: Readonly<Record<string, string>>
  readonly nodeStageSecretRef?: { readonly name?: string; readonly namespace?: string }
  readonly nodePublishSecretRef?: { readonly name?: string; readonly namespace?: string }
  readonly controllerExpandSecretRef?: { readonly name?: string; readonly namespace?: string }
  readonly nodeExpandSecretRef?: { readonly name?: string; readonly namespace?: string }
}

/** The volume sources kubevol knows; any other key makes the volume unsupported ("no volume plugin matched"). */
export interface VolumeSource {
  readonly emptyDir?: { readonly medium?: string; readonly sizeLimit?: string | number }
  readonly hostPath?: { readonly path: string; readonly type?: string }
  readonly configMap?: {
    readonly name?: string
    readonly items?: readonly KeyToPath[]
    readonly defaultMode?: number
    readonly optional?: boolean
  }
  readonly secret?: {
    readonly secretName?: string
    readonly items?: readonly KeyToPath[]
    readonly defaultMode?: number
    readonly optional?: boolean
  }
  readonly downwardAPI?: { readonly items?: readonly DownwardAPIVolumeFile[]; readonly defaultMode?: number }
  readonly projected?: { readonly sources?: readonly VolumeProjection[]; readonly defaultMode?: number }
  readonly persistentVolumeClaim?: { readonly claimName: string; readonly readOnly?: boolean }
  readonly ephemeral?: { readonly volumeClaimTemplate?: Readonly<Record<string, unknown>> }
  readonly csi?: CSIVolumeSource
  readonly [other: string]: unknown
}

/** `pod.spec.volumes[]`. */
export type Volume = VolumeSource & { readonly name: string }

export interface VolumeMount {
  readonly name: string
  readonly mountPath: string
  readonly readOnly?: boolean
  readonly subPath?: string
  readonly subPathExpr?: string
  /** `None` (the default), `HostToContainer` or `Bidirectional` (privileged containers only). */
  readonly mountPropagation?: 'None' | 'HostToContainer' | 'Bidirectional' | (string & {})
  /** `Disabled` (the default), `IfPossible` or `Enabled`; the latter two need `readOnly`. */
  readonly recursiveReadOnly?: 'Disabled' | 'IfPossible' | 'Enabled' | (string & {})
}

export interface VolumeDevice {
  readonly name: string
  readonly devicePath: string
}

export interface SELinuxOptions {
  readonly user?: string
  readonly role?: string
  readonly type?: string
  readonly level?: string
}

export interface ResourceRequirements {
  readonly limits?: Readonly<Record<string, string | number>>
  readonly requests?: Readonly<Record<string, string | number>>
}

export interface Container {
  readonly name: string
  readonly image?: string
  readonly volumeMounts?: readonly VolumeMount[]
  readonly volumeDevices?: readonly VolumeDevice[]
  readonly resources?: ResourceRequirements
  readonly env?: readonly { readonly name: string; readonly value?: string; readonly valueFrom?: unknown }[]
  readonly securityContext?: { readonly seLinuxOptions?: SELinuxOptions; readonly runAsUser?: number; readonly privileged?: boolean }
}

export interface PodSecurityContext {
  readonly fsGroup?: number
  readonly fsGroupChangePolicy?: 'Always' | 'OnRootMismatch' | (string & {})
  readonly supplementalGroups?: readonly number[]
  readonly runAsUser?: number
  readonly runAsGroup?: number
  readonly seLinuxOptions?: SELinuxOptions
  readonly seLinuxChangePolicy?: string
}

export interface PodSpec {
  readonly nodeName?: string
  readonly volumes?: readonly Volume[]
  readonly containers?: readonly Container[]
  readonly initContainers?: readonly Container[]
  readonly ephemeralContainers?: readonly Container[]
  readonly securityContext?: PodSecurityContext
  readonly serviceAccountName?: string
}

export interface Pod {
  readonly apiVersion?: string
  readonly kind?: string
  readonly metadata: ObjectMeta
  readonly spec?: PodSpec
  readonly status?: { readonly phase?: string }
}

export interface PersistentVolumeClaim {
  readonly apiVersion?: string
  readonly kind?: string
  readonly metadata: ObjectMeta
  readonly spec?: {
    readonly volumeName?: string
    readonly volumeMode?: 'Filesystem' | 'Block' | (string & {})
    readonly accessModes?: readonly string[]
    readonly resources?: ResourceRequirements
    readonly storageClassName?: string
  }
  readonly status?: {
    readonly phase?: 'Pending' | 'Bound' | 'Lost' | (string & {})
    readonly capacity?: Readonly<Record<string, string | number>>
    readonly allocatedResources?: Readonly<Record<string, string | number>>
    /** Resize progress by resource: `NodeResizePending`, `NodeResizeInProgress`, `NodeResizeInfeasible`, ... */
    readonly allocatedResourceStatuses?: Readonly<Record<string, string>>
    readonly conditions?: readonly PersistentVolumeClaimCondition[]
  }
}

/** A claim condition (`Resizing`, `FileSystemResizePending`, `NodeResizeError`, ...). */
export interface PersistentVolumeClaimCondition {
  readonly type: string
  readonly status: string
  readonly lastTransitionTime?: string
  readonly reason?: string
  readonly message?: string
}

export interface NodeSelectorRequirement {
  readonly key: string
  readonly operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist' | 'Gt' | 'Lt' | (string & {})
  readonly values?: readonly string[]
}

export interface NodeSelectorTerm {
  readonly matchExpressions?: readonly NodeSelectorRequirement[]
  readonly matchFields?: readonly NodeSelectorRequirement[]
}

export interface PersistentVolume {
  readonly apiVersion?: string
  readonly kind?: string
  readonly metadata: ObjectMeta
  readonly spec?: {
    readonly capacity?: Readonly<Record<string, string | number>>
    readonly accessModes?: readonly string[]
    readonly volumeMode?: 'Filesystem' | 'Block' | (string & {})
    readonly mountOptions?: readonly string[]
    readonly claimRef?: { readonly name?: string; readonly namespace?: string; readonly uid?: string }
    readonly nodeAffinity?: { readonly required?: { readonly nodeSelectorTerms: readonly NodeSelectorTerm[] } }
    readonly storageClassName?: string
    readonly local?: { readonly path: string; readonly fsType?: string }
    readonly hostPath?: { readonly path: string; readonly type?: string }
    readonly csi?: CSIPersistentVolumeSource
    readonly [other: string]: unknown
  }
  readonly status?: { readonly phase?: string }
}

export interface CSIDriver {
  readonly apiVersion?: string
  readonly kind?: string
  readonly metadata: ObjectMeta
  readonly spec?: {
    readonly attachRequired?: boolean
    readonly podInfoOnMount?: boolean
    readonly fsGroupPolicy?: 'ReadWriteOnceWithFSType' | 'File' | 'None' | (string & {})
    readonly requiresRepublish?: boolean
    readonly volumeLifecycleModes?: readonly string[]
    readonly seLinuxMount?: boolean
    readonly storageCapacity?: boolean
    readonly tokenRequests?: readonly { readonly audience: string; readonly expirationSeconds?: number }[]
    /** Set when the driver's node attach limit may change: the kubelet then checks for ResourceExhausted attach errors. */
    readonly nodeAllocatableUpdatePeriodSeconds?: number
  }
}

export interface AttachedVolumeStatus {
  readonly name: string
  readonly devicePath: string
}

export interface Node {
  readonly apiVersion?: string
  readonly kind?: string
  readonly metadata: ObjectMeta
  readonly status?: {
    readonly volumesInUse?: readonly string[]
    readonly volumesAttached?: readonly AttachedVolumeStatus[]
  }
}

export interface ConfigMap {
  readonly metadata: ObjectMeta
  readonly data?: Readonly<Record<string, string>>
  readonly binaryData?: Readonly<Record<string, string>>
}

export interface Secret {
  readonly metadata: ObjectMeta
  readonly data?: Readonly<Record<string, string>>
  readonly stringData?: Readonly<Record<string, string>>
  readonly type?: string
}

/** `storage.k8s.io/v1` VolumeAttachment: the attach/detach controller's record of one attachment. */
export interface VolumeAttachment {
  readonly metadata: ObjectMeta
  readonly spec?: {
    readonly attacher?: string
    readonly nodeName?: string
    readonly source?: { readonly persistentVolumeName?: string }
  }
  readonly status?: {
    readonly attached?: boolean
    readonly attachmentMetadata?: Readonly<Record<string, string>>
    /** `errorCode`: the gRPC code of the attach failure (8: ResourceExhausted, the node's attach limit). */
    readonly attachError?: { readonly message?: string; readonly time?: string; readonly errorCode?: number }
  }
}
