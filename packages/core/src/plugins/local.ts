/**
 * local (`kubernetes.io/local-volume`, SPEC §7.5): a PV naming a directory or a block device of this
 * node (`spec.local.path`), tied to the node by its node affinity (checked before mounting).
 *
 * As the kubelet's plugin, it is device-mountable whatever the path: a local PV has one unique name,
 * `kubernetes.io/local-volume/<pv>`, shared by every pod that uses it, and a "device mount path":
 * - a directory is its own device mount path: nothing is mounted for the device, and each pod gets
 *   a bind of the directory;
 * - a device is formatted if blank and mounted once at `plugins/kubernetes.io/local-volume/mounts/<pv>`,
 *   bound into each pod, and unmounted when the last pod is gone.
 * Whether the path is a device is decided by the PV: `spec.local.fsType` set means a device (the
 * kubelet decides by a stat; the plugin interface decides without I/O). `volumeMode: Block` maps
 * the device into the pod.
 */
import type { VolumeSpec } from '../api/volume-spec.js'
import { mountOptionsOf } from '../api/volume-spec.js'
import { joinPath } from '../paths.js'
import type { BlockCapability, DeviceMountCapability, VolumePlugin, VolumePluginContext } from './plugin.js'
import { createBindMounter, createBindUnmounter } from './util/bind-into-pod.js'
import { cleanupMountPoint, mountReferences } from './util/cleanup-mount-point.js'
import { mountDeviceAt } from './util/safe-format-and-mount.js'

export const LOCAL_PLUGIN_NAME = 'kubernetes.io/local-volume'

function localOf(spec: VolumeSpec): { path: string; fsType?: string } | undefined {
  return spec.persistentVolume?.spec?.local
}

/** The kubelet's `getGlobalLocalPath` error for a spec without a path (a reconstructed directory). */
function localPathOf(spec: VolumeSpec): string {
  const path = localOf(spec)?.path
  if (!path) throw new Error('local volume source is nil or local path is not set')
  return path
}

const isDevice = (spec: VolumeSpec): boolean => Boolean(localOf(spec)?.fsType) && spec.persistentVolume?.spec?.volumeMode !== 'Block'

/** Where the plugin keeps a local volume's global mount and block map path, under the context's paths. */
interface LocalPaths {
  globalPath(spec: VolumeSpec): string
  mapPath(spec: VolumeSpec): string
  /** True for a path under the plugin's own `mounts` directory. */
  isGlobalMount(path: string): boolean
}

function localPaths(context: () => VolumePluginContext): LocalPaths {
  const mountsDir = (): string => joinPath(context().paths.pluginDir(LOCAL_PLUGIN_NAME), 'mounts')
  return {
    globalPath: (spec) => joinPath(mountsDir(), spec.name),
    mapPath: (spec) => joinPath(context().paths.volumeDevicePluginDir(LOCAL_PLUGIN_NAME), spec.name),
    isGlobalMount: (path) => path.startsWith(`${mountsDir()}/`),
  }
}

