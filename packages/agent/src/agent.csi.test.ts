/**
 * CSI in the agent: in API mode a registered driver lands in this node's CSINode and node ID
 * annotation and leaves them when it unregisters, and a raw block claim of that driver is mapped
 * into a pod and unmapped again; the configuration's `csiDrivers` and `pluginRegistration` start
 * static registration and the registration watcher.
 */
import { type MemoryHost, createMemoryHost } from '@kubevol/adapter-mock'
import type { CsiDriverRegistry } from '@kubevol/core/plugins'
import { createMemoryCsiDriver } from '@kubevol/core/testing'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { get, until } from '../test/helpers.js'
import { type Agent, startAgent } from './agent.js'
import { type CsiAdapter, startCsi } from './csi-drivers.js'
import { CSI_NODE_ID_ANNOTATION } from './kube/csi-node.js'
import { type FakeApiServer, startFakeApiServer } from './testing/index.js'

const NODE = 'n1'
const DRIVER = 'memory.csi.kubevol.io'
const silent = { debug() {}, info() {}, warn() {}, error() {} }

describe('the agent with a CSI driver in API mode', () => {
  let api: FakeApiServer
  let host: MemoryHost
  let agent: Agent | undefined
  beforeEach(async () => {
    api = await startFakeApiServer()
    host = createMemoryHost()
    api.create('Node', { metadata: { name: NODE } })
    api.create('CSIDriver', { metadata: { name: DRIVER }, spec: { attachRequired: false } })
    const pvc = api.create('PersistentVolumeClaim', { metadata: { name: 'raw', namespace: 'default' }, spec: { volumeName: 'pv-raw', accessModes: ['ReadWriteOnce'], volumeMode: 'Block' } })
    api.create('PersistentVolume', {
      metadata: { name: 'pv-raw' },
      spec: {
        capacity: { storage: '64Mi' },
        accessModes: ['ReadWriteOnce'],
        volumeMode: 'Block',
        csi: { driver: DRIVER, volumeHandle: 'raw-1' },
        claimRef: { name: 'raw', namespace: 'default', uid: pvc.metadata.uid },
      },
    })
    api.patch('PersistentVolumeClaim', 'default', 'raw', { status: { phase: 'Bound', capacity: { storage: '64Mi' } } }, { subresource: 'status' })
  })
  afterEach(async () => {
    await agent?.stop()
    agent = undefined
    await api.close()
  })

  it('keeps the CSINode in step with the registry and maps a raw block claim of the driver', async () => {
    agent = await startAgent(
      { nodeName: NODE, mode: 'api', port: 0, watchRetryMs: 20, podSyncRetryMs: 50, objectCacheTtlMs: 0, statsPeriodMs: 0, shutdownGraceMs: 1_000 },
      { host, kubeConfig: api.kubeConfig(api.nodeToken(NODE)), log: { silent: true }, manager: { backoff: { initialMs: 20, maxMs: 200 } } as object },
    )
    agent.csiDrivers.register({ name: DRIVER, driver: createMemoryCsiDriver({ host, name: DRIVER, nodeId: 'memory-n1' }) })
    const csiNode = () => api.get('CSINode', undefined, NODE) as { spec: { drivers: { name: string; nodeID: string }[] } } | undefined
    await until('the CSINode entry', () => csiNode()?.spec.drivers.length === 1)
    expect(csiNode()?.spec.drivers).toEqual([{ name: DRIVER, nodeID: 'memory-n1', topologyKeys: null }])
    const annotations = (): Record<string, string> => api.get('Node', undefined, NODE)?.metadata.annotations ?? {}
    expect(JSON.parse(annotations()[CSI_NODE_ID_ANNOTATION] ?? '{}')).toEqual({ [DRIVER]: 'memory-n1' })

    const pod = api.create('Pod', {
      metadata: { name: 'db', namespace: 'default' },
      spec: {
        nodeName: NODE,
        containers: [{ name: 'main', image: 'busybox', volumeDevices: [{ name: 'raw', devicePath: '/dev/xvda' }] }],
        volumes: [{ name: 'raw', persistentVolumeClaim: { claimName: 'raw' } }],
      },
    })
    const uid = pod.metadata.uid as string
    const link = `/var/lib/kubevol/pods/${uid}/volumeDevices/kubernetes.io~csi/pv-raw`
    await until('the pod mapped', () => agent?.manager.getMountedVolumesForPod(uid).size === 1)
    expect(await host.readlink(link)).toBe(`/var/lib/kubevol/plugins/kubernetes.io/csi/volumeDevices/publish/pv-raw/${uid}`)
    api.delete('Pod', 'default', 'db', { gracePeriodSeconds: 0 })
    await until('the pod unmapped', () => !host.exists(link) && host.mountTargets().length === 0)

    agent.csiDrivers.unregister(DRIVER)
    await until('the entry removed', () => csiNode()?.spec.drivers.length === 0)
    expect(annotations()[CSI_NODE_ID_ANNOTATION]).toBeUndefined()
  })
})

