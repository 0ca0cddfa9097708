/**
 * The disk layout under kubevol's root directory, shared by every host so that a restart can be
 * reconstructed. It follows the kubelet's layout (SPEC §5.4, §7.1); this module is the only place
 * that knows it.
 *
 * ```
 * <root>/pods/<podUID>/volumes/<escaped plugin>/<volume>         file system volumes
 * <root>/pods/<podUID>/volumeDevices/<escaped plugin>/<volume>   block volumes
 * <root>/pods/<podUID>/volume-subpaths/<volume>/<container>/<i>  subPath binds
 * <root>/pods/<podUID>/plugins/<escaped plugin>/...              per-pod plugin data
 * <root>/plugins/<plugin>/...                                     global (device) mounts, CSI staging
 * ```
 *
 * Every pod UID and volume name joined here must be exactly one path component: a function given
 * `..`, `a/b` or an empty name throws rather than build a path that leaves the pod's directory.
 * Pods are validated long before this (`validatePodPathNames`); this is the last line of defence.
 */
import { pathComponentError } from './api/field-errors.js'

/** `kubernetes.io/empty-dir` → `kubernetes.io~empty-dir` (`/` is not allowed in one path element). */
export function escapePluginName(pluginName: string): string {
  return pluginName.replaceAll('/', '~')
}

/** The inverse of {@link escapePluginName}. */
export function unescapePluginName(escaped: string): string {
  return escaped.replaceAll('~', '/')
}

/** Joins absolute path parts with single slashes. */
export function joinPath(...parts: string[]): string {
  // Hot (every path kubevol builds): concatenate, and normalize only when there is something to fix.
  let joined = ''
  for (const part of parts) {
    if (part === '') continue
    joined = joined === '' ? part : `${joined}/${part}`
  }
  if (joined.includes('//')) joined = joined.replace(/\/+/g, '/')
  return joined.length > 1 && joined.endsWith('/') ? joined.slice(0, -1) : joined
}

/** The parent directory of an absolute path (`/` for `/x`). */
export function dirname(path: string): string {
  const i = path.lastIndexOf('/')
  return i <= 0 ? '/' : path.slice(0, i)
}

/** The last element of a path. */
export function basename(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1)
}

/**
 * Returns `value` when it is exactly one path component, else throws naming `what` (e.g. "pod UID")
 * and the reason. Used by {@link createPaths} on every UID and name it joins.
 */
export function safePathComponent(what: string, value: string): string {
  const reason = typeof value === 'string' ? pathComponentError(value) : 'must be a string'
  if (reason) throw new Error(`refusing ${what} ${JSON.stringify(value)} as a path component: it ${reason}`)
  return value
}

/** Paths under one root directory. */
export interface Paths {
  readonly root: string
  readonly podsDir: string
  podDir(podUID: string): string
  podVolumesDir(podUID: string): string
  podVolumeDir(podUID: string, pluginName: string, volumeName: string): string
  podVolumeDevicesDir(podUID: string): string
  podVolumeDeviceDir(podUID: string, pluginName: string): string
  podPluginDir(podUID: string, pluginName: string): string
  podSubPathsDir(podUID: string, volumeName: string): string
  pluginDir(pluginName: string): string
  volumeDevicePluginDir(pluginName: string): string
}

/**
 * The layout under `root`.
 * @param root absolute path, e.g. `/var/lib/kubevol` (the kubelet's is `/var/lib/kubelet`)
 */
export function createPaths(root: string): Paths {
  if (!root.startsWith('/')) throw new Error(`root directory must be an absolute path, got "${root}"`)
  const base = joinPath(root)
  const podsDir = joinPath(base, 'pods')
  const podDir = (uid: string): string => joinPath(podsDir, safePathComponent('pod UID', uid))
  const volume = (name: string): string => safePathComponent('volume name', name)
  return {
    root: base,
    podsDir,
    podDir,
    podVolumesDir: (uid) => joinPath(podDir(uid), 'volumes'),
    podVolumeDir: (uid, plugin, vol) => joinPath(podDir(uid), 'volumes', escapePluginName(plugin), volume(vol)),
    podVolumeDevicesDir: (uid) => joinPath(podDir(uid), 'volumeDevices'),
    podVolumeDeviceDir: (uid, plugin) => joinPath(podDir(uid), 'volumeDevices', escapePluginName(plugin)),
    podPluginDir: (uid, plugin) => joinPath(podDir(uid), 'plugins', escapePluginName(plugin)),
    podSubPathsDir: (uid, vol) => joinPath(podDir(uid), 'volume-subpaths', volume(vol)),
    pluginDir: (plugin) => joinPath(base, 'plugins', plugin),
    volumeDevicePluginDir: (plugin) => joinPath(base, 'plugins', plugin, 'volumeDevices'),
  }
}
