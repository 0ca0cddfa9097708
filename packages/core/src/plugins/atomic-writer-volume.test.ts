import { describe, expect, it } from 'vitest'
import type { Volume } from '../api/kubernetes.js'
import { NotFoundError } from '../errors.js'
import { specFromVolume } from '../api/volume-spec.js'
import { createTestPluginManager } from '../testing/plugin-context.js'
import { readReferencedObject } from './atomic-writer-volume.js'
import { createConfigMapPlugin } from './config-map.js'
import { createDownwardAPIPlugin } from './downward-api.js'
import { createProjectedPlugin } from './projected.js'
import { createSecretPlugin } from './secret.js'

const volumes: Record<string, Volume> = {
  configMap: { name: 'v', configMap: { name: 'cm' } },
  secret: { name: 'v', secret: { secretName: 's' } },
  downwardAPI: { name: 'v', downwardAPI: { items: [] } },
  projected: { name: 'v', projected: { sources: [] } },
  emptyDir: { name: 'v', emptyDir: {} },
}

describe.each([
  { name: 'kubernetes.io/configmap', create: createConfigMapPlugin, key: 'configMap' },
  { name: 'kubernetes.io/secret', create: createSecretPlugin, key: 'secret' },
  { name: 'kubernetes.io/downward-api', create: createDownwardAPIPlugin, key: 'downwardAPI' },
  { name: 'kubernetes.io/projected', create: createProjectedPlugin, key: 'projected' },
])('$name', ({ name, create, key }) => {
  const plugin = create()
  createTestPluginManager([plugin])

  it('supports exactly its own volume source', () => {
    const supported = Object.entries(volumes)
      .filter(([, v]) => plugin.canSupport(specFromVolume(v)))
      .map(([k]) => k)
    expect(supported).toEqual([key])
    expect(plugin.canSupport({ name: 'pv', persistentVolume: { metadata: { name: 'pv' }, spec: {} }, readOnly: false })).toBe(false)
  })

  it('is a per-pod, remounted, read-only volume without mount options', () => {
    const spec = specFromVolume(volumes[key] as Volume)
    expect(plugin.name).toBe(name)
    expect(plugin.getVolumeName(spec)).toBe('v')
    expect(plugin.requiresRemount(spec)).toBe(true)
    expect(plugin.supportsMountOption()).toBe(false)
    expect(plugin.attach ?? plugin.deviceMount ?? plugin.block).toBeUndefined()
    const mounter = plugin.newMounter(spec, { metadata: { uid: 'u1', namespace: 'default' } })
    expect(mounter.getPath()).toBe(`/var/lib/kubevol/pods/u1/volumes/${name.replace('/', '~')}/v`)
    expect(mounter.getAttributes()).toEqual({ readOnly: true, managed: true, seLinuxRelabel: true })
    expect(plugin.newUnmounter('v', 'u1').getPath()).toBe(mounter.getPath())
  })
})

describe('readReferencedObject', () => {
  const missing = async (): Promise<never> => {
    throw new NotFoundError('ConfigMap', 'cm')
  }
  it.each([
    { name: 'a found object', read: async () => 'object', optional: false, result: 'object' },
    { name: 'a missing optional object', read: missing, optional: true, result: undefined },
  ])('returns $name', async ({ read, optional, result }) => {
    expect(await readReferencedObject(read, 'configmap', 'default', 'cm', optional)).toBe(result)
  })

  it.each([
    { name: 'a missing object, with the kubelet text', read: missing, error: 'configmap "cm" not found' },
    { name: 'a failed read, as it is', read: async () => Promise.reject(new Error('connection refused')), error: 'connection refused' },
    { name: 'a reader that does not serve the kind', read: undefined, error: 'cannot read configmaps "cm": the object reader does not serve configmaps' },
  ])('throws on $name', async ({ read, error }) => {
    await expect(readReferencedObject(read, 'configmap', 'default', 'cm', false)).rejects.toThrow(error)
  })
})
