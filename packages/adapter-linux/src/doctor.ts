/**
 * Checks of where the agent runs (for `kubevol doctor`): the host's mount namespace, and a root
 * directory on a shared mount so that the volumes mounted below it propagate into containers.
 */
import { readlink } from 'node:fs/promises'
import type { LinuxHost } from './linux-host.js'
import { containingMount } from './mountinfo.js'

/** One finding. */
export interface HostCheck {
  readonly name: 'mount-namespace' | 'root-propagation'
  readonly ok: boolean
  readonly message: string
}

/**
 * True when this process shares the mount namespace of PID 1. A kubevol agent in a private
 * namespace mounts volumes that neither the container runtime nor the pods can see.
 */
export async function checkMountNamespace(): Promise<HostCheck> {
  const [self, init] = await Promise.all([readlink('/proc/self/ns/mnt'), readlink('/proc/1/ns/mnt').catch(() => undefined)])
  if (init === undefined) return { name: 'mount-namespace', ok: false, message: 'cannot read /proc/1/ns/mnt (not root, or /proc of another PID namespace)' }
  return self === init
    ? { name: 'mount-namespace', ok: true, message: `running in the host mount namespace (${self})` }
    : { name: 'mount-namespace', ok: false, message: `running in mount namespace ${self}, the host's is ${init}: volumes would not be visible to containers` }
}

/**
 * True when the mount that holds `root` (the kubevol root directory, canonical) is shared. It
 * must be (`mount --make-rshared /`, or a bind of the root made rshared) for the volumes mounted
 * below it to propagate into the containers' mount namespaces, as the kubelet requires.
 */
export async function checkRootPropagation(host: LinuxHost, root: string): Promise<HostCheck> {
  const entry = containingMount(await host.mounts(), root)
  if (!entry) return { name: 'root-propagation', ok: false, message: `no mount holds ${root}` }
  const ok = entry.propagation === 'shared'
  return {
    name: 'root-propagation',
    ok,
    message: ok
      ? `${root} is on the shared mount ${entry.target}`
      : `${root} is on the ${entry.propagation} mount ${entry.target}: run \`mount --make-rshared ${entry.target}\` so volumes reach containers`,
  }
}
