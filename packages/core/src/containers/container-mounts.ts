/**
 * A container's mounts and devices, as the kubelet hands them to the runtime (`makeMounts` and
 * `makeBlockVolumes` in pkg/kubelet/kubelet_pods.go, then the CRI's `Mount` and `Device`): the half
 * of a node agent that turns "the pod's volumes are mounted" into what each container sees. A pure
 * function of the pod, the container's name and the manager's mounted volumes
 * (`getMountedVolumesForPod`), with the kubelet's rules and texts.
 */
import type { Container, Pod, VolumeMount } from '../api/kubernetes.js'
import type { FieldPath } from '../api/field-errors.js'
import { mountPropagationErrors } from '../api/mount-validation.js'
import { ContainerMountsError } from '../errors.js'
import type { MountedVolumeInfo } from '../manager/pod-waiters.js'
import { expandSubPathExpr } from '../operations/subpath.js'
import { joinPath, safePathComponent } from '../paths.js'

/** The CRI's `MountPropagation`, as its JSON names it. */
export type MountPropagation = 'PROPAGATION_PRIVATE' | 'PROPAGATION_HOST_TO_CONTAINER' | 'PROPAGATION_BIDIRECTIONAL'

/** One mount of a container: the CRI's `Mount` (runtime.v1), with the pod volume's name. */
export interface ContainerMount {
  /** The pod volume's name (the volumeMount's `name`); not in the CRI message. */
  readonly name: string
  readonly containerPath: string
  /** The volume's directory on the host, or the subPath's bind for a mount with a subPath. */
  readonly hostPath: string
  readonly readonly: boolean
  /** The runtime should relabel the volume for the container's SELinux context. */
  readonly selinuxRelabel: boolean
  readonly propagation: MountPropagation
  /** Read-only in every submount too (`recursiveReadOnly: Enabled`, or `IfPossible` on a runtime that can). */
  readonly recursiveReadOnly: boolean
}

/** One block device of a container: the CRI's `Device`. */
export interface ContainerDevice {
  readonly containerPath: string
  /** The pod's link to the mapped device. */
  readonly hostPath: string
  /** `mrw`, or `r` when the claim is read-only. */
  readonly permissions: 'mrw' | 'r'
}

/** What {@link containerMounts} gives a container. */
export interface ContainerMounts {
  /** In the order of the container's `volumeMounts`. */
  readonly mounts: readonly ContainerMount[]
  /** In the order of the container's `volumeDevices`. */
  readonly devices: readonly ContainerDevice[]
}

export interface ContainerMountsOptions {
  /**
   * The runtime makes recursive read-only mounts (the runtime handler's
   * `recursiveReadOnlyMounts` feature; crun and runc on Linux 5.12 or later with `rro`). Without
   * it `IfPossible` gives a plain read-only mount and `Enabled` is refused, as by the kubelet.
   * @default false (the kubelet's answer when the runtime does not say)
   */
  readonly runtimeSupportsRecursiveReadOnly?: boolean
}

/** Where a container is in its pod: the list, the index, the container. */
interface Located {
  readonly list: 'initContainers' | 'containers' | 'ephemeralContainers'
  readonly index: number
  readonly container: Container
}

function locate(pod: Pod, name: string): Located {
  for (const list of ['initContainers', 'containers', 'ephemeralContainers'] as const) {
    const index = (pod.spec?.[list] ?? []).findIndex((c) => c.name === name)
    if (index >= 0) return { list, index, container: (pod.spec?.[list] ?? [])[index] as Container }
  }
  const podName = pod.metadata.namespace ? `${pod.metadata.namespace}/${pod.metadata.name ?? ''}` : (pod.metadata.name ?? '')
  throw new ContainerMountsError(`container ${name} not found in pod ${podName}`)
}

const PROPAGATION: Readonly<Record<string, MountPropagation>> = {
  None: 'PROPAGATION_PRIVATE',
  HostToContainer: 'PROPAGATION_HOST_TO_CONTAINER',
  Bidirectional: 'PROPAGATION_BIDIRECTIONAL',
}

/** kubelet `translateMountPropagation`: unset and `None` are private. */
function translatePropagation(mode: string | undefined): MountPropagation {
  if (mode === undefined) return 'PROPAGATION_PRIVATE'
  if (!Object.hasOwn(PROPAGATION, mode)) throw new ContainerMountsError(`invalid MountPropagation mode: ${JSON.stringify(mode)}`)
  return PROPAGATION[mode] as MountPropagation
}

/** kubelet `resolveRecursiveReadOnly`, its texts wrapped as makeMounts wraps them. */
function resolveRecursiveReadOnly(mount: VolumeMount, runtimeSupports: boolean): boolean {
  const fail = (reason: string): never => {
    throw new ContainerMountsError(`failed to resolve recursive read-only mode: ${reason}`)
  }
  const mode = mount.recursiveReadOnly
  if (mode === undefined || mode === 'Disabled') return false
  if (!mount.readOnly) fail(`volume ${JSON.stringify(mount.name)} requested recursive read-only mode, but it is not read-only`)
  if (mount.mountPropagation !== undefined && mount.mountPropagation !== 'None') {
    fail(`volume ${JSON.stringify(mount.name)} requested recursive read-only mode, but it is not compatible with propagation ${JSON.stringify(mount.mountPropagation)}`)
  }
  if (mode === 'IfPossible') return runtimeSupports
  if (mode === 'Enabled') {
    if (!runtimeSupports) fail(`volume ${JSON.stringify(mount.name)} requested recursive read-only mode, but it is not supported by the runtime`)
    return true
  }
  return fail(`unknown recursive read-only mode ${JSON.stringify(mode)}`)
}

