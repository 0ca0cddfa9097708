/**
 * The SELinux file label a volume is mounted with (`-o context=...`, SPEC §3.2.1), for the
 * ReadWriteOncePod case the kubelet enables by default (SELinuxMountReadWriteOncePod).
 */
import type { SELinuxOptions } from './kubernetes.js'

/** The file label for a container's options: their user, role and level, the container file type. */
export function fileLabelOf(options: SELinuxOptions): string {
  if (!options.user && !options.role && !options.type && !options.level) return ''
  return `${options.user || 'system_u'}:${options.role || 'object_r'}:container_file_t:${options.level || 's0'}`
}

/**
 * The label a volume is mounted with for one pod: empty unless SELinux is enabled, the plugin can
 * mount with a context, the volume is ReadWriteOncePod only, and the pod's seLinuxChangePolicy is not
 * Recursive. Throws when the containers of the pod ask for different labels.
 */
export function volumeSELinuxLabel(input: {
  readonly enabled: boolean
  readonly pluginSupports: boolean
  readonly accessModes: readonly string[]
  readonly changePolicy: string | undefined
  readonly containerOptions: readonly SELinuxOptions[]
  readonly volumeName: string
}): string {
  const labels = new Set(input.containerOptions.map(fileLabelOf))
  const eligible =
    input.enabled &&
    input.pluginSupports &&
    input.accessModes.length === 1 &&
    input.accessModes[0] === 'ReadWriteOncePod' &&
    input.changePolicy !== 'Recursive'
  if (!eligible) return ''
  if (labels.size > 1) throw new Error(`volume ${input.volumeName} is used with two different SELinux contexts in the same pod`)
  return [...labels][0] ?? ''
}
