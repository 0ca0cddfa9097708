/**
 * The ports the populator reads: which pods are on the node ({@link PodSource}) and the API objects
 * their volumes reference ({@link ObjectReader}).
 */
import type {
  CSIDriver,
  ConfigMap,
  Node,
  PersistentVolume,
  PersistentVolumeClaim,
  Pod,
  Secret,
  VolumeAttachment,
} from '../api/kubernetes.js'

/**
 * Pods on this node (kubelet PodManager + PodStateProvider + sourcesReady). Reads are synchronous
 * snapshots; changes are announced through `subscribe`.
 */
export interface PodSource {
  /** Every pod the sources know for this node, terminating ones included. */
  getPods(): readonly Pod[]
  getPodByUID(uid: string): Pod | undefined
  /** The pod is being or has been terminated: its containers must not start. */
  shouldPodContainersBeTerminating(uid: string): boolean
  /** All containers of the pod are gone: its volumes may be unmounted. */
  shouldPodRuntimeBeRemoved(uid: string): boolean
  /** Every source has delivered its first full list. */
  allReady(): boolean
  /**
   * Calls `listener` after any change; returns the unsubscribe function. A source that knows which
   * pod changed passes its UID, so the populator looks at that pod alone; without one it looks at
   * every pod.
   */
  subscribe(listener: (uid?: string) => void): () => void
}

/**
 * API objects by name. Each method rejects with `NotFoundError` when the object does not exist and
 * with any other error when it cannot be read. Optional members are what a reader can serve.
 */
export interface ObjectReader {
  getPersistentVolumeClaim(namespace: string, name: string): Promise<PersistentVolumeClaim>
  getPersistentVolume(name: string): Promise<PersistentVolume>
  getConfigMap?(namespace: string, name: string): Promise<ConfigMap>
  getSecret?(namespace: string, name: string): Promise<Secret>
  getCSIDriver?(name: string): Promise<CSIDriver>
  getNode?(name: string): Promise<Node>
  /** A VolumeAttachment by name (controller attach of CSI volumes). */
  getVolumeAttachment?(name: string): Promise<VolumeAttachment>
  /**
   * The writable side: a JSON merge patch (RFC 7386) of a claim's `status` subresource, as the
   * kubelet writes the progress of a node expansion (`allocatedResourceStatuses`, `capacity`,
   * `conditions`); resolves with the updated claim. A Node authorizer lets a node patch the status
   * of the claims its pods use. Absent: the reader cannot write, and the claim is left as it is.
   */
  patchPersistentVolumeClaimStatus?(namespace: string, name: string, status: Readonly<Record<string, unknown>>): Promise<PersistentVolumeClaim>
  /**
   * Calls `listener` after any object changes; returns the unsubscribe function. A reader that
   * knows which object changed passes it, so only the pods whose volumes reference it are set up
   * again; without it, every pod with such volumes is.
   */
  subscribe?(listener: (changed?: ObjectReference) => void): () => void
  /**
   * True when `subscribe` hears of every change of an object this reader serves as it happens (a
   * watch, a file, memory). Then volumes built only from objects and from the pod (configMap,
   * secret, downwardAPI, projected without a token) are set up again on those events alone, not
   * every `remountPeriodMs`. False or absent for a reader that finds changes only by reading again
   * (a cache with a TTL): those volumes are then set up again every period, as the kubelet does,
   * and the reads are what find the changes.
   */
  readonly announcesChanges?: boolean
}

/** An object by kind and name, as an {@link ObjectReader} announces a change. */
export interface ObjectReference {
  readonly kind: 'PersistentVolumeClaim' | 'PersistentVolume' | 'ConfigMap' | 'Secret' | 'CSIDriver' | 'Node' | (string & {})
  /** For namespaced kinds. */
  readonly namespace?: string
  readonly name: string
}
