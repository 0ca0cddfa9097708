/**
 * Names and keys (SPEC §3.1): unique pod and volume names, and which pod volumes containers use.
 */
import type { Container, Pod, SELinuxOptions } from './kubernetes.js'

/** The pod's UID as a string. */
export type UniquePodName = string

/**
 * `<plugin>/<volume name>` for volumes with a shared device (attachable or device-mountable),
 * `<plugin>/<pod uid>-<inner name>` for per-pod volumes.
 */
export type UniqueVolumeName = string

/** The unique name of a pod: its UID. Throws when the pod has none. */
export function uniquePodName(pod: Pod): UniquePodName {
  const uid = pod.metadata.uid
  if (!uid) throw new Error(`pod ${podDescription(pod)} has no metadata.uid`)
  return uid
}

/** `namespace/name` for messages. */
export function podDescription(pod: Pod): string {
  return `${pod.metadata.namespace ?? 'default'}/${pod.metadata.name ?? '<unnamed>'}`
}

/** The unique name of a volume whose device is shared by every pod using it. */
export function uniqueVolumeNameFromDevice(pluginName: string, deviceName: string): UniqueVolumeName {
  return `${pluginName}/${deviceName}`
}

/** The unique name of a volume that belongs to one pod. */
export function uniqueVolumeNameForPod(pluginName: string, podName: UniquePodName, innerName: string): UniqueVolumeName {
  return `${pluginName}/${podName}-${innerName}`
}

/**
 * Splits `domain/plugin/volume` into plugin name and volume name on the first two slashes
 * (plugin names have exactly one slash). Null when the name has fewer than two slashes.
 */
export function splitUniqueVolumeName(name: UniqueVolumeName): { pluginName: string; volumeName: string } | null {
  const first = name.indexOf('/')
  if (first < 0) return null
  const second = name.indexOf('/', first + 1)
  if (second < 0) return null
  return { pluginName: name.slice(0, second), volumeName: name.slice(second + 1) }
}

/** Volume names a pod's containers use, with the SELinux options of the containers using each. */
export interface PodVolumeNames {
  readonly mounts: ReadonlySet<string>
  readonly devices: ReadonlySet<string>
  readonly seLinuxOptions: ReadonlyMap<string, readonly SELinuxOptions[]>
}

/**
 * The names of the volumes used by `volumeMounts` and `volumeDevices` of all containers, init and
 * ephemeral containers included (kubelet `GetPodVolumeNames`). Unused pod volumes are not listed.
 */
export function getPodVolumeNames(pod: Pod): PodVolumeNames {
  const mounts = new Set<string>()
  const devices = new Set<string>()
  const seLinuxOptions = new Map<string, SELinuxOptions[]>()
  const podOptions = pod.spec?.securityContext?.seLinuxOptions
  const visit = (container: Container): void => {
    const options = { ...podOptions, ...container.securityContext?.seLinuxOptions }
    const use = (name: string): void => {
      const list = seLinuxOptions.get(name) ?? []
      list.push(options)
      seLinuxOptions.set(name, list)
    }
    for (const m of container.volumeMounts ?? []) {
      mounts.add(m.name)
      use(m.name)
    }
    for (const d of container.volumeDevices ?? []) {
      devices.add(d.name)
      use(d.name)
    }
  }
  for (const c of pod.spec?.initContainers ?? []) visit(c)
  for (const c of pod.spec?.containers ?? []) visit(c)
  for (const c of pod.spec?.ephemeralContainers ?? []) visit(c)
  return { mounts, devices, seLinuxOptions }
}

/** Names used by any container as a mount or a device, sorted. */
export function expectedVolumeNames(pod: Pod): string[] {
  // The names alone: asked for each pod a caller waits on, without the SELinux options per name.
  const names = new Set<string>()
  const visit = (containers: readonly Container[] | undefined): void => {
    for (const container of containers ?? []) {
      for (const m of container.volumeMounts ?? []) names.add(m.name)
      for (const d of container.volumeDevices ?? []) names.add(d.name)
    }
  }
  visit(pod.spec?.initContainers)
  visit(pod.spec?.containers)
  visit(pod.spec?.ephemeralContainers)
  return [...names].sort()
}
