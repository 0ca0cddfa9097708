/** configMap, secret, downwardAPI and projected volumes (SPEC §7.6) through the whole manager, on the in-memory host. */
import { createMemoryHost } from '@kubevol/adapter-mock'
import type { ObjectReader, Pod, ServiceAccountToken, TokenSource, Volume } from '@kubevol/core'
import { silentLogger, silentMetrics, silentRecorder } from '@kubevol/core'
import { createPaths, createPluginManager } from '@kubevol/core/engine'
import { buildPod, createFakeClock, createMemoryObjectReader } from '@kubevol/core/testing'
import { afterEach, describe, expect, it } from 'vitest'
import { createConfigMapPlugin, createDownwardAPIPlugin, createProjectedPlugin, createSecretPlugin } from '@kubevol/core/plugins'
import { podMounts, realPath, scenario } from './setup.js'

const ROOT = '/var/lib/kubevol'
const decoder = new TextDecoder()
const dirOf = (plugin: string, volume: string, uid = 'a') => `${ROOT}/pods/${uid}/volumes/kubernetes.io~${plugin}/${volume}`

/** Issues `token-1`, `token-2`, ... on the clock it is given, each living `expirationSeconds`. */
function createTokenSource(clock: { now(): number }) {
  let issued = 0
  const source: TokenSource = {
    async getToken(request): Promise<ServiceAccountToken> {
      const now = clock.now()
      return { token: `token-${++issued}:${request.audience}`, issuedAt: now, expiresAt: now + request.expirationSeconds * 1000 }
    },
  }
  return source
}

let current: ReturnType<typeof scenario> | undefined
function start() {
  const clock = createFakeClock(Date.UTC(2026, 10, 29, 10, 0, 0))
  const projected = createProjectedPlugin({ nodeAllocatable: { cpu: '4', memory: '8Gi' } })
  const plugins = [createConfigMapPlugin(), createSecretPlugin(), createDownwardAPIPlugin({ nodeAllocatable: { cpu: '4', memory: '8Gi' } }), projected]
  current = scenario({ clock, plugins, manager: { tokens: createTokenSource(clock) } })
  current.start()
  return Object.assign(current, { projected })
}
afterEach(async () => {
  await current?.stop()
  current?.host.assertNoViolations()
  current = undefined
})

type H = ReturnType<typeof start>
// Through the volume's links, as the container reads it.
const read = async (h: H, path: string) => decoder.decode(await h.host.readFile(await realPath(h.host, path)))
const failedMount = (h: H) => h.events.filter((e) => e.reason === 'FailedMount').map((e) => e.message)
/** What a container sees at the volume: user-visible names (no `..` entries). */
const visibleNames = async (h: H, dir: string) => (await h.host.readdir(dir)).filter((n) => !n.startsWith('..'))
/** The pod's re-sync (the kubelet's syncPod): the manager sets remount-requiring volumes up again. */
async function resync(h: H, pod: Pod) {
  const before = h.operations.filter((o) => o.name === 'volume_mount' && o.endedAt !== undefined).length
  await h.manager.waitForAttachAndMount(pod)
  await h.advanceUntil(() => h.operations.filter((o) => o.name === 'volume_mount' && o.endedAt !== undefined).length > before)
}

const configMapVolume = (extra: Partial<NonNullable<Volume['configMap']>> = {}): Volume => ({ name: 'cfg', configMap: { name: 'app', ...extra } })

