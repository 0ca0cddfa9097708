/**
 * Embedding the core from its main entry only: the in-memory sources are production code, a
 * missing option is named, and a pod is asked about by its UID or as a Pod, never by
 * `namespace/name` (that used to match nothing and answer "no volumes").
 */
import { createMemoryHost } from '@kubevol/adapter-mock'
import { ConfigError, type VolumeManagerOptions, createMemoryObjectReader, createMemoryPodSource, createVolumeManager } from '@kubevol/core'
import { createBuiltinPlugins } from '@kubevol/core/plugins'
import { buildPod, fakeVolume } from '@kubevol/core/testing'
import { afterEach, describe, expect, it } from 'vitest'
import { scenario } from './setup.js'

const complete = (): VolumeManagerOptions => ({
  host: createMemoryHost(),
  plugins: createBuiltinPlugins(),
  podSource: createMemoryPodSource(),
  objects: createMemoryObjectReader(),
  nodeName: 'node-1',
})

describe('createVolumeManager options', () => {
  it.each([
    { option: 'plugins', message: /the plugins option is required: an array of volume plugins, e\.g\. createBuiltinPlugins\(\)/ },
    { option: 'host', message: /the host option is required/ },
    { option: 'podSource', message: /the podSource option is required: a PodSource, e\.g\. createMemoryPodSource\(\)/ },
    { option: 'objects', message: /the objects option is required: an ObjectReader/ },
  ])('names $option when it is missing', ({ option, message }) => {
    const options = { ...complete(), [option]: undefined } as unknown as VolumeManagerOptions
    expect(() => createVolumeManager(options)).toThrow(ConfigError)
    expect(() => createVolumeManager(options)).toThrow(message)
  })

  it('refuses plugins that are not an array', () => {
    const options = { ...complete(), plugins: createBuiltinPlugins()[0] } as unknown as VolumeManagerOptions
    expect(() => createVolumeManager(options)).toThrow(/the plugins option must be an array of volume plugins/)
  })

  it('runs with the main entry alone: builtin plugins, the memory sources and host', async () => {
    const podSource = createMemoryPodSource()
    const manager = createVolumeManager({ ...complete(), podSource })
    const stop = new AbortController()
    const running = manager.run(stop.signal)
    const pod = {
      metadata: { name: 'web', namespace: 'default', uid: 'web-1' },
      spec: { containers: [{ name: 'app', image: 'app', volumeMounts: [{ name: 'scratch', mountPath: '/scratch' }] }], volumes: [{ name: 'scratch', emptyDir: {} }] },
    }
    podSource.setPod(pod)
    await manager.waitForAttachAndMount(pod, { timeoutMs: 5_000 })
    expect([...manager.getMountedVolumesForPod(pod).keys()]).toEqual(['scratch'])
    stop.abort()
    await running
  })
})

describe('asking about a pod', () => {
  let current: ReturnType<typeof scenario> | undefined
  afterEach(async () => {
    await current?.stop()
    current = undefined
  })

  async function mountedPod() {
    current = scenario()
    current.start()
    const pod = buildPod({ uid: 'u-1', name: 'web', namespace: 'default', volumes: [fakeVolume('data')] })
    await current.addPodAndWait(pod)
    return { manager: current.manager, pod }
  }

  it('answers the same for the Pod and for its UID', async () => {
    const { manager, pod } = await mountedPod()
    expect([...manager.getMountedVolumesForPod(pod).keys()]).toEqual(['data'])
    expect([...manager.getMountedVolumesForPod('u-1').keys()]).toEqual(['data'])
    expect(manager.hasPossiblyMountedVolumesForPod(pod)).toBe(true)
    expect(manager.hasPossiblyMountedVolumesForPod('u-1')).toBe(true)
  })

  it('answers empty for a UID it does not know', async () => {
    const { manager } = await mountedPod()
    expect(manager.getMountedVolumesForPod('u-2').size).toBe(0)
    expect(manager.hasPossiblyMountedVolumesForPod('u-2')).toBe(false)
  })

  it.each([
    { name: 'default/web', reason: /must not contain '\/'/ },
    { name: '', reason: /pod UID/ },
    { name: '..', reason: /pod UID/ },
  ])('refuses $name, which cannot be a pod UID, instead of answering empty', async ({ name, reason }) => {
    const { manager } = await mountedPod()
    expect(() => manager.getMountedVolumesForPod(name)).toThrow(ConfigError)
    expect(() => manager.getMountedVolumesForPod(name)).toThrow(reason)
    expect(() => manager.getMountedVolumesForPod(name)).toThrow(/a pod's unique name is its UID \(metadata\.uid\)/)
    expect(() => manager.hasPossiblyMountedVolumesForPod(name)).toThrow(ConfigError)
  })

  it('refuses a Pod without a UID', async () => {
    const { manager } = await mountedPod()
    expect(() => manager.getMountedVolumesForPod({ metadata: { name: 'web', namespace: 'default' } })).toThrow(/has no metadata\.uid/)
  })
})