describe('CSI drivers from the configuration', () => {
  it.each([
    { name: 'static drivers only', csiDrivers: [{ name: 'a.csi', endpoint: '/run/a.sock' }], pluginRegistration: false, watching: false },
    { name: 'the registration watcher only', csiDrivers: [], pluginRegistration: true, watching: true },
    { name: 'neither: the adapter is not even loaded', csiDrivers: [], pluginRegistration: false, watching: false },
  ])('$name', async ({ csiDrivers, pluginRegistration, watching }) => {
    const pluginRegistrationDir = '/var/lib/kubelet/plugins_registry'
    let watched: string | undefined
    let loaded = false
    const adapter: CsiAdapter = {
      registerStaticCsiDrivers(registry: CsiDriverRegistry, drivers) {
        for (const d of drivers) registry.register({ name: d.name, driver: createMemoryCsiDriver({ host: createMemoryHost(), name: d.name }), endpoint: d.endpoint })
      },
      async startPluginWatcher(options) {
        watched = options.dir ?? `${options.rootDir}/plugins_registry`
        return { dir: watched, stop: () => (watched = undefined) }
      },
    }
    const csi = await startCsi({
      config: { nodeName: NODE, rootDir: '/var/lib/kubevol', csiDrivers, pluginRegistration, pluginRegistrationDir, watchRetryMs: 10 },
      logger: silent,
      loadAdapter: async () => {
        loaded = true
        return adapter
      },
    })
    expect(csi.registry.list().map((d) => [d.name, d.endpoint])).toEqual(csiDrivers.map((d) => [d.name, d.endpoint]))
    expect(watched).toBe(watching ? pluginRegistrationDir : undefined)
    expect(loaded).toBe(csiDrivers.length > 0 || pluginRegistration)
    csi.stop()
    expect(watched).toBeUndefined()
    // Stopping leaves the drivers registered (leaving is not deregistering).
    expect(csi.registry.list()).toHaveLength(csiDrivers.length)
  })
})