describe('configMap volumes', () => {
  it('mount with the ConfigMap keys as files, on the node disk', async () => {
    const h = start()
    h.objects.put('ConfigMap', { metadata: { name: 'app', namespace: 'default' }, data: { 'app.yaml': 'port: 80' }, binaryData: { logo: 'AAEC' } })
    await h.addPodAndWait(buildPod({ uid: 'a', volumes: [configMapVolume()] }))
    const dir = dirOf('configmap', 'cfg')
    expect(await read(h, `${dir}/app.yaml`)).toBe('port: 80')
    expect([...(await h.host.readFile(await realPath(h.host, `${dir}/logo`)))]).toEqual([0, 1, 2])
    expect(podMounts(h.host)).toEqual([])
    expect(((await h.host.stat(dir))?.mode ?? 0) & 0o777).toBe(0o777)
  })

  it('follow a changed ConfigMap into a new version, and leave an unchanged one alone', async () => {
    const h = start()
    const cm = { metadata: { name: 'app', namespace: 'default' }, data: { level: 'info' } }
    h.objects.put('ConfigMap', cm)
    const pod = buildPod({ uid: 'a', volumes: [configMapVolume()] })
    await h.addPodAndWait(pod)
    const dir = dirOf('configmap', 'cfg')
    const first = await h.host.readlink(`${dir}/..data`)

    const mounts = () => h.operations.filter((o) => o.name === 'volume_mount' && o.endedAt !== undefined).length
    const before = mounts()
    h.objects.put('ConfigMap', { ...cm })
    await h.advanceUntil(() => mounts() > before)
    expect(await h.host.readlink(`${dir}/..data`)).toBe(first)

    await h.clock.advance(1_000)
    const unchanged = mounts()
    h.objects.put('ConfigMap', { ...cm, data: { level: 'debug' } })
    await h.advanceUntil(() => mounts() > unchanged, { step: 10 })
    expect(await read(h, `${dir}/level`)).toBe('debug')
    const second = await h.host.readlink(`${dir}/..data`)
    expect(second).not.toBe(first)
    expect([...(await h.host.readdir(dir))].sort()).toEqual([second, '..data', 'level'].sort())
  })

  it('mount an empty volume for a missing optional ConfigMap', async () => {
    const h = start()
    await h.addPodAndWait(buildPod({ uid: 'a', volumes: [configMapVolume({ optional: true, items: [{ key: 'x', path: 'x' }] })] }))
    expect(await visibleNames(h, dirOf('configmap', 'cfg'))).toEqual([])
    expect(await h.host.readlink(`${dirOf('configmap', 'cfg')}/..data`)).toMatch(/^\.\.2026_11_29_10_00_00\.\d{9}$/)
  })

  it('fail the wait with the kubelet text for a missing ConfigMap, leave nothing on disk, and mount once it exists', async () => {
    const h = start()
    const pod = buildPod({ uid: 'a', volumes: [configMapVolume()] })
    h.pods.setPod(pod)
    const outcome = h.manager.waitForAttachAndMount(pod).then(
      () => 'resolved',
      (err: Error) => err.message,
    )
    await h.clock.advance(124_000)
    expect(await outcome).toBe('unmounted volumes=[cfg], unattached volumes=[], failed to process volumes=[]: context deadline exceeded')
    expect(failedMount(h)[0]).toBe('MountVolume.SetUp failed for volume "cfg" : configmap "app" not found')
    expect(h.host.exists(dirOf('configmap', 'cfg'))).toBe(false)

    h.objects.put('ConfigMap', { metadata: { name: 'app', namespace: 'default' }, data: { k: 'v' } })
    await h.addPodAndWait(pod)
    expect(await read(h, `${dirOf('configmap', 'cfg')}/k`)).toBe('v')
  })

  it('fail with the kubelet text for a missing key', async () => {
    const h = start()
    h.objects.put('ConfigMap', { metadata: { name: 'app', namespace: 'default' }, data: { k: 'v' } })
    h.pods.setPod(buildPod({ uid: 'a', volumes: [configMapVolume({ items: [{ key: 'nope', path: 'n' }] })] }))
    await h.advanceUntil(() => failedMount(h).length > 0)
    expect(failedMount(h)[0]).toBe('MountVolume.SetUp failed for volume "cfg" : configmap references non-existent config key: nope')
  })

  it('are removed with their pod', async () => {
    const h = start()
    h.objects.put('ConfigMap', { metadata: { name: 'app', namespace: 'default' }, data: { k: 'v' } })
    await h.addPodAndWait(buildPod({ uid: 'a', volumes: [configMapVolume()] }))
    h.pods.deletePod('a')
    await h.manager.waitForIdle()
    expect(h.host.exists(dirOf('configmap', 'cfg'))).toBe(false)
  })
})

