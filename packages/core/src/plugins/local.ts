/**
 * local (`kubernetes.io/local-volume`, SPEC §7.5): a PV naming a directory or a block device of this
 * node (`spec.local.path`), tied to the node by its node affinity (checked before mounting).
 *
 * A directory is bound straight into the pod. A device is formatted if blank and mounted once at
 * `plugins/kubernetes.io/local-volume/mounts/<pv>`, then bound into each pod. Whether the path is a
 * device is decided by the PV: `spec.local.fsType` set means a device (the kubelet decides by a stat;
 * the plugin interface decides without I/O). `volumeMode: Block` maps the device into the pod.
 */
import type { VolumeSpec } from '../api/volume-spec.js'
import { mountOptionsOf } from '../api/volume-spec.js'
import { joinPath } from '../paths.js'
import type { DeviceMountCapability, VolumePlugin, VolumePluginContext } from './plugin.js'
import { createBindMounter, createBindUnmounter } from './util/bind-into-pod.js'
import { globalDeviceMount } from './util/safe-format-and-mount.js'

export const LOCAL_PLUGIN_NAME = 'kubernetes.io/local-volume'

function localOf(spec: VolumeSpec): { path: string; fsType?: string } | undefined {
  return spec.persistentVolume?.spec?.local
}

export function createLocalPlugin(): VolumePlugin {
  let context: VolumePluginContext
  let deviceMount: DeviceMountCapability | undefined
  const globalPath = (spec: VolumeSpec): string => joinPath(context.paths.pluginDir(LOCAL_PLUGIN_NAME), 'mounts', spec.name)
  const mapPath = (spec: VolumeSpec): string => joinPath(context.paths.volumeDevicePluginDir(LOCAL_PLUGIN_NAME), spec.name)
  const pluginData = (podUID: string, name: string): string => joinPath(context.paths.podPluginDir(podUID, LOCAL_PLUGIN_NAME), name)
  const isDevice = (spec: VolumeSpec): boolean => Boolean(localOf(spec)?.fsType) && spec.persistentVolume?.spec?.volumeMode !== 'Block'

  return {
    name: LOCAL_PLUGIN_NAME,
    init(ctx) {
      context = ctx
    },
    canSupport: (spec) => localOf(spec) !== undefined,
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
        source: () => (isDevice(spec) ? globalPath(spec) : local.path),
        dir: context.paths.podVolumeDir(podUID, LOCAL_PLUGIN_NAME, spec.name),
        readOnly: spec.readOnly,
        mountOptions: mountOptionsOf(spec),
        fsGroupRecord: joinPath(pluginData(podUID, spec.name), 'fsgroup'),
      })
    },
    newUnmounter(innerName, podUID) {
      return createBindUnmounter(context, context.paths.podVolumeDir(podUID, LOCAL_PLUGIN_NAME, innerName), pluginData(podUID, innerName))
    },
    // Made on first use: the host is known only once the plugin manager has called init.
    get deviceMount() {
      return (deviceMount ??= globalDeviceMount(context.host, {
        canDeviceMount: isDevice,
        getDeviceMountPath: globalPath,
        device: (spec) => {
          const local = localOf(spec)
          if (!local) throw new Error(`volume ${spec.name} is not a local volume`)
          return local.path
        },
        fstype: (spec) => localOf(spec)?.fsType,
      }))
    },
    block: {
      newBlockVolumeMapper(spec, pod) {
        const podUID = pod.metadata.uid ?? ''
        return {
          getGlobalMapPath: mapPath,
          getPodDeviceMapPath: () => ({ dir: context.paths.podVolumeDeviceDir(podUID, LOCAL_PLUGIN_NAME), linkName: spec.name }),
          mapPodDevice: async () => localOf(spec)?.path ?? '',
        }
      },
      newBlockVolumeUnmapper(innerName, podUID) {
        return {
          getGlobalMapPath: mapPath,
          getPodDeviceMapPath: () => ({ dir: context.paths.podVolumeDeviceDir(podUID, LOCAL_PLUGIN_NAME), linkName: innerName }),
        }
      },
    },
  }
}
