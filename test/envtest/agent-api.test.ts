/**
 * The agent in API mode against the real control plane (kube-apiserver v1.32, etcd, the controller
 * manager's attach/detach, PV binder, ServiceAccount and root CA controllers), on the memory host,
 * with a node identity (the Node authorizer and NodeRestriction apply): registration, pods by the
 * `spec.nodeName` field selector, every volume kind a pod of the API has (the kube-api-access volume
 * the ServiceAccount admission plugin adds, a TokenRequest, ConfigMaps and Secrets watched one by one),
 * volumesInUse beside a second writer, the attach/detach controller's VolumeAttachment, events, pod
 * deletion, a relist after the apiserver lost its watch cache, and restarts of either side. Each test
 * ends with no 403 in the audit log for the node.
 */
import { createMemoryHost, type MemoryHost } from '@kubevol/adapter-mock'
import type { Agent } from '@kubevol/agent'
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest'
import { podMounts, until } from '../../packages/agent/test/helpers.js'
import { answers, createPod, podFile, podObject, startApiAgent } from './agent-fixtures.js'
import { type ControlPlane, describeWithControlPlane, startControlPlane } from './control-plane.js'

const IMAGE = '/var/lib/images/disk.img'
const DRIVER = 'filedisk.kubevol.io'
const UNIQUE = `kubernetes.io/csi/${DRIVER}^${IMAGE}`
const MERGE = { contentType: 'application/merge-patch+json' }

