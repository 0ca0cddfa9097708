/**
 * The agent and its Node object in API mode, against the fake API server: registration as the
 * kubelet registers its node, readiness while the Node is missing, API errors logged as the API's
 * message (once, not every second), `status.volumesInUse` written without losing entries someone
 * else put there, a watch relisting after 410 Expired being logged and counted, and fileDisk volumes
 * under the attach/detach controller's model with and without the deploy's CSIDriver object.
 */
import { type MemoryHost, createMemoryHost } from '@kubevol/adapter-mock'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { get, startFakeAttachDetachController, until } from '../test/helpers.js'
import { type Agent, startAgent } from './agent.js'
import type { AgentConfigInput } from './config/options.js'
import { goArch } from './kube/node-registration.js'
import { type FakeApiServer, startFakeApiServer } from './testing/index.js'

const NODE = 'n1'
const IMAGE = '/var/lib/images/disk.img'
const ANNOTATION = 'volumes.kubernetes.io/controller-managed-attach-detach'
const FOREIGN = 'kubernetes.io/csi/other.example.com^vol-1'

let api: FakeApiServer
let host: MemoryHost
let logs: Record<string, unknown>[]
const agents: Agent[] = []

beforeEach(async () => {
  api = await startFakeApiServer()
  host = createMemoryHost()
  logs = []
})
afterEach(async () => {
  for (const agent of agents.splice(0)) await agent.stop()
  await api.close()
})

async function start(config: Partial<AgentConfigInput> = {}): Promise<Agent> {
  const agent = await startAgent(
    { nodeName: NODE, mode: 'api', port: 0, nodeStatusPeriodMs: 50, watchRetryMs: 20, podSyncRetryMs: 50, objectCacheTtlMs: 0, statsPeriodMs: 0, shutdownGraceMs: 1_000, ...config },
    {
      host,
      kubeConfig: api.kubeConfig(api.nodeToken(NODE)),
      log: { destination: { write: (line: string) => logs.push(JSON.parse(line) as Record<string, unknown>) } },
      manager: { backoff: { initialMs: 20, maxMs: 200 }, resyncPeriodMs: 500, housekeepingPeriodMs: 0 } as object,
    },
  )
  agents.push(agent)
  return agent
}

const node = () => api.get('Node', undefined, NODE)
const linesWith = (text: string) => logs.filter((l) => JSON.stringify(l).includes(text))

