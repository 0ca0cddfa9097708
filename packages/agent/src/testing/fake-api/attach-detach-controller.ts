/**
 * A model of kube-controller-manager's attach/detach controller for CSI volumes, as it behaves on a
 * real v1.32 control plane (KUBE-API.md):
 *
 * - it ignores a Node until the Node carries `volumes.kubernetes.io/controller-managed-attach-detach: "true"`;
 * - for each pod bound to such a node (and not terminated) with a claim bound to a CSI PV, it looks up
 *   the driver's CSIDriver object: `attachRequired: false` means nothing to attach; otherwise (also
 *   when there is no CSIDriver object) it creates a `storage.k8s.io/v1` VolumeAttachment named
 *   `csi-<sha256 hex of handle + driver + node>` (`spec.attacher` = driver, `spec.nodeName`,
 *   `spec.source.persistentVolumeName`);
 * - once an external attacher sets `status.attached: true`, it lists the volume in the Node's
 *   `status.volumesAttached` as `kubernetes.io/csi/<driver>^<volumeHandle>` with `devicePath: ""`;
 * - when no pod of the node needs the volume any more and the Node's `status.volumesInUse` no longer
 *   names it, it takes it out of `volumesAttached` and deletes the VolumeAttachment.
 *
 * It writes as the controller does, with the store's administrator rights; entries of
 * `volumesAttached` it did not add are left alone.
 */
import { createHash } from 'node:crypto'
import { type FakeStore, type KubeObject, resourceOf } from './store.js'

/** The annotation a node agent sets on its Node to hand attach and detach to the controller. */
export const CONTROLLER_MANAGED_ATTACH_DETACH = 'volumes.kubernetes.io/controller-managed-attach-detach'

/** The VolumeAttachment name the controller's CSI attacher uses (`getAttachmentName`). */
export function volumeAttachmentName(volumeHandle: string, driver: string, nodeName: string): string {
  return `csi-${createHash('sha256').update(`${volumeHandle}${driver}${nodeName}`).digest('hex')}`
}

/** The unique volume name of a CSI volume, as the controller reports it and the kubelet waits for it. */
export const csiUniqueVolumeName = (driver: string, volumeHandle: string): string => `kubernetes.io/csi/${driver}^${volumeHandle}`

interface Wanted {
  readonly node: string
  readonly driver: string
  readonly handle: string
  readonly pv: string
}

interface Attached {
  readonly name: string
  readonly devicePath: string
}

type PodSpec = { nodeName?: string; volumes?: { persistentVolumeClaim?: { claimName?: string } }[] }
type PodStatus = { phase?: string; containerStatuses?: { state?: { running?: unknown } }[] }

/** The controller's idea of a terminated pod (`IsPodTerminated`): finished, or deleted with nothing running. */
function terminated(pod: KubeObject): boolean {
  const status = (pod.status ?? {}) as PodStatus
  if (status.phase === 'Succeeded' || status.phase === 'Failed') return true
  return pod.metadata.deletionTimestamp !== undefined && !(status.containerStatuses ?? []).some((c) => c.state?.running !== undefined)
}

const WATCHED = new Set(['nodes', 'pods', 'persistentvolumeclaims', 'persistentvolumes', 'csidrivers', 'volumeattachments'])

/** The resources the model reads and writes. */
const R = {
  nodes: resourceOf('nodes'),
  pods: resourceOf('pods'),
  pvcs: resourceOf('persistentvolumeclaims'),
  pvs: resourceOf('persistentvolumes'),
  drivers: resourceOf('csidrivers'),
  vas: resourceOf('volumeattachments'),
}

/** The attachments the pods bound to a node need, by VolumeAttachment name. */
function wantedOn(store: FakeStore, node: string): Map<string, Wanted> {
  const wanted = new Map<string, Wanted>()
  for (const pod of store.list(R.pods)) {
    const spec = (pod.spec ?? {}) as PodSpec
    if (spec.nodeName !== node || terminated(pod)) continue
    for (const volume of spec.volumes ?? []) {
      const claim = volume.persistentVolumeClaim?.claimName
      const pvc = claim ? store.get(R.pvcs, pod.metadata.namespace, claim) : undefined
      const pvName = (pvc?.spec as { volumeName?: string } | undefined)?.volumeName
      const pv = pvName ? store.get(R.pvs, undefined, pvName) : undefined
      const csi = (pv?.spec as { csi?: { driver?: string; volumeHandle?: string } } | undefined)?.csi
      if (!pvName || !csi?.driver || !csi.volumeHandle) continue
      const driver = store.get(R.drivers, undefined, csi.driver)
      if ((driver?.spec as { attachRequired?: boolean } | undefined)?.attachRequired === false) continue
      wanted.set(volumeAttachmentName(csi.volumeHandle, csi.driver, node), { node, driver: csi.driver, handle: csi.volumeHandle, pv: pvName })
    }
  }
  return wanted
}

/** Starts the model on a store; returns its stop function. */
export function startAttachDetachController(store: FakeStore): () => void {
  /** What each VolumeAttachment it made is for (its actual state of world). */
  const made = new Map<string, Wanted>()

  const syncNode = (node: KubeObject): void => {
    const nodeName = node.metadata.name as string
    if (node.metadata.annotations?.[CONTROLLER_MANAGED_ATTACH_DETACH] !== 'true') return
    const wanted = wantedOn(store, nodeName)
    for (const [name, w] of wanted) {
      made.set(name, w)
      if (store.get(R.vas, undefined, name)) continue
      store.create(R.vas, { metadata: { name }, spec: { attacher: w.driver, nodeName, source: { persistentVolumeName: w.pv } } })
    }
    const status = (node.status ?? {}) as { volumesAttached?: Attached[]; volumesInUse?: string[] }
    const before = status.volumesAttached ?? []
    let next = [...before]
    const inUse = new Set(status.volumesInUse ?? [])
    for (const [name, w] of made) {
      if (w.node !== nodeName) continue
      const unique = csiUniqueVolumeName(w.driver, w.handle)
      const va = store.get(R.vas, undefined, name)
      if (!wanted.has(name)) {
        // Detach only what the node no longer uses (the controller's safe detach).
        if (inUse.has(unique)) continue
        next = next.filter((a) => a.name !== unique)
        if (va) store.delete(R.vas, undefined, name)
        made.delete(name)
        continue
      }
      const attached = (va?.status as { attached?: boolean } | undefined)?.attached === true
      if (attached && !next.some((a) => a.name === unique)) next.push({ name: unique, devicePath: '' })
    }
    if (JSON.stringify(next) === JSON.stringify(before)) return
    store.update(R.nodes, { ...node, status: { ...status, volumesAttached: next }, metadata: { ...node.metadata, resourceVersion: undefined } })
  }

  let scheduled = false
  let stopped = false
  const sync = (): void => {
    scheduled = false
    if (stopped) return
    for (const node of store.list(R.nodes)) syncNode(node)
  }
  const unsubscribe = store.subscribe((change) => {
    if (stopped || scheduled || !WATCHED.has(change.resource.plural)) return
    scheduled = true
    setImmediate(sync)
  })
  setImmediate(sync)
  return () => {
    stopped = true
    unsubscribe()
  }
}
