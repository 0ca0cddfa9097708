import { type MemoryHost, createMemoryHost } from '@kubevol/adapter-mock'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { get, podMounts, startFakeAttachDetachController, until } from '../test/helpers.js'
import { type Agent, startAgent } from './agent.js'
import { type FakeApiServer, startFakeApiServer } from './testing/index.js'

const IMAGE = '/var/lib/images/disk.img'
const NODE = 'n1'

let api: FakeApiServer
let host: MemoryHost
let stopController: () => void
const agents: Agent[] = []

beforeEach(async () => {
  api = await startFakeApiServer()
  host = createMemoryHost()
  host.allocateFile(IMAGE, 32 << 20)
  api.create('Node', { metadata: { name: NODE } })
  api.create('ConfigMap', { metadata: { name: 'settings', namespace: 'default' }, data: { mode: 'fast' } })
  const pvc = api.create('PersistentVolumeClaim', {
    metadata: { name: 'disk', namespace: 'default' },
    spec: { volumeName: 'pv-disk', accessModes: ['ReadWriteOnce'] },
  })
  api.create('PersistentVolume', {
    metadata: { name: 'pv-disk' },
    spec: {
      capacity: { storage: '32Mi' },
      accessModes: ['ReadWriteOnce'],
      csi: { driver: 'filedisk.kubevol.io', volumeHandle: IMAGE, fsType: 'ext4' },
      claimRef: { name: 'disk', namespace: 'default', uid: pvc.metadata.uid },
    },
  })
  api.patch('PersistentVolumeClaim', 'default', 'disk', { status: { phase: 'Bound', capacity: { storage: '32Mi' } } }, { subresource: 'status' })
  stopController = startFakeAttachDetachController(api, host, NODE)
})

afterEach(async () => {
  for (const agent of agents.splice(0)) await agent.stop()
  stopController()
  await api.close()
})

async function start(): Promise<Agent> {
  const agent = await startAgent(
    {
      nodeName: NODE,
      mode: 'api',
      port: 0,
      nodeStatusPeriodMs: 50,
      watchRetryMs: 20,
      podSyncRetryMs: 50,
      podSyncTimeoutMs: 300,
      objectCacheTtlMs: 0,
      statsPeriodMs: 0,
      shutdownGraceMs: 1_000,
    },
    {
      host,
      kubeConfig: api.kubeConfig(api.nodeToken(NODE)),
      log: { silent: true },
      manager: { backoff: { initialMs: 20, maxMs: 200 }, resyncPeriodMs: 500, housekeepingPeriodMs: 0 } as object,
    },
  )
  agents.push(agent)
  return agent
}

const podObject = (name: string, volumes: Record<string, unknown>[]) => ({
  metadata: { name, namespace: 'default' },
  spec: {
    nodeName: NODE,
    containers: [{ name: 'main', image: 'busybox', volumeMounts: volumes.map((v) => ({ name: v.name, mountPath: `/mnt/${String(v.name)}` })) }],
    volumes,
  },
})

const WEB_VOLUMES = [
  { name: 'scratch', emptyDir: {} },
  { name: 'config', configMap: { name: 'settings' } },
  { name: 'token', projected: { sources: [{ serviceAccountToken: { path: 'token', audience: 'vault' } }] } },
  { name: 'data', persistentVolumeClaim: { claimName: 'disk' } },
]

const volumesInUse = (): string[] => ((api.get('Node', undefined, NODE)?.status as { volumesInUse?: string[] } | undefined)?.volumesInUse ?? [])
const mountedCount = (agent: Agent, uid: string) => agent.manager.getMountedVolumesForPod(uid).size

