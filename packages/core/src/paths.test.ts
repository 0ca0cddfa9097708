import { describe, expect, it } from 'vitest'
import { createPaths, escapePluginName, joinPath, unescapePluginName } from './paths.js'

describe('paths', () => {
  const paths = createPaths('/var/lib/kubevol/')

  it.each([
    ['podVolumeDir', paths.podVolumeDir('u1', 'kubernetes.io/empty-dir', 'cache'), '/var/lib/kubevol/pods/u1/volumes/kubernetes.io~empty-dir/cache'],
    ['podVolumeDeviceDir', paths.podVolumeDeviceDir('u1', 'kubernetes.io/csi'), '/var/lib/kubevol/pods/u1/volumeDevices/kubernetes.io~csi'],
    ['podPluginDir', paths.podPluginDir('u1', 'kubernetes.io/empty-dir'), '/var/lib/kubevol/pods/u1/plugins/kubernetes.io~empty-dir'],
    ['podSubPathsDir', paths.podSubPathsDir('u1', 'data'), '/var/lib/kubevol/pods/u1/volume-subpaths/data'],
    ['pluginDir', paths.pluginDir('kubernetes.io/csi'), '/var/lib/kubevol/plugins/kubernetes.io/csi'],
    ['volumeDevicePluginDir', paths.volumeDevicePluginDir('kubernetes.io/csi'), '/var/lib/kubevol/plugins/kubernetes.io/csi/volumeDevices'],
  ])('%s follows the kubelet layout', (_name, actual, expected) => {
    expect(actual).toBe(expected)
  })

  it('escapes plugin names both ways', () => {
    expect(escapePluginName('kubernetes.io/csi')).toBe('kubernetes.io~csi')
    expect(unescapePluginName('kubernetes.io~csi')).toBe('kubernetes.io/csi')
  })

  it.each([
    [['/a', 'b'], '/a/b'],
    [['/a/', '/b/'], '/a/b'],
    [['/', 'x'], '/x'],
    [['/'], '/'],
    [['', '/a', '', 'b'], '/a/b'],
    [['a//b', 'c///'], 'a/b/c'],
    [['//'], '/'],
    [[], ''],
  ])('joinPath(%j) is %j', (parts, expected) => {
    expect(joinPath(...parts)).toBe(expected)
  })

  it('refuses a relative root', () => {
    expect(() => createPaths('var/lib')).toThrow('root directory must be an absolute path, got "var/lib"')
  })
})