describeWithControlPlane('the agent in API mode on the real control plane', () => {
  let cp: ControlPlane
  const agents: Agent[] = []
  let stopAttacher = () => {}

  beforeAll(async () => {
    cp = await startControlPlane({ controllerManager: true, nodes: ['node1'] })
    // No CSIDriver object for the fileDisk driver here: the attach/detach controller makes a
    // VolumeAttachment and waits for an attacher to mark it attached (this file's external attacher).
    stopAttacher = startExternalAttacher(cp, DRIVER)
    await cp.must('POST', '/api/v1/namespaces/default/configmaps', { metadata: { name: 'settings' }, data: { mode: 'fast' } })
    await cp.must('POST', '/api/v1/namespaces/default/secrets', { metadata: { name: 'creds' }, data: { password: Buffer.from('one').toString('base64') } })
  })
  afterEach(async () => {
    for (const agent of agents.splice(0)) await agent.stop()
  })
  afterAll(async () => {
    stopAttacher()
    await cp?.stop()
  })

  /** An agent for `node` with a node identity (a client certificate of system:node:<node>). */
  async function start(host: MemoryHost, node: string, config: Record<string, unknown> = {}): Promise<Agent> {
    const agent = await startApiAgent(host, cp.kubeConfig({ user: `system:node:${node}`, groups: ['system:nodes'] }), { nodeName: node, ...config })
    agents.push(agent)
    return agent
  }
  const node = (name: string) => cp.must<{ metadata: { annotations?: Record<string, string>; labels?: Record<string, string> }; status?: { volumesInUse?: string[]; volumesAttached?: { name: string }[]; conditions?: { type: string }[] } }>('GET', `/api/v1/nodes/${name}`)
  const mounted = (agent: Agent, uid: string) => agent.manager.getMountedVolumesForPod(uid).size
  /** Waits until `count` volumes of the pod are mounted; a timeout says what the agent knows of the pod. */
  const untilMounted = async (what: string, agent: Agent, uid: string, count: number, timeoutMs = 30_000) => {
    try {
      await until(what, () => mounted(agent, uid) === count, timeoutMs)
    } catch (err) {
      throw new Error(`${(err as Error).message}: ${JSON.stringify(agent.pod(uid))}`)
    }
  }
  const noForbidden = (name: string) => expect(answers(cp, `system:node:${name}`, 403)).toEqual([])

  it('registers its Node and mounts every kind of volume a pod of the API has, kube-api-access included', async () => {
    const host = createMemoryHost()
    host.allocateFile(IMAGE, 32 << 20)
    const agent = await start(host, 'reg')
    await until('the Node registered', async () => (await cp.request('GET', '/api/v1/nodes/reg')).status === 200)
    expect(await node('reg')).toMatchObject({
      metadata: { annotations: { 'volumes.kubernetes.io/controller-managed-attach-detach': 'true' }, labels: { 'kubernetes.io/hostname': 'reg', 'kubernetes.io/os': 'linux' } },
    })

    // A claim bound by the PV binder to a fileDisk PV.
    await cp.must('POST', '/api/v1/persistentvolumes', {
      metadata: { name: 'pv-disk' },
      spec: { capacity: { storage: '32Mi' }, accessModes: ['ReadWriteOnce'], persistentVolumeReclaimPolicy: 'Retain', storageClassName: '', csi: { driver: DRIVER, volumeHandle: IMAGE, fsType: 'ext4' } },
    })
    await cp.must('POST', '/api/v1/namespaces/default/persistentvolumeclaims', {
      metadata: { name: 'disk' },
      spec: { accessModes: ['ReadWriteOnce'], storageClassName: '', volumeName: 'pv-disk', resources: { requests: { storage: '32Mi' } } },
    })
    await until('the claim bound', async () => (await cp.must<{ status?: { phase?: string } }>('GET', '/api/v1/namespaces/default/persistentvolumeclaims/disk')).status?.phase === 'Bound')

    const volumes = [
      { name: 'scratch', emptyDir: {} },
      { name: 'config', configMap: { name: 'settings' } },
      { name: 'creds', secret: { secretName: 'creds' } },
      { name: 'info', downwardAPI: { items: [{ path: 'name', fieldRef: { fieldPath: 'metadata.name' } }] } },
      { name: 'token', projected: { sources: [{ serviceAccountToken: { path: 'token', audience: 'vault', expirationSeconds: 3600 } }, { configMap: { name: 'settings' } }] } },
      { name: 'data', persistentVolumeClaim: { claimName: 'disk' } },
    ]
    const uid = await createPod(cp, podObject('web', 'reg', volumes))
    // A pod of another node is neither listed nor mounted.
    await createPod(cp, podObject('elsewhere', 'not-reg', [{ name: 'scratch', emptyDir: {} }]))
    // Six volumes and the kube-api-access-* the ServiceAccount admission plugin added.
    await untilMounted('web mounted', agent, uid, 7)
    expect(agent.pods.getPods().map((p) => p.metadata.name)).toEqual(['web'])

    expect(await podFile(host, uid, 'kubernetes.io~configmap', 'config', 'mode')).toBe('fast')
    expect(await podFile(host, uid, 'kubernetes.io~secret', 'creds', 'password')).toBe('one')
    expect(await podFile(host, uid, 'kubernetes.io~downward-api', 'info', 'name')).toBe('web')
    // The TokenRequest: a token for the pod's ServiceAccount, bound to the pod, for the audience asked.
    const claims = jwtClaims((await podFile(host, uid, 'kubernetes.io~projected', 'token', 'token')) ?? '')
    expect(claims).toMatchObject({ aud: ['vault'], sub: 'system:serviceaccount:default:default', 'kubernetes.io': { pod: { name: 'web', uid } } })
    const apiAccess = (await cp.must<{ spec: { volumes: { name: string }[] } }>('GET', '/api/v1/namespaces/default/pods/web')).spec.volumes.find((v) => v.name.startsWith('kube-api-access-'))?.name ?? ''
    expect(await podFile(host, uid, 'kubernetes.io~projected', apiAccess, 'ca.crt')).toBe(cp.caPem)
    expect(await podFile(host, uid, 'kubernetes.io~projected', apiAccess, 'namespace')).toBe('default')

    // The attach/detach controller attached the fileDisk through a VolumeAttachment; the node reports it in use.
    expect((await node('reg')).status?.volumesAttached?.map((v) => v.name)).toEqual([UNIQUE])
    await until('volumesInUse', async () => JSON.stringify((await node('reg')).status?.volumesInUse) === JSON.stringify([UNIQUE]))
    const attachments = await cp.must<{ items: { spec: { nodeName: string; attacher: string } }[] }>('GET', '/apis/storage.k8s.io/v1/volumeattachments')
    expect(attachments.items.map((va) => va.spec)).toContainEqual(expect.objectContaining({ nodeName: 'reg', attacher: DRIVER }))

    // Graceful deletion: volumes torn down, the controller detaches, the agent deletes the object.
    await cp.must('DELETE', '/api/v1/namespaces/default/pods/web', { gracePeriodSeconds: 30 })
    await until('web deleted by the agent', async () => (await cp.request('GET', '/api/v1/namespaces/default/pods/web')).status === 404, 30_000)
    expect(podMounts(host).filter((m) => m.includes(uid))).toEqual([])
    await until('volumesInUse emptied', async () => ((await node('reg')).status?.volumesInUse ?? []).length === 0)
    await until('the VolumeAttachment gone', async () => (await cp.must<{ items: { spec: { nodeName: string } }[] }>('GET', '/apis/storage.k8s.io/v1/volumeattachments')).items.every((va) => va.spec.nodeName !== 'reg'), 30_000)
    const deletes = cp.auditEvents().filter((e) => e.user.username === 'system:node:reg' && e.verb === 'delete' && e.objectRef?.resource === 'pods')
    expect(deletes.map((e) => e.responseStatus?.code)).toEqual([200])
    noForbidden('reg')
  })

  it('follows ConfigMaps and Secrets by single-object watches, and posts FailedMount events', async () => {
    const host = createMemoryHost()
    await start(host, 'watcher')
    const uid = await createPod(cp, podObject('watched', 'watcher', [{ name: 'config', configMap: { name: 'settings' } }, { name: 'creds', secret: { secretName: 'creds' } }], { automount: false }))
    await until('the files written', async () => (await podFile(host, uid, 'kubernetes.io~configmap', 'config', 'mode')) === 'fast', 30_000)
    const watches = () => cp.auditEvents().filter((e) => e.user.username === 'system:node:watcher' && e.verb === 'watch' && (e.objectRef?.resource === 'configmaps' || e.objectRef?.resource === 'secrets'))
    await until('both watched', () => new Set(watches().map((e) => e.objectRef?.resource)).size === 2)
    for (const w of watches()) expect(decodeURIComponent(w.requestURI)).toMatch(/fieldSelector=metadata\.name=(settings|creds)/)

    const started = Date.now()
    await cp.must('PATCH', '/api/v1/namespaces/default/configmaps/settings', { data: { mode: 'slow' } }, MERGE)
    await cp.must('PATCH', '/api/v1/namespaces/default/secrets/creds', { data: { password: Buffer.from('two').toString('base64') } }, MERGE)
    await until(
      'the files changed',
      async () => (await podFile(host, uid, 'kubernetes.io~configmap', 'config', 'mode')) === 'slow' && (await podFile(host, uid, 'kubernetes.io~secret', 'creds', 'password')) === 'two',
      5_000,
    )
    expect(Date.now() - started).toBeLessThan(5_000)
    await cp.must('PATCH', '/api/v1/namespaces/default/configmaps/settings', { data: { mode: 'fast' } }, MERGE)
    await cp.must('PATCH', '/api/v1/namespaces/default/secrets/creds', { data: { password: Buffer.from('one').toString('base64') } }, MERGE)

    // A missing ConfigMap: FailedMount with kubelet 1.32's text, posted to the API; then it mounts.
    const lateUID = await createPod(cp, podObject('late', 'watcher', [{ name: 'cfg', configMap: { name: 'later' } }], { automount: false }))
    type Event = { reason: string; message: string; type: string; count?: number; involvedObject: { uid: string; kind: string } }
    const failed = async () => (await cp.must<{ items: Event[] }>('GET', '/api/v1/namespaces/default/events')).items.filter((e) => e.involvedObject.uid === lateUID && e.reason === 'FailedMount')
    await until('FailedMount posted', async () => (await failed()).length > 0, 30_000)
    expect((await failed())[0]).toMatchObject({ type: 'Warning', message: 'MountVolume.SetUp failed for volume "cfg" : configmap "later" not found', involvedObject: { kind: 'Pod' } })
    await cp.must('POST', '/api/v1/namespaces/default/configmaps', { metadata: { name: 'later' }, data: { a: '1' } })
    await until('late mounted', async () => (await podFile(host, lateUID, 'kubernetes.io~configmap', 'cfg', 'a')) === '1', 30_000)

    // The pod goes (grace 0): its objects are no longer watched.
    await cp.must('DELETE', '/api/v1/namespaces/default/pods/watched', { gracePeriodSeconds: 0 })
    await cp.must('DELETE', '/api/v1/namespaces/default/pods/late', { gracePeriodSeconds: 0 })
    await until('unmounted', () => podMounts(host).length === 0, 30_000)
    noForbidden('watcher')
  })

  it('keeps volumesInUse right beside a second writer of the Node status', async () => {
    const host = createMemoryHost()
    host.allocateFile('/var/lib/images/disk2.img', 32 << 20)
    await cp.must('POST', '/api/v1/persistentvolumes', {
      metadata: { name: 'pv-disk2' },
      spec: { capacity: { storage: '32Mi' }, accessModes: ['ReadWriteOnce'], storageClassName: '', csi: { driver: DRIVER, volumeHandle: '/var/lib/images/disk2.img', fsType: 'ext4' } },
    })
    await cp.must('POST', '/api/v1/namespaces/default/persistentvolumeclaims', { metadata: { name: 'disk2' }, spec: { accessModes: ['ReadWriteOnce'], storageClassName: '', volumeName: 'pv-disk2', resources: { requests: { storage: '32Mi' } } } })
    const agent = await start(host, 'shared')
    const uid = await createPod(cp, podObject('user', 'shared', [{ name: 'data', persistentVolumeClaim: { claimName: 'disk2' } }], { automount: false }))
    await until('mounted', () => mounted(agent, uid) === 1, 30_000)
    const unique = `kubernetes.io/csi/${DRIVER}^/var/lib/images/disk2.img`

    // Another writer (as a node problem detector) patches the status again and again, conditions and a wrong volumesInUse.
    for (let i = 0; i < 20; i++) {
      await cp.must('PATCH', '/api/v1/nodes/shared/status', { status: { conditions: [{ type: 'DiskPressure', status: 'False', reason: `Check${i}`, lastHeartbeatTime: new Date().toISOString() }], ...(i % 5 === 0 ? { volumesInUse: [] } : {}) } }, { contentType: 'application/strategic-merge-patch+json' })
    }
    await until('volumesInUse restored', async () => JSON.stringify((await node('shared')).status?.volumesInUse) === JSON.stringify([unique]), 10_000)
    expect((await node('shared')).status?.conditions?.map((c) => c.type)).toContain('DiskPressure')
    expect((await node('shared')).status?.volumesAttached?.map((v) => v.name)).toEqual([unique])
    noForbidden('shared')
  })

  it('survives an apiserver crash (a relist past the new watch cache) and its own restart with the mounts in place', async () => {
    const host = createMemoryHost()
    const first = await start(host, 'crash', { watchRetryMs: 100 })
    const a = await createPod(cp, podObject('a', 'crash', [{ name: 's', emptyDir: {} }, { name: 'config', configMap: { name: 'settings' } }], { automount: false }))
    await until('a mounted', () => mounted(first, a) === 2, 30_000)
    const podLists = () => cp.auditEvents().filter((e) => e.user.username === 'system:node:crash' && e.verb === 'list' && e.objectRef?.resource === 'pods').length
    const listsBefore = podLists()

    // The cluster moves on (the resourceVersion the agent last saw of pods falls behind), the apiserver dies and
    // comes back: its new watch cache starts at the current resourceVersion, so a watch resumed from an older
    // one is answered 410 Expired and the agent lists again.
    for (let i = 0; i < 5; i++) await cp.must('POST', '/api/v1/namespaces/default/configmaps', { metadata: { generateName: 'noise-' } })
    const killed = Date.now()
    await cp.restartApiServer()
    const ready = Date.now()
    const b = await createPod(cp, podObject('b', 'crash', [{ name: 's', emptyDir: {} }], { automount: false }))
    await until('b mounted after the apiserver restart', () => mounted(first, b) === 1, 30_000)
    await cp.must('DELETE', '/api/v1/namespaces/default/pods/a', { gracePeriodSeconds: 0 })
    await until('a unmounted', () => !first.manager.hasPossiblyMountedVolumesForPod(a), 30_000)
    expect(podLists()).toBeGreaterThan(listsBefore)
    // On the wire: the pod watch resumed from its old resourceVersion (answered 410 Expired inside the stream),
    // then a list, then a watch from the list's newer resourceVersion.
    const rv = (uri: string) => Number(new URL(uri, 'https://x').searchParams.get('resourceVersion') ?? Number.NaN)
    const afterRestart = cp
      .auditEvents()
      .filter((e) => e.user.username === 'system:node:crash' && e.objectRef?.resource === 'pods' && e.stage === (e.verb === 'watch' ? 'ResponseStarted' : 'ResponseComplete') && Date.parse(e.requestReceivedTimestamp) >= killed)
      .sort((x, y) => Date.parse(x.requestReceivedTimestamp) - Date.parse(y.requestReceivedTimestamp))
    const resumed = afterRestart.findIndex((e) => e.verb === 'watch')
    const relisted = afterRestart.findIndex((e, i) => i > resumed && e.verb === 'list')
    const rewatched = afterRestart.findIndex((e, i) => i > relisted && e.verb === 'watch')
    expect([resumed, relisted, rewatched].every((i) => i >= 0)).toBe(true)
    expect(rv(afterRestart[rewatched]?.requestURI ?? '')).toBeGreaterThan(rv(afterRestart[resumed]?.requestURI ?? ''))
    // The ConfigMap watch came back too: a change reaches the pod that still reads it.
    const c = await createPod(cp, podObject('c', 'crash', [{ name: 'config', configMap: { name: 'settings' } }], { automount: false }))
    await until('c mounted', () => mounted(first, c) === 1, 30_000)

    // The agent stops and starts again on the same host: the mounts stay, nothing is mounted twice.
    const before = podMounts(host)
    await first.stop()
    agents.splice(agents.indexOf(first), 1)
    expect(podMounts(host)).toEqual(before)
    const second = await start(host, 'crash')
    await until('b and c mounted again', () => mounted(second, b) === 1 && mounted(second, c) === 1, 30_000)
    expect(podMounts(host)).toEqual(before)
    // A restarted apiserver's Node authorizer starts with an empty graph: until its informers have listed
    // the pods (about a second after /readyz), a node's read of an object its pod references is 403
    // "no relationship found". The agent tries again; outside that window the node met no 403.
    const forbidden = cp.auditEvents().filter((e) => e.user.username === 'system:node:crash' && e.responseStatus?.code === 403)
    for (const e of forbidden) {
      expect(e.responseStatus?.message).toMatch(/no relationship found between node 'crash' and this object/)
      expect(Date.parse(e.requestReceivedTimestamp)).toBeGreaterThanOrEqual(killed)
      expect(Date.parse(e.requestReceivedTimestamp)).toBeLessThan(ready + 5_000)
    }
  })
})

/** The claims of a JWT (no signature check: the apiserver issued it to the agent). */
function jwtClaims(token: string): Record<string, unknown> {
  const payload = token.split('.')[1] ?? ''
  return JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Record<string, unknown>
}

/**
 * An external attacher for `driver` (what a CSI driver's csi-attacher sidecar does): every
 * VolumeAttachment of the driver is marked attached. Polls every 100 ms; returns the stop.
 */
function startExternalAttacher(cp: ControlPlane, driver: string): () => void {
  let stopped = false
  const loop = async () => {
    while (!stopped) {
      try {
        const list = await cp.must<{ items: { metadata: { name: string }; spec: { attacher: string }; status?: { attached?: boolean } }[] }>('GET', '/apis/storage.k8s.io/v1/volumeattachments')
        for (const va of list.items) {
          if (va.spec.attacher !== driver || va.status?.attached) continue
          await cp.request('PATCH', `/apis/storage.k8s.io/v1/volumeattachments/${va.metadata.name}/status`, { status: { attached: true } }, MERGE)
        }
      } catch {
        // The apiserver is restarting: try again.
      }
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  }
  void loop()
  return () => {
    stopped = true
  }
}