describe('the agent in API mode', () => {
  it('mounts a pod, patches volumesInUse, posts events, and cleans up after a graceful deletion', async () => {
    const agent = await start()
    expect(agent.config.controllerAttachDetach).toBe(true)
    await until('ready', async () => (await get(`${agent.url}/readyz`)).status === 200)

    const web = api.create('Pod', podObject('web', WEB_VOLUMES))
    const uid = web.metadata.uid as string
    await until('web mounted', () => mountedCount(agent, uid) === 4)
    expect(volumesInUse()).toEqual([expect.stringContaining(IMAGE)])
    expect(agent.manager.getVolumesInUse()).toEqual(volumesInUse())
    // Every node status write was a merge patch of the status subresource.
    const statusWrites = api.requests.filter((r) => r.path === `/api/v1/nodes/${NODE}/status`)
    expect(statusWrites.length).toBeGreaterThan(0)
    expect(statusWrites.every((r) => r.method === 'PATCH' && r.contentType === 'application/merge-patch+json' && r.status === 200)).toBe(true)

    // A pod whose configMap does not exist yet: FailedMount with kubelet 1.32's text, aggregated,
    // posted; the pod sync that times out posts nothing of its own (wait.Interrupted); then it mounts.
    const late = api.create('Pod', podObject('late', [{ name: 'cfg', configMap: { name: 'later' } }]))
    const lateUID = late.metadata.uid as string
    const posted = () => api.list('Event', 'default').filter((e) => (e.involvedObject as { uid?: string }).uid === lateUID && e.reason === 'FailedMount')
    const withMessage = (re: RegExp) => posted().find((e) => re.test(String(e.message)))
    const setUp = /^MountVolume\.SetUp failed for volume "cfg" : configmap "later" not found$/
    const timedOut = 'unmounted volumes=[cfg], unattached volumes=[], failed to process volumes=[]: context deadline exceeded'
    await until(
      'the set-up failure posted and aggregated, and a pod sync timed out',
      async () => ((withMessage(setUp)?.count as number | undefined) ?? 0) >= 2 && (await get(`${agent.url}/v1/pods/${lateUID}`)).text.includes(timedOut),
    )
    expect(posted()).toHaveLength(1)
    expect(withMessage(/^Unable to attach or mount volumes/)).toBeUndefined()
    expect(withMessage(setUp)).toMatchObject({
      type: 'Warning',
      source: { component: 'kubevol', host: NODE },
      reportingComponent: 'kubevol',
      involvedObject: { kind: 'Pod', name: 'late', namespace: 'default', uid: lateUID },
    })
    expect(withMessage(setUp)?.metadata.name).toMatch(/^late\.[0-9a-f]+$/)
    const inMemory = (await get(`${agent.url}/v1/events?pod=${lateUID}`)).json() as { reason: string; count: number }[]
    expect(inMemory.find((e) => e.reason === 'FailedMount')?.count).toBeGreaterThanOrEqual(2)
    api.create('ConfigMap', { metadata: { name: 'later', namespace: 'default' }, data: { a: '1' } })
    await until('late mounted', () => mountedCount(agent, lateUID) === 1)

    const metrics = await get(`${agent.url}/metrics`)
    expect(metrics.text).toContain('volume_manager_total_volumes{plugin_name="kubevol.io/file-disk",state="actual_state_of_world"} 1')
    expect(metrics.text).toMatch(/storage_operation_duration_seconds_count\{volume_plugin="kubevol.io\/file-disk",operation_name="verify_controller_attached_volume",status="success",migrated="false"\} 1/)

    // Graceful deletion: the pod is marked, its volumes go, and the agent deletes the object.
    api.delete('Pod', 'default', 'web', { gracePeriodSeconds: 30 })
    await until('web deleted from the API', () => api.get('Pod', 'default', 'web') === undefined)
    expect(agent.manager.hasPossiblyMountedVolumesForPod(uid)).toBe(false)
    await until('volumesInUse shrank', () => volumesInUse().length === 0)
    await until('the controller detached', async () => ((await host.loopDevices?.find(IMAGE)) ?? []).length === 0)
    expect(podMounts(host).filter((m) => m.includes(uid))).toEqual([])
    expect(api.requests.some((r) => r.method === 'DELETE' && r.path === '/api/v1/namespaces/default/pods/web' && r.status === 200)).toBe(true)
  })

  it.each([
    ['dropped connections', (api: FakeApiServer) => api.dropWatches()],
    ['an ERROR 410 Expired in the stream', (api: FakeApiServer) => api.expireWatches()],
    ['a dropped connection whose resourceVersion was compacted meanwhile', (api: FakeApiServer) => {
      api.dropWatches()
      api.create('ConfigMap', { metadata: { name: 'noise', namespace: 'default' } })
      api.compact()
    }],
    ['a failing list after a drop', (api: FakeApiServer) => {
      api.compact()
      api.failNext({ method: 'GET', path: '/api/v1/pods', status: 500, times: 2 })
      api.dropWatches()
    }],
  ])('keeps following pods across %s', async (_name, disturb) => {
    const agent = await start()
    const a = api.create('Pod', podObject('a', [{ name: 's', emptyDir: {} }]))
    await until('a mounted', () => mountedCount(agent, a.metadata.uid as string) === 1)
    const podWatches = () => api.openWatches('pods')
    await until('watching pods', () => podWatches() === 1)
    disturb(api)
    const b = api.create('Pod', podObject('b', [{ name: 's', emptyDir: {} }]))
    await until('b mounted', () => mountedCount(agent, b.metadata.uid as string) === 1)
    api.delete('Pod', 'default', 'a', { gracePeriodSeconds: 0 })
    await until('a unmounted', () => !agent.manager.hasPossiblyMountedVolumesForPod(a.metadata.uid as string))
    await until('watching pods again', () => podWatches() === 1)
  })

  it('unmounts a finished pod and leaves its object; deletes it only once it carries a deletion timestamp', async () => {
    const agent = await start()
    const volumes = [
      { name: 'scratch', emptyDir: {} },
      { name: 'config', configMap: { name: 'settings' } },
    ]
    // A finalizer (as a Job controller's tracking one) keeps the object once its deletion is asked.
    const base = podObject('done', volumes)
    const done = api.create('Pod', { ...base, metadata: { ...base.metadata, finalizers: ['example.com/keep'] } })
    const ending = api.create('Pod', podObject('ending', volumes))
    const [doneUID, endingUID] = [done.metadata.uid as string, ending.metadata.uid as string]
    await until('both mounted', () => mountedCount(agent, doneUID) === 2 && mountedCount(agent, endingUID) === 2)
    const deletes = (name: string) => api.requests.filter((r) => r.method === 'DELETE' && r.path === `/api/v1/namespaces/default/pods/${name}`)

    // Succeeded, no deletion timestamp: the kubelet unmounts and leaves the object to its owner.
    api.patch('Pod', 'default', 'done', { status: { phase: 'Succeeded' } }, { subresource: 'status' })
    await until('done unmounted', () => !agent.manager.hasPossiblyMountedVolumesForPod(doneUID) && podMounts(host).every((m) => !m.includes(doneUID)))
    // Long enough for a finalize to have happened (it took under 100 ms), with pod syncs in between.
    await new Promise((resolve) => setTimeout(resolve, 500))
    expect(api.get('Pod', 'default', 'done')?.metadata.uid).toBe(doneUID)
    expect(deletes('done')).toEqual([])

    // Being deleted (the grace period running) and then finished: deleted once its volumes are gone.
    api.delete('Pod', 'default', 'ending', { gracePeriodSeconds: 30 })
    expect(api.get('Pod', 'default', 'ending')?.metadata.deletionTimestamp).toBeDefined()
    api.patch('Pod', 'default', 'ending', { status: { phase: 'Failed' } }, { subresource: 'status' })
    await until('ending deleted from the API', () => api.get('Pod', 'default', 'ending') === undefined)
    expect(agent.manager.hasPossiblyMountedVolumesForPod(endingUID)).toBe(false)
    expect(deletes('ending').map((r) => r.status)).toContain(200)

    // The finished pod's owner deletes it later: the agent finishes the deletion (grace 0, its UID).
    api.delete('Pod', 'default', 'done', { gracePeriodSeconds: 30 })
    await until('the agent deleted done', () => deletes('done').some((r) => r.query.gracePeriodSeconds === '0' && r.status === 200))
    api.patch('Pod', 'default', 'done', { metadata: { finalizers: null } })
    expect(api.get('Pod', 'default', 'done')).toBeUndefined()
  })

  it('stops leaving mounts in place, and a restart on the same host keeps them', async () => {
    const first = await start()
    const web = api.create('Pod', podObject('web', WEB_VOLUMES))
    const uid = web.metadata.uid as string
    await until('web mounted', () => mountedCount(first, uid) === 4)
    const before = podMounts(host)
    await first.stop()
    expect(podMounts(host)).toEqual(before)
    expect(volumesInUse()).toEqual([expect.stringContaining(IMAGE)])

    const second = await start()
    await until('web mounted again', () => mountedCount(second, uid) === 4)
    expect(podMounts(host)).toEqual(before)
    expect(volumesInUse()).toEqual([expect.stringContaining(IMAGE)])
  })

  it('is refused by the Node authorizer what its node may not read, and says so on the pod', async () => {
    const agent = await start()
    api.create('Pod', { ...podObject('other', []), spec: { ...podObject('other', []).spec, nodeName: 'n2' } })
    const mine = api.create('Pod', podObject('mine', [{ name: 'cfg', configMap: { name: 'settings' } }]))
    await until('mine mounted', () => mountedCount(agent, mine.metadata.uid as string) === 1)
    expect(agent.pods.getPods().map((p) => p.metadata.name)).toEqual(['mine'])
    expect(api.requests.filter((r) => r.status === 403)).toEqual([])
  })
})