/**
 * The sub path a mount asks for ('' for none), checked as the kubelet checks it when it starts the
 * container: expanded (`subPathExpr`), relative, without `..`.
 */
function subPathOf(pod: Pod, container: Container, mount: VolumeMount): string {
  let subPath = mount.subPath ?? ''
  if (mount.subPathExpr) {
    const expanded = expandSubPathExpr(pod, container, mount.subPathExpr)
    if (!('subPath' in expanded)) throw new ContainerMountsError(`missing value for ${expanded.missing.join(', ')}`)
    subPath = expanded.subPath
  }
  if (subPath === '') return ''
  if (subPath.startsWith('/')) throw new ContainerMountsError(`error SubPath \`${subPath}\` must not be an absolute path`)
  if (subPath.split('/').includes('..')) throw new ContainerMountsError(`unable to provision SubPath \`${subPath}\`: must not contain '..'`)
  return subPath
}

/**
 * The mounts and devices of the container `containerName` (an init, regular or ephemeral container
 * of `pod`), from `volumes`, the manager's mounted volumes of the pod by name
 * (`VolumeManager.getMountedVolumesForPod`). As the kubelet:
 *
 * - `readonly` when the volumeMount says so or the volume's plugin mounts it read-only (configMap,
 *   secret, downwardAPI, projected, a read-only claim);
 * - a subPath (or a `subPathExpr` expanded from the container's `env`) is the bind the manager made
 *   beneath the volume, resolved safely when the volume was mounted
 *   (`<pod>/volume-subpaths/<volume>/<container>/<index>`), never the path joined by name;
 * - `mountPropagation` `None` (or unset) is private, `HostToContainer` host-to-container,
 *   `Bidirectional` bidirectional and only for a privileged container;
 * - `recursiveReadOnly` `Enabled` or `IfPossible` needs `readOnly` and no propagation; see
 *   {@link ContainerMountsOptions.runtimeSupportsRecursiveReadOnly};
 * - `selinuxRelabel` when the plugin manages the volume and it is not mounted with an SELinux context;
 * - a device is the pod's link to the mapped block device, `r` for a read-only claim, else `mrw`.
 *
 * Pure: nothing on the host is read, so the bind of a subPath is where the manager put it once
 * `waitForAttachAndMount(pod)` resolved. Throws {@link ContainerMountsError} with the kubelet's text:
 * a volume that is not mounted yet (`cannot find volume "data" to mount into container "app"`), a
 * subPath refused, a mode refused, a container that is not in the pod.
 */
export function containerMounts(pod: Pod, containerName: string, volumes: ReadonlyMap<string, MountedVolumeInfo>, options: ContainerMountsOptions = {}): ContainerMounts {
  const { list, index, container } = locate(pod, containerName)
  const privileged = container.securityContext?.privileged === true
  const mounts: ContainerMount[] = []
  ;(container.volumeMounts ?? []).forEach((mount, i) => {
    const path: FieldPath = ['spec', list, index, 'volumeMounts', i]
    const volume = volumes.get(mount.name)
    if (!volume?.filesystem) throw new ContainerMountsError(`cannot find volume ${JSON.stringify(mount.name)} to mount into container ${JSON.stringify(container.name)}`)
    const { filesystem } = volume
    const subPath = subPathOf(pod, container, mount)
    let hostPath = filesystem.path
    if (subPath !== '') {
      // The manager binds the sub paths of init and regular containers when it mounts the volume;
      // an ephemeral container may not have one (the API server's rule).
      if (list === 'ephemeralContainers') throw new ContainerMountsError(`spec.${list}[${index}].volumeMounts[${i}].${mount.subPathExpr ? 'subPathExpr' : 'subPath'}: Forbidden: cannot be set for an Ephemeral Container`)
      try {
        hostPath = joinPath(filesystem.subPathsDir, safePathComponent('container name', container.name), String(i))
      } catch (err) {
        throw new ContainerMountsError(`failed to prepare subPath for volumeMount ${JSON.stringify(mount.name)} of container ${JSON.stringify(container.name)}`, { cause: err })
      }
    }
    const containerPath = mount.mountPath.startsWith('/') ? mount.mountPath : `/${mount.mountPath}`
    const propagation = translatePropagation(mount.mountPropagation)
    // The kubelet trusts the API server to have refused Bidirectional in an unprivileged container;
    // a pod from elsewhere is refused here, in the API server's words.
    const refused = mountPropagationErrors(mount, privileged, path)
    if (refused.length > 0) throw new ContainerMountsError(refused.map((e) => e.message).join(', '))
    const recursiveReadOnly = resolveRecursiveReadOnly(mount, options.runtimeSupportsRecursiveReadOnly ?? false)
    mounts.push({
      name: mount.name,
      containerPath,
      hostPath,
      readonly: mount.readOnly === true || filesystem.attributes.readOnly,
      selinuxRelabel: filesystem.attributes.managed && filesystem.attributes.seLinuxRelabel && volume.seLinuxMountContext === '',
      propagation,
      recursiveReadOnly,
    })
  })
  const devices: ContainerDevice[] = []
  for (const device of container.volumeDevices ?? []) {
    if (!device.devicePath.startsWith('/')) throw new ContainerMountsError(`error DevicePath \`${device.devicePath}\` must be an absolute path`)
    const volume = volumes.get(device.name)
    if (!volume?.block) throw new ContainerMountsError(`cannot find volume ${JSON.stringify(device.name)} to pass into container ${JSON.stringify(container.name)}`)
    devices.push({ containerPath: device.devicePath, hostPath: volume.block.devicePath, permissions: volume.readOnly ? 'r' : 'mrw' })
  }
  return { mounts, devices }
}
