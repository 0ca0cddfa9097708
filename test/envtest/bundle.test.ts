/**
 * The deploy bundle as shipped, on the real control plane: deploy/rbac.yaml and
 * deploy/csidriver-filedisk.yaml applied as an administrator would, the agent started with the
 * DaemonSet's arguments (deploy/daemonset.yaml, `$(NODE_NAME)` expanded as the kubelet does) and the
 * bundle's ServiceAccount token, on the memory host: every volume kind a pod of the API can have
 * mounts, a deleted pod is finalized, and the apiserver's audit log holds no 403 for the
 * ServiceAccount. Then the role is held to what the agent used: every right it grants is one the
 * agent exercised here, or one of the few paths this run does not drive, named with its reason.
 */
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { createMemoryHost, type MemoryHost } from '@kubevol/adapter-mock'
import { type Agent, loadAgentConfig, startAgent } from '@kubevol/agent'
import { parseAllDocuments } from 'yaml'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { podMounts, until } from '../../packages/agent/test/helpers.js'
import { answers, createPod, podFile, podObject } from './agent-fixtures.js'
import { applyManifests, type ClusterRole, type Manifest, rightsOf } from './apply.js'
import { type ControlPlane, describeWithControlPlane, startControlPlane } from './control-plane.js'

const deploy = fileURLToPath(new URL('../../deploy/', import.meta.url))
const manifests = (name: string): Manifest[] => parseAllDocuments(readFileSync(`${deploy}${name}`, 'utf8')).map((d) => d.toJS() as Manifest)
const SA_USER = 'system:serviceaccount:kube-system:kubevol'
const MACHINE = 'machine1'
const NODE = `${MACHINE}-kubevol`
const IMAGE = '/var/lib/images/bundle.img'
const OTHER = 'machine2-kubevol'

/**
 * deploy/README.md's table "What each identity may do": row → identity → yes/no (the first word of a
 * cell; what follows says why).
 */
