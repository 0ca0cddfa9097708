/**
 * A container's mounts as entries of an OCI runtime spec (`config.json`'s `mounts`), the way
 * containerd's CRI plugin writes them for runc and crun: a recursive bind, the propagation, `ro` or
 * `rw`, and `rro` for a recursive read-only mount.
 */
import type { ContainerMount, MountPropagation } from './container-mounts.js'

/** One entry of an OCI runtime spec's `mounts`. */
export interface OciMount {
  readonly destination: string
  readonly type: 'bind'
  readonly source: string
  readonly options: readonly string[]
}

const OCI_PROPAGATION: Readonly<Record<MountPropagation, string>> = {
  PROPAGATION_PRIVATE: 'rprivate',
  PROPAGATION_HOST_TO_CONTAINER: 'rslave',
  PROPAGATION_BIDIRECTIONAL: 'rshared',
}

/**
 * The OCI `mounts` entries of a container's mounts, in their order: `bind` with
 * `rbind`, `rprivate` / `rslave` / `rshared`, `ro` or `rw`, and `rro` when the mount is recursively
 * read-only (the runtime needs Linux 5.12 for it). SELinux relabelling is the runtime's to do
 * (`selinuxRelabel`); it has no option here.
 */
export function ociMounts(mounts: readonly ContainerMount[]): OciMount[] {
  return mounts.map((m) => ({
    destination: m.containerPath,
    type: 'bind',
    source: m.hostPath,
    options: ['rbind', OCI_PROPAGATION[m.propagation], m.readonly ? 'ro' : 'rw', ...(m.recursiveReadOnly ? ['rro'] : [])],
  }))
}

/**
 * The `linux.rootfsPropagation` the mounts need, or undefined for the runtime's default: a
 * host-to-container mount receives the host's later mounts only when the container's mount tree is
 * a slave of the host's (`rslave`), a bidirectional one only when it is shared (`rshared`), as
 * containerd sets it. The volume's directory on the host must itself be on a shared mount (a
 * kubelet makes its root directory `rshared`).
 */
export function ociRootfsPropagation(mounts: readonly ContainerMount[]): 'rslave' | 'rshared' | undefined {
  if (mounts.some((m) => m.propagation === 'PROPAGATION_BIDIRECTIONAL')) return 'rshared'
  if (mounts.some((m) => m.propagation === 'PROPAGATION_HOST_TO_CONTAINER')) return 'rslave'
  return undefined
}
