/**
 * A pod's life on a node, the runtime's half: wait until the volume manager has mounted the pod's
 * volumes, give each container its mounts and devices in a config.json, run it, and when the
 * containers are gone, let the manager unmount the volumes.
 */
import { join } from 'node:path'
import { type Container, type MemoryPodSource, type Pod, type VolumeManager, containerMounts } from '@kubevol/core'
import { writeBundle } from './bundle.js'
import { type ContainerExit, type RuntimeOptions, startContainer } from './container.js'

export interface RunPodOptions {
  readonly manager: VolumeManager
  /** The manager's pod source: the pod is added to it, and deleted once its containers exited. */
  readonly pods: Pick<MemoryPodSource, 'setPod' | 'deletePod'>
  /** Every container's root file system (this example has one image). */
  readonly rootfs: string
  /** Where the bundles are written: `<dir>/<pod uid>/<container>`. */
  readonly bundlesDir: string
  readonly runtime?: RuntimeOptions
  /**
   * The runtime makes recursive read-only mounts (`rro`: crun and runc on Linux 5.12 or later).
   * @default true
   */
  readonly recursiveReadOnly?: boolean
}

/** The process of a container: its `command` and `args`, the `env` values it sets, and whether it is privileged. */
function processOf(container: Container) {
  const c = container as Container & { command?: string[]; args?: string[] }
  const env: Record<string, string> = {}
  for (const e of container.env ?? []) if (e.value !== undefined) env[e.name] = e.value
  return { args: [...(c.command ?? ['/bin/sh']), ...(c.args ?? [])], env, privileged: container.securityContext?.privileged === true }
}

/**
 * Runs `pod`: its init containers one after the other (each must exit 0), then its containers
 * together, until they all exited. Resolves with every container's exit once the pod's volumes
 * are unmounted again.
 */
export async function runPod(pod: Pod, options: RunPodOptions): Promise<ContainerExit[]> {
  const { manager, pods } = options
  const uid = pod.metadata.uid as string
  pods.setPod(pod)
  // 1. Wait: every volume a container names is mounted (or the kubelet's error, after 2 min 3 s).
  await manager.waitForAttachAndMount(pod)
  const run = (container: Container) => {
    // 2. Mounts: the container's volumes in the CRI's shape, from what the manager mounted.
    const { mounts, devices } = containerMounts(pod, container.name, manager.getMountedVolumesForPod(pod), {
      runtimeSupportsRecursiveReadOnly: options.recursiveReadOnly ?? true,
    })
    // 3. config.json: the mounts as OCI bind mounts, the devices as device nodes.
    const bundle = writeBundle(join(options.bundlesDir, uid, container.name), {
      rootfs: options.rootfs,
      hostname: pod.metadata.name ?? uid,
      mounts,
      devices,
      ...processOf(container),
    })
    // 4. Run it.
    return startContainer(`${uid}-${container.name}`, bundle, options.runtime).exited
  }
  const exits: ContainerExit[] = []
  try {
    for (const init of pod.spec?.initContainers ?? []) {
      const exit = await run(init)
      exits.push(exit)
      if (exit.exitCode !== 0) throw new Error(`init container ${init.name} exited with ${exit.exitCode}: ${exit.stderr.trim()}`)
    }
    exits.push(...(await Promise.all((pod.spec?.containers ?? []).map(run))))
  } finally {
    // 5. Delete: the containers are gone, so the manager may unmount the pod's volumes.
    pods.deletePod(uid)
    // 6. Wait for unmount: nothing of the pod is mounted any more.
    await manager.waitForUnmount(pod)
  }
  return exits
}