export function createLocalPlugin(): VolumePlugin {
  let context: VolumePluginContext
  let deviceMount: DeviceMountCapability | undefined
  const paths = localPaths(() => context)
  const pluginData = (podUID: string, name: string): string => joinPath(context.paths.podPluginDir(podUID, LOCAL_PLUGIN_NAME), name)

  return {
    name: LOCAL_PLUGIN_NAME,
    init(ctx) {
      context = ctx
    },
    canSupport: (spec) => localOf(spec) !== undefined,
    // Only a PV is a local volume: its name is unique on the node.
    getVolumeName: (spec) => spec.name,
    requiresRemount: () => false,
    supportsMountOption: () => true,
    supportsSELinuxContextMount: () => true,
    newMounter(spec, pod) {
      const local = localOf(spec)
      if (!local) throw new Error(`volume ${spec.name} is not a local volume`)
      if (local.path.split('/').includes('..')) throw new Error(`invalid path: ${local.path} must not contain '..'`)
      const podUID = pod.metadata.uid ?? ''
      return createBindMounter({
        context,
        pluginName: LOCAL_PLUGIN_NAME,
        pod,
        source: () => (isDevice(spec) ? paths.globalPath(spec) : local.path),
        dir: context.paths.podVolumeDir(podUID, LOCAL_PLUGIN_NAME, spec.name),
        readOnly: spec.readOnly,
        mountOptions: mountOptionsOf(spec),
        fsGroupRecord: joinPath(pluginData(podUID, spec.name), 'fsgroup'),
      })
    },
    newUnmounter(innerName, podUID) {
      return createBindUnmounter(context, context.paths.podVolumeDir(podUID, LOCAL_PLUGIN_NAME, innerName), pluginData(podUID, innerName))
    },
    /**
     * The kubelet's ConstructVolumeSpec: a pod mount that shows the global mount of a device names
     * that device (and its filesystem); for a directory the path stays empty, which is enough to
     * tear the pod's bind down and leaves the directory alone.
     */
    async constructVolumeSpec(innerName, mountPath) {
      let path = ''
      let fsType: string | undefined
      const global = (await mountReferences(context.host, mountPath)).find(paths.isGlobalMount)
      if (global) {
        const entry = (await context.host.mounts()).find((m) => m.target === global)
        path = entry?.source ?? ''
        fsType = entry?.fstype
      }
      return {
        name: innerName,
        readOnly: false,
        persistentVolume: {
          metadata: { name: innerName },
          spec: { local: { path, ...(fsType ? { fsType } : {}) }, volumeMode: 'Filesystem' },
        },
      }
    },
    // Made on first use: the host is known only once the plugin manager has called init.
    get deviceMount() {
      return (deviceMount ??= createLocalDeviceMount(context, paths))
    },
    block: createLocalBlock(() => context, paths),
  }
}

/** A device is formatted if blank and mounted at its global path; a directory is its own device mount path. */
function createLocalDeviceMount(context: VolumePluginContext, paths: LocalPaths): DeviceMountCapability {
  return {
    // The kubelet's CanDeviceMount is true for every local volume: one unique name per PV.
    canDeviceMount: () => true,
    getDeviceMountPath: (spec) => (isDevice(spec) ? paths.globalPath(spec) : localPathOf(spec)),
    async mountDevice(spec, _devicePath, deviceMountPath, args) {
      const path = localPathOf(spec)
      if (isDevice(spec)) {
        await mountDeviceAt(context.host, path, deviceMountPath, {
          fstype: localOf(spec)?.fsType,
          readOnly: spec.readOnly,
          mountOptions: mountOptionsOf(spec),
          seLinuxLabel: args.seLinuxLabel,
        })
        return
      }
      // A directory is used where it is; the kubelet only checks what the path is.
      const info = await context.host.stat(path)
      if (!info) throw new Error(`path "${path}" does not exist`)
      if (info.type !== 'directory') throw new Error(`only directory and block device are supported (${path} is a ${info.type})`)
    },
    // Only kubevol's own global mount is ever unmounted: a directory's device mount path is the
    // node's directory itself, which stays as it is (the kubelet's UnmountDevice does the same).
    async unmountDevice(deviceMountPath) {
      if (paths.isGlobalMount(deviceMountPath)) await cleanupMountPoint(context.host, deviceMountPath)
    },
    getDeviceMountRefs: (deviceMountPath) => mountReferences(context.host, deviceMountPath),
  }
}

/** `volumeMode: Block`: the node's device is mapped into the pod. */
function createLocalBlock(context: () => VolumePluginContext, paths: LocalPaths): BlockCapability {
  const podDeviceMapPath = (podUID: string, linkName: string) => ({ dir: context().paths.podVolumeDeviceDir(podUID, LOCAL_PLUGIN_NAME), linkName })
  return {
    newBlockVolumeMapper(spec, pod) {
      const podUID = pod.metadata.uid ?? ''
      return {
        getGlobalMapPath: paths.mapPath,
        getPodDeviceMapPath: () => podDeviceMapPath(podUID, spec.name),
        mapPodDevice: async () => localOf(spec)?.path ?? '',
      }
    },
    newBlockVolumeUnmapper(innerName, podUID) {
      return {
        getGlobalMapPath: paths.mapPath,
        getPodDeviceMapPath: () => podDeviceMapPath(podUID, innerName),
      }
    },
  }
}