describe("the driver's volume health in kubelet_volume_stats_health_status_abnormal", () => {
  let api: FakeApiServer
  let agent: Agent | undefined
  afterEach(async () => {
    await agent?.stop()
    agent = undefined
    await api.close()
  })

  it('exports what a driver with VOLUME_CONDITION says, and no series where nobody said', async () => {
    api = await startFakeApiServer()
    const host = createMemoryHost()
    api.create('Node', { metadata: { name: NODE } })
    api.create('CSIDriver', { metadata: { name: DRIVER }, spec: { attachRequired: false } })
    api.create('CSIDriver', { metadata: { name: 'plain.csi.kubevol.io' }, spec: { attachRequired: false } })
    // sick and well: the driver reports a condition; quiet: it reports none; other: a driver without
    // VOLUME_CONDITION answers with a condition, which means nothing.
    const claims = [
      { name: 'sick', driver: DRIVER },
      { name: 'well', driver: DRIVER },
      { name: 'quiet', driver: DRIVER },
      { name: 'other', driver: 'plain.csi.kubevol.io' },
    ]
    for (const { name, driver } of claims) {
      const pvc = api.create('PersistentVolumeClaim', { metadata: { name, namespace: 'default' }, spec: { volumeName: `pv-${name}`, accessModes: ['ReadWriteOnce'] } })
      api.create('PersistentVolume', {
        metadata: { name: `pv-${name}` },
        spec: { capacity: { storage: '1Gi' }, accessModes: ['ReadWriteOnce'], csi: { driver, volumeHandle: name }, claimRef: { name, namespace: 'default', uid: pvc.metadata.uid } },
      })
      api.patch('PersistentVolumeClaim', 'default', name, { status: { phase: 'Bound', capacity: { storage: '1Gi' } } }, { subresource: 'status' })
    }
    agent = await startAgent(
      { nodeName: NODE, mode: 'api', port: 0, watchRetryMs: 20, podSyncRetryMs: 50, objectCacheTtlMs: 0, statsPeriodMs: 20, shutdownGraceMs: 1_000 },
      { host, kubeConfig: api.kubeConfig(api.nodeToken(NODE)), log: { silent: true }, manager: { backoff: { initialMs: 20, maxMs: 200 } } as object },
    )
    const conditions: Record<string, { abnormal: boolean; message: string }> = { sick: { abnormal: true, message: 'disk failing' }, well: { abnormal: false, message: 'ok' } }
    const capabilities = ['STAGE_UNSTAGE_VOLUME', 'GET_VOLUME_STATS'] as const
    agent.csiDrivers.register({
      name: DRIVER,
      driver: createMemoryCsiDriver({ host, name: DRIVER, capabilities: [...capabilities, 'VOLUME_CONDITION'], volumeCondition: (id) => conditions[id] }),
    })
    agent.csiDrivers.register({
      name: 'plain.csi.kubevol.io',
      driver: createMemoryCsiDriver({ host, name: 'plain.csi.kubevol.io', capabilities, volumeCondition: () => ({ abnormal: true, message: 'meaningless' }) }),
    })
    const pod = api.create('Pod', {
      metadata: { name: 'db', namespace: 'default' },
      spec: {
        nodeName: NODE,
        containers: [{ name: 'main', image: 'busybox', volumeMounts: claims.map(({ name }) => ({ name, mountPath: `/${name}` })) }],
        volumes: claims.map(({ name }) => ({ name, persistentVolumeClaim: { claimName: name } })),
      },
    })
    const uid = pod.metadata.uid as string
    await until('the pod mounted', () => agent?.manager.getMountedVolumesForPod(uid).size === claims.length)
    const series = async (): Promise<string[]> => {
      const { text } = await get(`${agent?.url}/metrics`)
      return text.split('\n').filter((line) => line.startsWith('kubelet_volume_stats_health_status_abnormal{'))
    }
    const capacity = async (): Promise<number> => {
      const { text } = await get(`${agent?.url}/metrics`)
      return text.split('\n').filter((line) => line.startsWith('kubelet_volume_stats_capacity_bytes{')).length
    }
    await until('stats collected for every claim', async () => (await capacity()) === claims.length)
    expect((await series()).sort()).toEqual([
      'kubelet_volume_stats_health_status_abnormal{namespace="default",persistentvolumeclaim="sick"} 1',
      'kubelet_volume_stats_health_status_abnormal{namespace="default",persistentvolumeclaim="well"} 0',
    ])
    // The driver changes its mind: the next collection says so.
    conditions.sick = { abnormal: false, message: 'repaired' }
    await until('the repaired volume reported healthy', async () => (await series()).some((line) => line.endsWith('persistentvolumeclaim="sick"} 0')))
  })
})

