import { describe, expect, it } from 'vitest'
import type { VolumeSpec } from '../../api/volume-spec.js'
import { createTestPluginManager } from '../../testing/plugin-context.js'
import { createBuiltinPlugins } from '../builtin.js'
import { FILE_DISK_DRIVER } from '../file-disk.js'
import { createCsiPlugin } from './csi-plugin.js'
import { createCsiDriverRegistry } from './driver-registry.js'
import { attachmentName, ephemeralVolumeHandle } from './requests.js'
import { sha256Hex } from './sha256.js'

const pvSpec = (driver: string, volumeMode = 'Filesystem'): VolumeSpec => ({
  name: 'pv-1',
  persistentVolume: { metadata: { name: 'pv-1' }, spec: { volumeMode, csi: { driver, volumeHandle: 'h-1' } } },
  readOnly: false,
})
const inlineSpec: VolumeSpec = { name: 'scratch', volume: { name: 'scratch', csi: { driver: 'd.example.com' } }, readOnly: false }

describe('the CSI plugin beside the built-in plugins', () => {
  const manager = createTestPluginManager([...createBuiltinPlugins(), createCsiPlugin({ drivers: createCsiDriverRegistry() })])

  it.each([
    { name: 'a CSI PV', spec: pvSpec('d.example.com'), plugin: 'kubernetes.io/csi' },
    { name: 'an inline CSI volume', spec: inlineSpec, plugin: 'kubernetes.io/csi' },
    { name: `the reserved ${FILE_DISK_DRIVER} driver`, spec: pvSpec(FILE_DISK_DRIVER), plugin: 'kubevol.io/file-disk' },
  ])('$name goes to $plugin', ({ spec, plugin }) => {
    expect(manager.findPluginBySpec(spec).name).toBe(plugin)
  })

  it('claims raw block CSI volumes, with the kubelet\'s volumeDevices paths', () => {
    const block = pvSpec('d.example.com', 'Block')
    const csi = manager.findPluginBySpec(block)
    expect(csi.name).toBe('kubernetes.io/csi')
    expect(csi.deviceMount?.canDeviceMount(block)).toBe(true)
    expect(csi.deviceMount?.getDeviceMountPath(block)).toBe('/var/lib/kubevol/plugins/kubernetes.io/csi/volumeDevices/staging/pv-1')
    const mapper = csi.block?.newBlockVolumeMapper(block, { metadata: { uid: 'u1' } })
    expect(mapper?.getGlobalMapPath(block)).toBe('/var/lib/kubevol/plugins/kubernetes.io/csi/volumeDevices/pv-1/dev')
    expect(mapper?.getPodDeviceMapPath()).toEqual({ dir: '/var/lib/kubevol/pods/u1/volumeDevices/kubernetes.io~csi', linkName: 'pv-1' })
    expect(() => csi.block?.newBlockVolumeMapper(inlineSpec, { metadata: { uid: 'u1' } })).toThrow('is not a CSI persistent volume')
  })

  it('names volumes and paths as the kubelet does', () => {
    const csi = manager.findPluginByName('kubernetes.io/csi')
    expect(csi.getVolumeName(pvSpec('d.example.com'))).toBe('d.example.com^h-1')
    expect(csi.deviceMount?.getDeviceMountPath(pvSpec('d.example.com'))).toBe(`/var/lib/kubevol/plugins/kubernetes.io/csi/d.example.com/${sha256Hex('h-1')}/globalmount`)
    expect(csi.deviceMount?.canDeviceMount(inlineSpec)).toBe(false)
    expect(csi.attach?.canAttach(inlineSpec)).toBe(false)
    expect(csi.newMounter(inlineSpec, { metadata: { uid: 'u1' } }).getPath()).toBe('/var/lib/kubevol/pods/u1/volumes/kubernetes.io~csi/scratch/mount')
    expect(ephemeralVolumeHandle('u1', 'scratch')).toBe(`csi-${sha256Hex('u1scratch')}`)
    expect(attachmentName('h-1', 'd.example.com', 'node-1')).toBe(`csi-${sha256Hex('h-1d.example.comnode-1')}`)
  })

  it('attaches by default, as the kubelet does without a CSIDriver object', () => {
    expect(manager.findAttachablePluginBySpec(pvSpec('d.example.com'))?.name).toBe('kubernetes.io/csi')
  })
})