describe('node registration', () => {
  it('creates a missing Node as the kubelet does: its labels, the attach/detach annotation, no capacity', async () => {
    const agent = await start({ nodeLabels: 'node.kubernetes.io/pool=edge,example.com/rack=r1' })
    await until('ready', async () => (await get(`${agent.url}/readyz`)).status === 200)
    expect(node()?.metadata).toMatchObject({
      labels: { 'kubernetes.io/hostname': NODE, 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': goArch(), 'node.kubernetes.io/pool': 'edge', 'example.com/rack': 'r1' },
      annotations: { [ANNOTATION]: 'true' },
    })
    expect(goArch('x64')).toBe('amd64')
    // Nothing kubevol does not manage: no capacity, no allocatable.
    const status = (node()?.status ?? {}) as Record<string, unknown>
    expect(status.capacity).toBeUndefined()
    expect(status.allocatable).toBeUndefined()
    // Created by the node's own identity, through the Node authorizer and NodeRestriction.
    expect(api.requests.filter((r) => r.method === 'POST' && r.path === '/api/v1/nodes').map((r) => [r.user, r.status])).toEqual([[`system:node:${NODE}`, 201]])
  })

  it('annotates an existing Node for controller attach/detach, and removes the annotation when kubevol attaches itself', async () => {
    api.create('Node', { metadata: { name: NODE, labels: { keep: 'me' } } })
    const first = await start()
    await until('annotated', () => node()?.metadata.annotations?.[ANNOTATION] === 'true')
    expect(node()?.metadata.labels).toEqual({ keep: 'me' })
    expect(api.requests.filter((r) => r.method === 'PATCH' && r.path === `/api/v1/nodes/${NODE}`).map((r) => r.contentType)).toEqual(['application/merge-patch+json'])
    await first.stop()
    agents.length = 0
    await start({ controllerAttachDetach: false })
    await until('annotation removed', () => node()?.metadata.annotations?.[ANNOTATION] === undefined)
  })

  it('without registration, says in /readyz that the Node is missing, warns once, and recovers when it appears', async () => {
    const agent = await start({ registerNode: false })
    await until('the readiness reason', async () => (await get(`${agent.url}/readyz?verbose`)).text.includes(`[-]node failed: the Node object ${NODE} does not exist`))
    expect((await get(`${agent.url}/readyz`)).status).toBe(503)
    // Several rounds of checking later: one warning line, and no JSON of a Status anywhere.
    await until('a few checks', () => api.requests.filter((r) => r.path === `/api/v1/nodes/${NODE}` && r.status === 404).length >= 3)
    expect(linesWith('does not exist')).toHaveLength(1)
    expect(linesWith('"kind\\":\\"Status')).toEqual([])
    expect(api.requests.filter((r) => r.method === 'POST' && r.path === '/api/v1/nodes')).toEqual([])
    api.create('Node', { metadata: { name: NODE } })
    await until('ready', async () => (await get(`${agent.url}/readyz`)).status === 200)
    expect(node()?.metadata.annotations?.[ANNOTATION]).toBe('true')
  })

  it('logs a Node deleted while running as the API says it, once, and fails readiness', async () => {
    api.create('Node', { metadata: { name: NODE } })
    const agent = await start()
    await until('ready', async () => (await get(`${agent.url}/readyz`)).status === 200)
    api.delete('Node', undefined, NODE)
    await until('the warning', () => linesWith(`nodes \\"${NODE}\\" not found`).length > 0)
    await until('readiness fails', async () => (await get(`${agent.url}/readyz?verbose`)).text.includes(`the Node object ${NODE} does not exist`))
    const settled = api.requests.length
    await until('more checks', () => api.requests.length >= settled + 3)
    expect(linesWith(`nodes \\"${NODE}\\" not found`)).toHaveLength(1)
    expect(linesWith('HTTP-Code')).toEqual([])
    expect(linesWith('"kind\\":\\"Status')).toEqual([])
  })
})

/** A claim bound to a fileDisk PV whose image is on the memory host. */
function createDiskClaim(server: FakeApiServer): void {
  host.allocateFile(IMAGE, 32 << 20)
  const pvc = server.create('PersistentVolumeClaim', { metadata: { name: 'disk', namespace: 'default' }, spec: { volumeName: 'pv-disk', accessModes: ['ReadWriteOnce'] } })
  server.create('PersistentVolume', {
    metadata: { name: 'pv-disk' },
    spec: { capacity: { storage: '32Mi' }, accessModes: ['ReadWriteOnce'], csi: { driver: 'filedisk.kubevol.io', volumeHandle: IMAGE, fsType: 'ext4' }, claimRef: { name: 'disk', namespace: 'default', uid: pvc.metadata.uid } },
  })
  server.patch('PersistentVolumeClaim', 'default', 'disk', { status: { phase: 'Bound', capacity: { storage: '32Mi' } } }, { subresource: 'status' })
}
const diskPod = { metadata: { name: 'web', namespace: 'default' }, spec: { nodeName: NODE, containers: [{ name: 'c', image: 'busybox', volumeMounts: [{ name: 'data', mountPath: '/data' }] }], volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'disk' } }] } }