describe('secret volumes', () => {
  it('live on tmpfs, decoded, with fsGroup applied, and go with their pod', async () => {
    const h = start()
    h.objects.put('Secret', { metadata: { name: 'db', namespace: 'default' }, data: { password: 'czNjcjN0' } })
    await h.addPodAndWait(buildPod({ uid: 'a', fsGroup: 2000, volumes: [{ name: 'creds', secret: { secretName: 'db', defaultMode: 0o400 } }] }))
    const dir = dirOf('secret', 'creds')
    const mount = (await h.host.mounts()).find((m) => m.target === dir)
    expect(mount?.fstype).toBe('tmpfs')
    expect(await read(h, `${dir}/password`)).toBe('s3cr3t')
    const info = await h.host.stat(await realPath(h.host, `${dir}/password`))
    expect([info?.gid, info?.mode.toString(8)]).toEqual([2000, '440'])

    h.pods.deletePod('a')
    await h.manager.waitForIdle()
    expect(podMounts(h.host)).toEqual([])
    expect(h.host.exists(dir)).toBe(false)
  })

  it('fail with the kubelet text for a missing Secret', async () => {
    const h = start()
    h.pods.setPod(buildPod({ uid: 'a', volumes: [{ name: 'creds', secret: { secretName: 'db' } }] }))
    await h.advanceUntil(() => failedMount(h).length > 0)
    expect(failedMount(h)[0]).toBe('MountVolume.SetUp failed for volume "creds" : secret "db" not found')
    expect(podMounts(h.host)).toEqual([])
  })

  it('are torn down again when the first write fails, and keep the old content when a refresh fails', async () => {
    const h = start()
    h.objects.put('Secret', { metadata: { name: 'db', namespace: 'default' }, data: { k: 'djE=' } })
    const pod = buildPod({ uid: 'a', volumes: [{ name: 'creds', secret: { secretName: 'db' } }] })
    const dir = dirOf('secret', 'creds')
    const stop = h.host.faults.failOn({ method: 'rename', path: `${dir}/..data_tmp` }, 'EIO')
    h.pods.setPod(pod)
    await h.advanceUntil(() => failedMount(h).length > 0)
    expect(failedMount(h)[0]).toBe(`MountVolume.SetUp failed for volume "creds" : EIO: rename ${dir}/..data_tmp: injected fault`)
    expect(podMounts(h.host)).toEqual([])
    expect(h.host.exists(dir)).toBe(false)
    stop()
    await h.addPodAndWait(pod)
    expect(await read(h, `${dir}/k`)).toBe('v1')

    h.host.faults.failOn({ method: 'rename', path: `${dir}/..data_tmp` }, 'EIO')
    h.objects.put('Secret', { metadata: { name: 'db', namespace: 'default' }, data: { k: 'djI=' } })
    await h.advanceUntil(() => failedMount(h).length > 1)
    expect(await read(h, `${dir}/k`)).toBe('v1')
    expect(h.manager.getMountedVolumesForPod('a').has('creds')).toBe(true)
  })
})