function rightsTable(): Record<string, Record<string, string>> {
  const readme = readFileSync(`${deploy}README.md`, 'utf8')
  const section = readme.slice(readme.indexOf('### What each identity may do'))
  // The section's first table: its lines from the first that starts with `|` to the first that does not.
  const all = section.split('\n')
  const first = all.findIndex((l) => l.startsWith('|'))
  const end = all.findIndex((l, i) => i > first && !l.startsWith('|'))
  const lines = all.slice(first, end === -1 ? undefined : end)
  const cells = (l: string) => l.split('|').slice(1, -1).map((c) => c.trim())
  const [header, , ...body] = lines
  const identities = cells(header ?? '').slice(1).map((c) => c.replace(/`/g, ''))
  const table: Record<string, Record<string, string>> = {}
  for (const line of body) {
    const [row, ...values] = cells(line)
    table[row ?? ''] = Object.fromEntries(identities.map((id, i) => [id, (/^(yes|no)\b/i.exec(values[i] ?? '')?.[1] ?? values[i] ?? '').toLowerCase()]))
  }
  return table
}

/**
 * The token the kubelet gives the DaemonSet's pod: the machine's Node, the DaemonSet's pod bound to it
 * (an object only: nothing runs it), and a TokenRequest for the ServiceAccount bound to that pod, so the
 * token's user carries the pod's node as the admission policy of rbac.yaml expects.
 */
async function daemonSetPodToken(cp: ControlPlane): Promise<string> {
  await cp.must('POST', '/api/v1/nodes', { metadata: { name: MACHINE } })
  const pod = await cp.must<{ metadata: { name: string; uid: string } }>('POST', '/api/v1/namespaces/kube-system/pods', {
    metadata: { name: 'kubevol-x7k2p', labels: { 'app.kubernetes.io/name': 'kubevol' } },
    spec: { nodeName: MACHINE, serviceAccountName: 'kubevol', automountServiceAccountToken: false, containers: [{ name: 'agent', image: 'kubevol/agent:0.1.0' }] },
  })
  return cp.serviceAccountToken('kube-system', 'kubevol', { boundTo: pod.metadata })
}

/** The agent's arguments in the DaemonSet, with `$(VAR)` expanded from its environment as the kubelet does. */
function daemonSetArgs(): { argv: string[]; env: Record<string, string> } {
  const [ds] = manifests('daemonset.yaml') as unknown as { spec: { template: { spec: { containers: { args: string[]; env?: { name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } }[] }[] } } } }[]
  const container = ds?.spec.template.spec.containers[0]
  const env: Record<string, string> = {}
  for (const e of container?.env ?? []) {
    if (e.value !== undefined) env[e.name] = e.value
    else if (e.valueFrom?.fieldRef?.fieldPath === 'spec.nodeName') env[e.name] = MACHINE
  }
  const argv = (container?.args ?? []).map((a) => a.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (whole, name: string) => env[name] ?? whole))
  return { argv, env }
}

describeWithControlPlane('the deploy bundle as shipped, on the real control plane', () => {
  let cp: ControlPlane
  let host: MemoryHost
  let agent: Agent | undefined
  let token: string

  beforeAll(async () => {
    cp = await startControlPlane({ controllerManager: true })
    await applyManifests(cp, [...manifests('rbac.yaml'), ...manifests('csidriver-filedisk.yaml')])
    host = createMemoryHost()
    host.allocateFile(IMAGE, 32 << 20)
    await host.mkdir('/srv/shared', { recursive: true })
    await host.mkdir('/mnt/disks/ssd0', { recursive: true })
    const { argv, env } = daemonSetArgs()
    const config = await loadAgentConfig({ argv, env })
    expect(config).toMatchObject({ mode: 'api', nodeName: NODE, registerNode: true, controllerAttachDetach: true, finalizePodDeletion: true })
    // The DaemonSet's own arguments; only the status port (10280 is the node's) and the host (in memory,
    // so no watch of the machine's plugins_registry for CSI drivers) differ.
    token = await daemonSetPodToken(cp)
    agent = await startAgent({ ...config, port: 0, pluginRegistration: false }, { host, kubeConfig: cp.kubeConfig({ token }), log: { silent: process.env.KUBEVOL_ENVTEST_VERBOSE !== '1' } })
  })
  afterAll(async () => {
    await agent?.stop()
    await cp?.stop()
  })

  it('mounts every volume kind with the ServiceAccount the bundle gives it, finalizes a deleted pod, and meets no 403', async () => {
    const a = agent as Agent
    await until('the Node registered', async () => (await cp.request('GET', `/api/v1/nodes/${NODE}`)).status === 200, 30_000)
    const node = await cp.must<{ metadata: { labels: Record<string, string>; annotations: Record<string, string> } }>('GET', `/api/v1/nodes/${NODE}`)
    expect(node.metadata.labels).toMatchObject({ 'kubevol.io/host': MACHINE, 'kubernetes.io/hostname': NODE })

    await cp.must('POST', '/api/v1/namespaces/default/configmaps', { metadata: { name: 'cfg' }, data: { mode: 'fast' } })
    await cp.must('POST', '/api/v1/namespaces/default/secrets', { metadata: { name: 'sec' }, data: { key: Buffer.from('s3cret').toString('base64') } })
    const claim = async (name: string, pv: Record<string, unknown>) => {
      await cp.must('POST', '/api/v1/persistentvolumes', { metadata: { name: `pv-${name}` }, spec: { capacity: { storage: '32Mi' }, accessModes: ['ReadWriteOnce'], storageClassName: '', persistentVolumeReclaimPolicy: 'Retain', ...pv } })
      await cp.must('POST', '/api/v1/namespaces/default/persistentvolumeclaims', { metadata: { name }, spec: { accessModes: ['ReadWriteOnce'], storageClassName: '', volumeName: `pv-${name}`, resources: { requests: { storage: '32Mi' } } } })
    }
    await claim('disk', { csi: { driver: 'filedisk.kubevol.io', volumeHandle: IMAGE, fsType: 'ext4' } })
    await claim('local', {
      local: { path: '/mnt/disks/ssd0' },
      nodeAffinity: { required: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: [NODE] }] }] } },
    })
    for (const name of ['disk', 'local']) {
      await until(`claim ${name} bound`, async () => (await cp.must<{ status?: { phase?: string } }>('GET', `/api/v1/namespaces/default/persistentvolumeclaims/${name}`)).status?.phase === 'Bound', 30_000)
    }

    const volumes = [
      { name: 'scratch', emptyDir: {} },
      { name: 'memory', emptyDir: { medium: 'Memory', sizeLimit: '16Mi' } },
      { name: 'host', hostPath: { path: '/srv/shared', type: 'Directory' } },
      { name: 'config', configMap: { name: 'cfg' } },
      { name: 'secret', secret: { secretName: 'sec' } },
      { name: 'info', downwardAPI: { items: [{ path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } }] } },
      {
        name: 'all',
        projected: {
          sources: [
            { serviceAccountToken: { path: 'token', audience: 'vault', expirationSeconds: 3600 } },
            { configMap: { name: 'cfg', items: [{ key: 'mode', path: 'mode' }] } },
            { secret: { name: 'sec', items: [{ key: 'key', path: 'key' }] } },
            { downwardAPI: { items: [{ path: 'name', fieldRef: { fieldPath: 'metadata.name' } }] } },
          ],
        },
      },
      { name: 'disk', persistentVolumeClaim: { claimName: 'disk' } },
      { name: 'local', persistentVolumeClaim: { claimName: 'local' } },
    ]
    const uid = await createPod(cp, podObject('every', NODE, volumes))
    try {
      // The nine volumes and kube-api-access-*.
      await until('every volume mounted', () => a.manager.getMountedVolumesForPod(uid).size === 10, 30_000)
    } catch (err) {
      throw new Error(`${(err as Error).message}: ${JSON.stringify(a.pod(uid))}\n403s: ${answers(cp, SA_USER, 403).join('\n')}`)
    }
    expect(await podFile(host, uid, 'kubernetes.io~configmap', 'config', 'mode')).toBe('fast')
    expect(await podFile(host, uid, 'kubernetes.io~secret', 'secret', 'key')).toBe('s3cret')
    expect(await podFile(host, uid, 'kubernetes.io~projected', 'all', 'key')).toBe('s3cret')
    expect(await podFile(host, uid, 'kubernetes.io~projected', 'all', 'name')).toBe('every')
    // A change reaches the files through the single-object watch the role now allows.
    await cp.must('PATCH', '/api/v1/namespaces/default/configmaps/cfg', { data: { mode: 'slow' } }, { contentType: 'application/merge-patch+json' })
    await until('the change on disk', async () => (await podFile(host, uid, 'kubernetes.io~configmap', 'config', 'mode')) === 'slow', 10_000)
    // A pod whose ConfigMap does not exist: the FailedMount event is posted.
    const lateUID = await createPod(cp, podObject('late', NODE, [{ name: 'cfg', configMap: { name: 'later' } }], { automount: false }))
    type Event = { reason: string; involvedObject: { uid: string } }
    await until('FailedMount posted', async () => (await cp.must<{ items: Event[] }>('GET', '/api/v1/namespaces/default/events')).items.some((e) => e.involvedObject.uid === lateUID && e.reason === 'FailedMount'), 30_000)
    await cp.must('DELETE', '/api/v1/namespaces/default/pods/late', { gracePeriodSeconds: 0 })

    // Graceful deletion: torn down, then the agent deletes the object.
    await cp.must('DELETE', '/api/v1/namespaces/default/pods/every', { gracePeriodSeconds: 30 })
    await until('the pod deleted by the agent', async () => (await cp.request('GET', '/api/v1/namespaces/default/pods/every')).status === 404, 30_000)
    expect(podMounts(host).filter((m) => m.includes(uid))).toEqual([])

    expect(answers(cp, SA_USER, 403)).toEqual([])
  })

  it('grants the ServiceAccount only rights the agent used, or named paths this run does not drive', () => {
    const role = manifests('rbac.yaml').find((m) => m.kind === 'ClusterRole') as ClusterRole
    const granted = rightsOf(role)
    const used = new Set(
      cp
        .auditEvents()
        .filter((e) => e.user.username === SA_USER && e.objectRef?.resource)
        .map((e) => `${e.verb} ${e.objectRef?.apiGroup ? `${e.objectRef.apiGroup}/` : ''}${e.objectRef?.resource}${e.objectRef?.subresource ? `/${e.objectRef.subresource}` : ''}`),
    )
    // Rights for paths that need what this run has not: a CSI driver registering (CSINode, the Node's
    // nodeid annotation), a CSI volume the attach/detach controller attaches, a node expansion, an
    // existing Node whose attach/detach annotation is set again, an event repeated, and an attachable volume.
    const notDrivenHere = new Set([
      // The Get and Cache change detection strategies read ConfigMaps and Secrets by name.
      'get configmaps',
      'get secrets',
      'get storage.k8s.io/csinodes',
      'create storage.k8s.io/csinodes',
      'update storage.k8s.io/csinodes',
      'patch nodes',
      'get storage.k8s.io/volumeattachments',
      'patch persistentvolumeclaims/status',
      // volumesInUse lists attachable volumes only (as the kubelet's): the bundle's fileDisk driver says
      // attachRequired: false, so this run has none (test/envtest/agent-api.test.ts writes it).
      'patch nodes/status',
      'patch events',
    ])
    const unused = granted.filter((r) => !used.has(r) && !notDrivenHere.has(r))
    expect(unused).toEqual([])
    // And nothing the agent used was outside the role (the 403 check above says the same from the server's side).
    expect([...used].filter((r) => !granted.includes(r))).toEqual([])
  })
  it("holds each identity of the bundle to deploy/README.md's table (what it may do, as measured here)", async () => {
    // A pod of this node and one of another node, each with a Secret of its own and its own ServiceAccount.
    await cp.must('POST', '/api/v1/nodes', { metadata: { name: OTHER } }, { accept: [409] })
    await cp.must('POST', '/api/v1/nodes', { metadata: { name: NODE } }, { accept: [409] })
    for (const who of ['mine', 'theirs']) {
      await cp.must('POST', '/api/v1/namespaces/default/serviceaccounts', { metadata: { name: `${who}-sa` } })
      await cp.must('POST', '/api/v1/namespaces/default/secrets', { metadata: { name: `${who}-secret` }, data: { k: Buffer.from(who).toString('base64') } })
      await createPod(cp, podObject(who, who === 'mine' ? NODE : OTHER, [{ name: 's', secret: { secretName: `${who}-secret` } }], { serviceAccountName: `${who}-sa`, automount: false }))
    }
    const uidOf = async (name: string) => (await cp.must<{ metadata: { uid: string } }>('GET', `/api/v1/namespaces/default/pods/${name}`)).metadata.uid
    const tokenFor = async (pod: string) => ({ apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: pod, uid: await uidOf(pod) } } })
    const merge = 'application/merge-patch+json'
    // Each row: one request; writes with dryRun=All (authorized and admitted, never stored).
    const rows: Record<string, [method: string, path: string, body?: unknown, contentType?: string]> = {
      'list the pods of its node': ['GET', `/api/v1/pods?fieldSelector=spec.nodeName%3D${NODE}`],
      'list every pod': ['GET', '/api/v1/pods'],
      'get a pod of another node by name': ['GET', '/api/v1/namespaces/default/pods/theirs'],
      'read a Secret a pod of its node uses': ['GET', '/api/v1/namespaces/default/secrets/mine-secret'],
      "read a Secret only another node's pod uses": ['GET', '/api/v1/namespaces/default/secrets/theirs-secret'],
      'list every Secret': ['GET', '/api/v1/secrets'],
      'delete a pod of its node': ['DELETE', '/api/v1/namespaces/default/pods/mine?dryRun=All'],
      'delete a pod of another node': ['DELETE', '/api/v1/namespaces/default/pods/theirs?dryRun=All'],
      "change its own Node's status": ['PATCH', `/api/v1/nodes/${NODE}/status?dryRun=All`, { status: { volumesInUse: [] } }, merge],
      "change another Node's status": ['PATCH', `/api/v1/nodes/${OTHER}/status?dryRun=All`, { status: { volumesInUse: [] } }, merge],
      "request a token for its pod's ServiceAccount": ['POST', '/api/v1/namespaces/default/serviceaccounts/mine-sa/token', await tokenFor('mine')],
      "request a token for another node's pod's ServiceAccount": ['POST', '/api/v1/namespaces/default/serviceaccounts/theirs-sa/token', await tokenFor('theirs')],
      'request a token bound to no pod': ['POST', '/api/v1/namespaces/default/serviceaccounts/mine-sa/token', { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: {} }],
      'create a pod': ['POST', '/api/v1/namespaces/default/pods?dryRun=All', podObject('new', NODE, [], { automount: false })],
    }
    const identities = {
      'ServiceAccount (rbac.yaml)': { token },
      'node identity (system:node:<node>)': { user: `system:node:${NODE}`, groups: ['system:nodes'] },
    }
    const measured: Record<string, Record<string, string>> = {}
    for (const [row, [method, path, body, contentType]] of Object.entries(rows)) {
      measured[row] = {}
      for (const [identity, as] of Object.entries(identities)) {
        const res = await cp.request(method, path, body, { as, ...(contentType ? { contentType } : {}) })
        if (res.status !== 403 && (res.status < 200 || res.status >= 300)) throw new Error(`${row} as ${identity}: HTTP ${res.status}: ${JSON.stringify(res.body).slice(0, 1000)}`)
        ;(measured[row] as Record<string, string>)[identity] = res.status === 403 ? 'no' : 'yes'
      }
    }
    expect(rightsTable()).toEqual(measured)
  })
})