describe('controller attach/detach of fileDisk volumes', () => {
  it('without the CSIDriver object, has the controller make a VolumeAttachment for filedisk.kubevol.io that nobody serves', async () => {
    await api.close()
    api = await startFakeApiServer({ attachDetachController: true })
    createDiskClaim(api)
    const agent = await start()
    const web = api.create('Pod', diskPod)
    await until('a VolumeAttachment', () => api.list('VolumeAttachment').length === 1)
    expect(api.list('VolumeAttachment')[0]).toMatchObject({ spec: { attacher: 'filedisk.kubevol.io', nodeName: NODE, source: { persistentVolumeName: 'pv-disk' } } })
    // Nobody marks it attached (a node may only read VolumeAttachments): the volume waits, unattached.
    const unique = `kubernetes.io/csi/filedisk.kubevol.io^${IMAGE}`
    await until('reported in use', () => ((node()?.status as { volumesInUse?: string[] } | undefined)?.volumesInUse ?? []).includes(unique))
    expect(agent.manager.snapshot().desired.map((v) => [v.volumeName, v.pluginIsAttachable])).toEqual([[unique, true]])
    expect(agent.manager.volumeIsAttached(unique)).toBe(false)
    expect(agent.manager.getMountedVolumesForPod(web.metadata.uid as string).size).toBe(0)
  })

  it('with the CSIDriver object of deploy/ (attachRequired: false), makes no VolumeAttachment and mounts', async () => {
    await api.close()
    api = await startFakeApiServer({ attachDetachController: true })
    api.create('CSIDriver', { metadata: { name: 'filedisk.kubevol.io' }, spec: { attachRequired: false, podInfoOnMount: false } })
    createDiskClaim(api)
    const agent = await start()
    const web = api.create('Pod', diskPod)
    await until('web mounted', () => agent.manager.getMountedVolumesForPod(web.metadata.uid as string).size === 1)
    expect(api.list('VolumeAttachment')).toEqual([])
    expect(agent.manager.snapshot().mounted.map((v) => v.volumeName)).toEqual([`kubernetes.io/csi/filedisk.kubevol.io^${IMAGE}`])
  })
})

describe('status.volumesInUse', () => {
  beforeEach(() => {
    createDiskClaim(api)
  })
  const inUse = () => ((node()?.status as { volumesInUse?: string[] } | undefined)?.volumesInUse ?? [])

  it('keeps an entry someone else put there, through a conflict, and takes out only its own', async () => {
    api.create('Node', { metadata: { name: NODE } })
    api.patch('Node', undefined, NODE, { status: { volumesInUse: [FOREIGN] } }, { subresource: 'status' })
    const stop = startFakeAttachDetachController(api, host, NODE)
    try {
      // The first write meets a concurrent change (409): kubevol reads the Node again and retries.
      api.failNext({ method: 'PATCH', path: `/api/v1/nodes/${NODE}/status`, status: 409, reason: 'Conflict', message: `Operation cannot be fulfilled on nodes "${NODE}": the object has been modified; please apply your changes to the latest version and try again` })
      const agent = await start()
      const web = api.create('Pod', diskPod)
      await until('web mounted', () => agent.manager.getMountedVolumesForPod(web.metadata.uid as string).size === 1)
      const own = agent.manager.getVolumesInUse()
      expect(own).toHaveLength(1)
      expect(inUse()).toEqual([FOREIGN, ...own].sort())
      expect(api.requests.some((r) => r.path === `/api/v1/nodes/${NODE}/status` && r.status === 409)).toBe(true)
      // Every write was a merge patch of the status subresource.
      expect(api.requests.filter((r) => r.path === `/api/v1/nodes/${NODE}/status`).every((r) => r.contentType === 'application/merge-patch+json')).toBe(true)

      api.delete('Pod', 'default', 'web', { gracePeriodSeconds: 0 })
      await until('own entry gone', () => !inUse().includes(own[0] as string))
      expect(inUse()).toEqual([FOREIGN])
    } finally {
      stop()
    }
  })
})

describe('watches', () => {
  it('logs and counts a relist after 410 Expired', async () => {
    api.create('Node', { metadata: { name: NODE } })
    const agent = await start()
    await until('watching pods', () => api.openWatches('pods') === 1)
    const rv = [...api.requests].reverse().find((r) => r.watch && r.path === '/api/v1/pods')?.query.resourceVersion
    api.create('ConfigMap', { metadata: { name: 'x', namespace: 'default' } })
    api.compact()
    api.expireWatches('pods')
    await until('the relist', () => linesWith('Watch of pods expired').length === 1)
    expect(linesWith('Watch of pods expired')[0]).toMatchObject({ resource: 'pods', resourceVersion: rv })
    const metrics = (await get(`${agent.url}/metrics`)).text
    expect(metrics).toContain('kubevol_watch_restarts_total{resource="pods",reason="expired"} 1')
  })
})