describe('downwardAPI volumes', () => {
  it('show pod fields and resources, and follow a label change on re-sync', async () => {
    const h = start()
    const base = buildPod({ uid: 'a', volumes: [] })
    const volume: Volume = {
      name: 'info',
      downwardAPI: {
        items: [
          { path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } },
          { path: 'name', fieldRef: { fieldPath: 'metadata.name' } },
          { path: 'mem', resourceFieldRef: { containerName: 'main', resource: 'limits.memory', divisor: '1Mi' } },
        ],
      },
    }
    const pod: Pod = { ...base, metadata: { ...base.metadata, labels: { app: 'web' } }, spec: { ...base.spec, volumes: [volume], containers: [{ name: 'main', volumeMounts: [{ name: 'info', mountPath: '/etc/info' }] }] } }
    await h.addPodAndWait(pod)
    const dir = dirOf('downward-api', 'info')
    expect([await read(h, `${dir}/labels`), await read(h, `${dir}/name`), await read(h, `${dir}/mem`)]).toEqual(['app="web"', pod.metadata.name, '8192'])
    expect((await h.host.mounts()).find((m) => m.target === dir)?.fstype).toBe('tmpfs')

    const relabelled = { ...pod, metadata: { ...pod.metadata, labels: { app: 'web', tier: 'front' } } }
    h.pods.setPod(relabelled)
    await resync(h, relabelled)
    expect(await read(h, `${dir}/labels`)).toBe('app="web"\ntier="front"')
  })
})

describe('projected volumes', () => {
  const projectedPod = (sources: NonNullable<NonNullable<Volume['projected']>['sources']>, fsGroup?: number) =>
    buildPod({ uid: 'a', ...(fsGroup === undefined ? {} : { fsGroup }), volumes: [{ name: 'all', projected: { sources } }] })

  it('gather a token, a ConfigMap, a Secret and pod fields on tmpfs, and rotate the token at 80% of its life', async () => {
    const h = start()
    h.objects.put('ConfigMap', { metadata: { name: 'app', namespace: 'default' }, data: { 'ca.crt': 'CA' } })
    h.objects.put('Secret', { metadata: { name: 'db', namespace: 'default' }, data: { password: 'cHc=' } })
    const pod = projectedPod([
      { serviceAccountToken: { path: 'token', audience: 'api', expirationSeconds: 600 } },
      { configMap: { name: 'app' } },
      { secret: { name: 'db', items: [{ key: 'password', path: 'db/password' }] } },
      { downwardAPI: { items: [{ path: 'namespace', fieldRef: { fieldPath: 'metadata.namespace' } }] } },
    ])
    await h.addPodAndWait(pod)
    const dir = dirOf('projected', 'all')
    const issuedAt = h.clock.now()
    expect((await h.host.mounts()).find((m) => m.target === dir)?.fstype).toBe('tmpfs')
    expect((await visibleNames(h, dir)).sort()).toEqual(['ca.crt', 'db', 'namespace', 'token'])
    expect([await read(h, `${dir}/token`), await read(h, `${dir}/ca.crt`), await read(h, `${dir}/db/password`), await read(h, `${dir}/namespace`)]).toEqual([
      'token-1:api',
      'CA',
      'pw',
      'default',
    ])
    const rotation = h.projected.nextTokenRotation('a')
    expect(rotation).toBe(issuedAt + 480_000)

    await h.clock.advance((rotation as number) - h.clock.now() - 1_000)
    await resync(h, pod)
    expect(await read(h, `${dir}/token`)).toBe('token-1:api')

    await h.clock.advance(1_000)
    await resync(h, pod)
    expect(await read(h, `${dir}/token`)).toBe('token-2:api')
    expect(h.projected.nextTokenRotation('a')).toBe(h.clock.now() + 480_000)

    h.pods.deletePod('a')
    await h.manager.waitForIdle()
    expect(h.projected.nextTokenRotation('a')).toBeUndefined()
    expect(podMounts(h.host)).toEqual([])
  })

  it('restrict the token to 0600 (plus group read) when the pod has an fsGroup', async () => {
    const h = start()
    await h.addPodAndWait(projectedPod([{ serviceAccountToken: { path: 'token' } }], 3000))
    const info = await h.host.stat(await realPath(h.host, `${dirOf('projected', 'all')}/token`))
    expect([info?.gid, info?.mode.toString(8)]).toEqual([3000, '640'])
  })

  it.each([
    {
      name: 'two sources projecting one path',
      sources: [{ downwardAPI: { items: [{ path: 'x', fieldRef: { fieldPath: 'metadata.name' } }] } }, { serviceAccountToken: { path: 'x' } }],
      error: 'conflicting duplicate paths: x',
    },
    {
      name: 'every failing source at once',
      sources: [{ configMap: { name: 'gone' } }, { secret: { name: 'gone-too' } }, { secret: { name: 'maybe', optional: true } }],
      error: '[configmap "gone" not found, secret "gone-too" not found]',
    },
    { name: 'an unsupported source', sources: [{ clusterTrustBundle: { signerName: 'x' } }], error: 'clusterTrustBundle projected volume sources are not supported' },
  ])('fail on $name', async ({ sources, error }) => {
    const h = start()
    h.pods.setPod(projectedPod(sources))
    await h.advanceUntil(() => failedMount(h).length > 0)
    expect(failedMount(h)[0]).toBe(`MountVolume.SetUp failed for volume "all" : ${error}`)
    expect(podMounts(h.host)).toEqual([])
  })
})