describe('a claim grown under a running pod (API mode)', () => {
  let api: FakeApiServer
  let agent: Agent | undefined
  afterEach(async () => {
    await agent?.stop()
    agent = undefined
    await api.close()
  })

  it('is expanded on the node without a pod update, and the claim status written as the node', async () => {
    api = await startFakeApiServer()
    const host = createMemoryHost()
    api.create('Node', { metadata: { name: NODE } })
    api.create('CSIDriver', { metadata: { name: DRIVER }, spec: { attachRequired: false } })
    const pvc = api.create('PersistentVolumeClaim', {
      metadata: { name: 'data', namespace: 'default' },
      spec: { volumeName: 'pv-data', accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
    })
    api.create('PersistentVolume', {
      metadata: { name: 'pv-data' },
      spec: { capacity: { storage: '1Gi' }, accessModes: ['ReadWriteOnce'], csi: { driver: DRIVER, volumeHandle: 'vol-1' }, claimRef: { name: 'data', namespace: 'default', uid: pvc.metadata.uid } },
    })
    api.patch('PersistentVolumeClaim', 'default', 'data', { status: { phase: 'Bound', capacity: { storage: '1Gi' } } }, { subresource: 'status' })
    agent = await startAgent(
      { nodeName: NODE, mode: 'api', port: 0, watchRetryMs: 20, podSyncRetryMs: 50, objectCacheTtlMs: 0, statsPeriodMs: 0, shutdownGraceMs: 1_000 },
      {
        host,
        kubeConfig: api.kubeConfig(api.nodeToken(NODE)),
        log: { silent: true },
        manager: { backoff: { initialMs: 20, maxMs: 200 }, expansionCheckPeriodMs: 50 } as object,
      },
    )
    const driver = createMemoryCsiDriver({ host, name: DRIVER })
    agent.csiDrivers.register({ name: DRIVER, driver })
    const pod = api.create('Pod', {
      metadata: { name: 'db', namespace: 'default' },
      spec: { nodeName: NODE, containers: [{ name: 'main', image: 'busybox', volumeMounts: [{ name: 'data', mountPath: '/data' }] }], volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'data' } }] },
    })
    const uid = pod.metadata.uid as string
    await until('the pod mounted', () => agent?.manager.getMountedVolumesForPod(uid).size === 1)
    const expands = () => driver.calls.filter((c) => c.method === 'NodeExpandVolume')
    expect(expands()).toEqual([])
    const podVersion = api.get('Pod', 'default', 'db')?.metadata.resourceVersion

    // What the external resizer writes: the PV's new capacity, then the claim's allocated size and status.
    api.patch('PersistentVolume', undefined, 'pv-data', { spec: { capacity: { storage: '2Gi' } } })
    api.patch('PersistentVolumeClaim', 'default', 'data', { spec: { resources: { requests: { storage: '2Gi' } } } })
    api.patch(
      'PersistentVolumeClaim',
      'default',
      'data',
      { status: { allocatedResources: { storage: '2Gi' }, allocatedResourceStatuses: { storage: 'NodeResizePending' } } },
      { subresource: 'status' },
    )
    await until('NodeExpandVolume', () => expands().length > 0)
    expect(expands().map((c) => c.request.requiredBytes)).toEqual([2 * 2 ** 30])
    // The node's own patch: the new capacity, the resize status cleared (no other writer here).
    await until('the claim status', () => api.get('PersistentVolumeClaim', 'default', 'data')?.status?.capacity?.storage === '2Gi')
    expect(api.get('PersistentVolumeClaim', 'default', 'data')?.status).toMatchObject({ phase: 'Bound', allocatedResources: { storage: '2Gi' } })
    expect(api.get('PersistentVolumeClaim', 'default', 'data')?.status?.allocatedResourceStatuses ?? {}).toEqual({})
    const writers = api.requests.filter((r) => r.method === 'PATCH' && r.path.includes('/persistentvolumeclaims/data/status')).map((r) => [r.user, r.status])
    expect(writers).toContainEqual([`system:node:${NODE}`, 200])
    expect(api.get('Pod', 'default', 'db')?.metadata.resourceVersion).toBe(podVersion)
    expect(expands()).toHaveLength(1)
  })
})