describe('refresh without a pod sync', () => {
  /** Ended set-ups per pod. */
  const setUps = (h: H) => {
    const count: Record<string, number> = {}
    for (const o of h.operations) if (o.name === 'volume_mount' && o.endedAt !== undefined) count[o.podName] = (count[o.podName] ?? 0) + 1
    return count
  }

  it('leaves volumes built from announced objects and the pod alone, and sets up again only the pods that read a changed object', async () => {
    const h = start()
    h.objects.put('ConfigMap', { metadata: { name: 'app', namespace: 'default' }, data: { level: 'info' } })
    h.objects.put('ConfigMap', { metadata: { name: 'other', namespace: 'default' }, data: { x: '1' } })
    h.objects.put('Secret', { metadata: { name: 'db', namespace: 'default' }, data: { password: btoa('s3cret') } })
    const labels = { name: 'info', downwardAPI: { items: [{ path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } }] } }
    await h.addPodAndWait(buildPod({ uid: 'a', volumes: [configMapVolume()] }))
    await h.addPodAndWait(buildPod({ uid: 'b', volumes: [configMapVolume({ name: 'other' })] }))
    await h.addPodAndWait(buildPod({ uid: 'c', volumes: [{ name: 'creds', secret: { secretName: 'db' } }, labels] }))
    await h.addPodAndWait(buildPod({ uid: 'd', volumes: [{ name: 'all', projected: { sources: [{ configMap: { name: 'app' } }, { downwardAPI: labels.downwardAPI }] } }] }))
    // The same ConfigMap name in another namespace is another object.
    const elsewhere = buildPod({ uid: 'e', volumes: [configMapVolume()] })
    h.objects.put('ConfigMap', { metadata: { name: 'app', namespace: 'team' }, data: { level: 'info' } })
    await h.addPodAndWait({ ...elsewhere, metadata: { ...elsewhere.metadata, namespace: 'team' } })
    const settled = setUps(h)
    expect(settled).toEqual({ a: 1, b: 1, c: 2, d: 1, e: 1 })

    // Two pod sync periods and more: nothing changed, nothing is set up again; nor for objects no
    // such volume reads.
    await h.clock.advance(125_000)
    h.objects.put('PersistentVolumeClaim', { metadata: { name: 'claim', namespace: 'default' } })
    h.objects.put('ConfigMap', { metadata: { name: 'unread', namespace: 'default' }, data: {} })
    await h.clock.advance(1_000)
    expect(setUps(h)).toEqual(settled)

    h.objects.put('ConfigMap', { metadata: { name: 'app', namespace: 'default' }, data: { level: 'debug' } })
    await h.advanceUntil(() => (setUps(h).d ?? 0) > 1 && (setUps(h).a ?? 0) > 1)
    await h.manager.waitForIdle()
    expect(setUps(h)).toEqual({ a: 2, b: 1, c: 2, d: 2, e: 1 })
    expect(await read(h, `${dirOf('configmap', 'cfg')}/level`)).toBe('debug')
    expect(await read(h, `${dirOf('projected', 'all', 'd')}/level`)).toBe('debug')
    expect(await read(h, `${dirOf('configmap', 'cfg', 'e')}/level`)).toBe('info')
  })

  it('sets every such volume up again each pod sync period when the reader finds changes only by reading', async () => {
    const clock = createFakeClock(Date.UTC(2026, 10, 29, 10, 0, 0))
    const store = createMemoryObjectReader()
    // A reader like the agent's API reader: reads with no change announcements.
    const reading: ObjectReader = { ...store, subscribe: undefined, announcesChanges: undefined }
    current = scenario({ clock, plugins: [createConfigMapPlugin()], manager: { objects: reading } })
    current.start()
    const h = current as H
    store.put('ConfigMap', { metadata: { name: 'app', namespace: 'default' }, data: { level: 'info' } })
    await h.addPodAndWait(buildPod({ uid: 'a', volumes: [configMapVolume()] }))
    store.put('ConfigMap', { metadata: { name: 'app', namespace: 'default' }, data: { level: 'debug' } })
    await h.clock.advance(55_000)
    expect(await read(h, `${dirOf('configmap', 'cfg')}/level`)).toBe('info')
    await h.advanceUntil(() => (setUps(h).a ?? 0) > 1, { maxMs: 10_000 })
    expect(await read(h, `${dirOf('configmap', 'cfg')}/level`)).toBe('debug')
    await h.clock.advance(60_000)
    expect(setUps(h).a).toBe(3)
  })

  it('follows a label change as soon as the pod source announces it', async () => {
    const h = start()
    const base = buildPod({ uid: 'a', volumes: [{ name: 'info', downwardAPI: { items: [{ path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } }] } }] })
    const pod: Pod = { ...base, metadata: { ...base.metadata, labels: { app: 'web' } } }
    await h.addPodAndWait(pod)
    h.pods.setPod({ ...pod, metadata: { ...pod.metadata, labels: { app: 'api' } } })
    await h.clock.advance(10)
    expect(await read(h, `${dirOf('downward-api', 'info')}/labels`)).toBe('app="api"')
  })

  it('rotates a token within one pod sync period after 80% of its life, with no event at all', async () => {
    const h = start()
    const pod = buildPod({ uid: 'a', volumes: [{ name: 'all', projected: { sources: [{ serviceAccountToken: { path: 'token', audience: 'api', expirationSeconds: 600 } }] } }] })
    await h.addPodAndWait(pod)
    const dir = dirOf('projected', 'all')
    expect(await read(h, `${dir}/token`)).toBe('token-1:api')
    await h.clock.advance(480_000 + 60_000)
    expect(await read(h, `${dir}/token`)).toBe('token-2:api')
  })
})

describe('projected volumes without a token source', () => {
  it('fail with an error that names the volume', async () => {
    const clock = createFakeClock()
    const host = createMemoryHost({ clock })
    const plugin = createProjectedPlugin()
    const objects = createMemoryObjectReader()
    const context = { host, paths: createPaths(ROOT), nodeName: 'node-1', objects, clock, logger: silentLogger, recorder: silentRecorder, metrics: silentMetrics }
    createPluginManager([plugin], context)
    const pod = buildPod({ uid: 'a', volumes: [{ name: 'all', projected: { sources: [{ serviceAccountToken: { path: 'token' } }] } }] })
    const mounter = plugin.newMounter({ name: 'all', volume: pod.spec?.volumes?.[0] as Volume, readOnly: false }, pod)
    await expect(mounter.setUp({})).rejects.toThrow('cannot set up projected volume all: serviceAccountToken needs a token source and none is configured')
    expect(host.exists(mounter.getPath())).toBe(false)
    // Tearing down what was never set up is fine.
    await plugin.newUnmounter('all', 'a').tearDown()
  })
})
