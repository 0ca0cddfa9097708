/**
 * The deploy bundle as shipped, on the real control plane (kube-apiserver with the Node authorizer and
 * NodeRestriction, kube-controller-manager with csrapproving and csrsigning).
 *
 * The default: deploy/bootstrap-rbac.yaml and deploy/csidriver-filedisk.yaml applied as an
 * administrator would, the agent started with the DaemonSet's arguments (deploy/daemonset.yaml,
 * `$(NODE_NAME)` expanded as the kubelet does) and the credentials the bundle gives its pod: the
 * bootstrap kubeconfig of the bundle's ConfigMap with the token the kubelet gives the pod. It requests
 * and gets its node certificate and runs as `system:node:<machine>-kubevol`: every volume kind a pod of
 * the API can have mounts, a deleted pod is finalized, and the audit log holds no 403 for the node nor
 * for the ServiceAccount, which did nothing but request the certificate.
 *
 * The alternative, deploy/serviceaccount-rbac.yaml (clusters that cannot sign node client
 * certificates), switched to as deploy/README.md says: the same, as the ServiceAccount, and its role
 * is held to what the agent used. Then deploy/README.md's table of each identity's rights is measured.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { KubeConfig } from '@kubernetes/client-node'
import { X509Certificate } from 'node:crypto'
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
const NODE_USER = `system:node:${NODE}`
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

/** The DaemonSet's pod (an object only: nothing runs it), bound to the machine's Node, as the kubelet's tokens are bound to it. */
async function daemonSetPod(cp: ControlPlane): Promise<{ name: string; uid: string }> {
  await cp.must('POST', '/api/v1/nodes', { metadata: { name: MACHINE } })
  const pod = await cp.must<{ metadata: { name: string; uid: string } }>('POST', '/api/v1/namespaces/kube-system/pods', {
    metadata: { name: 'kubevol-x7k2p', labels: { 'app.kubernetes.io/name': 'kubevol' } },
    spec: { nodeName: MACHINE, serviceAccountName: 'kubevol', automountServiceAccountToken: false, containers: [{ name: 'agent', image: 'kubevol/agent:0.1.0' }] },
  })
  return pod.metadata
}

interface DaemonSetContainer {
  args: string[]
  env?: { name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } }[]
  volumeMounts: { name: string; mountPath: string }[]
}
const daemonSet = () =>
  manifests('daemonset.yaml')[0] as unknown as { spec: { template: { spec: { containers: DaemonSetContainer[]; volumes: { name: string; configMap?: { name: string; optional?: boolean } }[] } } } }

/** The agent's arguments in the DaemonSet, with `$(VAR)` expanded from its environment as the kubelet does. */
function daemonSetArgs(args?: readonly string[]): { argv: string[]; env: Record<string, string> } {
  const container = daemonSet().spec.template.spec.containers[0]
  const env: Record<string, string> = {}
  for (const e of container?.env ?? []) {
    if (e.value !== undefined) env[e.name] = e.value
    else if (e.valueFrom?.fieldRef?.fieldPath === 'spec.nodeName') env[e.name] = MACHINE
  }
  const argv = (args ?? container?.args ?? []).map((a) => a.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (whole, name: string) => env[name] ?? whole))
  return { argv, env }
}

/** The JSON patch deploy/README.md gives for running without TLS bootstrapping, applied to the DaemonSet's args. */
function argsWithoutBootstrapping(): string[] {
  const readme = readFileSync(`${deploy}README.md`, 'utf8')
  const patch = JSON.parse(/kubectl -n kube-system patch ds kubevol --type=json -p '(\[[^']*\])'/.exec(readme)?.[1] ?? '[]') as { op: string; path: string; value?: string }[]
  const args = [...(daemonSet().spec.template.spec.containers[0]?.args ?? [])]
  const prefix = '/spec/template/spec/containers/0/args/'
  expect(patch.map((p) => p.op)).toEqual(['test', 'remove'])
  for (const op of patch) {
    const index = Number(op.path.slice(prefix.length))
    if (op.op === 'test') expect(args[index]).toBe(op.value)
    else args.splice(index, 1)
  }
  return args
}

/** Each manifest deleted, as `kubectl delete -f` does (the kinds of bootstrap-rbac.yaml). */
async function deleteManifests(cp: ControlPlane, list: readonly Manifest[]): Promise<void> {
  const paths: Record<string, string> = {
    ServiceAccount: '/api/v1/namespaces/kube-system/serviceaccounts',
    ConfigMap: '/api/v1/namespaces/kube-system/configmaps',
    ClusterRoleBinding: '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
  }
  for (const m of list) {
    const path = paths[m.kind]
    if (!path) throw new Error(`deleteManifests: no path known for kind ${m.kind}`)
    await cp.must('DELETE', `${path}/${m.metadata.name}`, undefined, { accept: [404] })
  }
}

describeWithControlPlane('the deploy bundle as shipped, on the real control plane', () => {
  let cp: ControlPlane
  let dir: string
  let pod: { name: string; uid: string }
  let agent: Agent | undefined
  /** What each identity was measured to be allowed: row → identity → yes/no. */
  const measured: Record<string, Record<string, string>> = {}

  beforeAll(async () => {
    cp = await startControlPlane({ controllerManager: true })
    dir = mkdtempSync(join(tmpdir(), 'kubevol-bundle-'))
    await applyManifests(cp, [...manifests('bootstrap-rbac.yaml'), ...manifests('csidriver-filedisk.yaml')])
    pod = await daemonSetPod(cp)
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
  })
  afterAll(async () => {
    await agent?.stop()
    await cp?.stop()
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  /** The agent with the DaemonSet's configuration; only the status port (10280 is the node's) and the host (in memory: no watch of the machine's plugins_registry) differ. */
  async function run(argv: string[], kubeConfig?: KubeConfig): Promise<{ agent: Agent; host: MemoryHost }> {
    const config = await loadAgentConfig({ argv, env: daemonSetArgs().env })
    expect(config).toMatchObject({ mode: 'api', nodeName: NODE, registerNode: true, controllerAttachDetach: true, finalizePodDeletion: true })
    const host = createMemoryHost()
    host.allocateFile(IMAGE, 32 << 20)
    await host.mkdir('/srv/shared', { recursive: true })
    await host.mkdir('/mnt/disks/ssd0', { recursive: true })
    agent = await startAgent({ ...config, port: 0, pluginRegistration: false }, { host, ...(kubeConfig ? { kubeConfig } : {}), log: { silent: process.env.KUBEVOL_ENVTEST_VERBOSE !== '1' } })
    return { agent, host }
  }

  /** A pod with every volume kind mounts (the ConfigMap's change reaches it), a pod without its ConfigMap gets FailedMount, and deleted pods are finalized. */
  async function mountsEveryKind(a: Agent, host: MemoryHost, name: string, user: string): Promise<void> {
    await until('the Node registered', async () => (await cp.request('GET', `/api/v1/nodes/${NODE}`)).status === 200, 60_000)
    const node = await cp.must<{ metadata: { labels: Record<string, string> } }>('GET', `/api/v1/nodes/${NODE}`)
    expect(node.metadata.labels).toMatchObject({ 'kubevol.io/host': MACHINE, 'kubernetes.io/hostname': NODE })
    await cp.must('PATCH', '/api/v1/namespaces/default/configmaps/cfg', { data: { mode: 'fast' } }, { contentType: 'application/merge-patch+json' })
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
    const uid = await createPod(cp, podObject(name, NODE, volumes))
    try {
      // The nine volumes and kube-api-access-*.
      await until('every volume mounted', () => a.manager.getMountedVolumesForPod(uid).size === 10, 30_000)
    } catch (err) {
      throw new Error(`${(err as Error).message}: ${JSON.stringify(a.pod(uid))}\n403s: ${answers(cp, user, 403).join('\n')}`)
    }
    expect(await podFile(host, uid, 'kubernetes.io~configmap', 'config', 'mode')).toBe('fast')
    expect(await podFile(host, uid, 'kubernetes.io~secret', 'secret', 'key')).toBe('s3cret')
    expect(await podFile(host, uid, 'kubernetes.io~projected', 'all', 'key')).toBe('s3cret')
    expect(await podFile(host, uid, 'kubernetes.io~projected', 'all', 'name')).toBe(name)
    // A change reaches the files through the single-object watch.
    await cp.must('PATCH', '/api/v1/namespaces/default/configmaps/cfg', { data: { mode: 'slow' } }, { contentType: 'application/merge-patch+json' })
    await until('the change on disk', async () => (await podFile(host, uid, 'kubernetes.io~configmap', 'config', 'mode')) === 'slow', 10_000)
    // A pod whose ConfigMap does not exist: the FailedMount event is posted.
    const lateUID = await createPod(cp, podObject(`${name}-late`, NODE, [{ name: 'cfg', configMap: { name: 'later' } }], { automount: false }))
    type Event = { reason: string; involvedObject: { uid: string } }
    await until('FailedMount posted', async () => (await cp.must<{ items: Event[] }>('GET', '/api/v1/namespaces/default/events')).items.some((e) => e.involvedObject.uid === lateUID && e.reason === 'FailedMount'), 30_000)
    await cp.must('DELETE', `/api/v1/namespaces/default/pods/${name}-late`, { gracePeriodSeconds: 0 })
    // Graceful deletion: torn down, then the agent deletes the object.
    await cp.must('DELETE', `/api/v1/namespaces/default/pods/${name}`, { gracePeriodSeconds: 30 })
    await until('the pod deleted by the agent', async () => (await cp.request('GET', `/api/v1/namespaces/default/pods/${name}`)).status === 404, 30_000)
    expect(podMounts(host).filter((m) => m.includes(uid))).toEqual([])
  }

  it('bootstraps its node identity from the credentials the bundle gives it, mounts every volume kind as that node, and meets no 403', async () => {
    // The DaemonSet names the kubeconfig of the bundle's ConfigMap, mounted where the flag says.
    const { spec } = daemonSet().spec.template
    const container = spec.containers[0] as DaemonSetContainer
    const flag = container.args.find((a) => a.startsWith('--bootstrap-kubeconfig=')) ?? ''
    const mount = container.volumeMounts.find((m) => flag === `--bootstrap-kubeconfig=${m.mountPath}/kubeconfig`)
    const configMap = manifests('bootstrap-rbac.yaml').find((m) => m.kind === 'ConfigMap') as unknown as Manifest & { data: { kubeconfig: string } }
    expect(spec.volumes.find((v) => v.name === mount?.name)?.configMap?.name).toBe(configMap.metadata.name)

    // What the pod reads there: the bundle's kubeconfig with the pod's token and CA, here this cluster's.
    const tokenFile = join(dir, 'token')
    writeFileSync(tokenFile, await cp.serviceAccountToken('kube-system', 'kubevol', { boundTo: pod }), { mode: 0o600 })
    const bootstrap = join(dir, 'bootstrap-kubeconfig')
    const text = configMap.data.kubeconfig
      .replace('https://kubernetes.default.svc', cp.url)
      .replace('/var/run/secrets/kubernetes.io/serviceaccount/ca.crt', cp.caFile)
      .replace('/var/run/secrets/kubernetes.io/serviceaccount/token', tokenFile)
    expect(text).not.toMatch(/kubernetes\.default\.svc|serviceaccount\/(ca\.crt|token)/)
    writeFileSync(bootstrap, text)
    const { argv } = daemonSetArgs(container.args.map((a) => (a === flag ? `--bootstrap-kubeconfig=${bootstrap}` : a)))
    const { agent: a, host } = await run(argv)
    await until('the certificate issued', async () => (await a.readiness()).find((c) => c.name === 'node-credentials')?.ok === true, 60_000)
    const pem = Buffer.from(await host.readFile('/var/lib/kubevol/pki/kubelet-client-current.pem')).toString('utf8')
    expect(new X509Certificate(pem).subject).toBe(`O=system:nodes\nCN=${NODE_USER}`)

    await mountsEveryKind(a, host, 'every', NODE_USER)

    expect(answers(cp, NODE_USER, 403)).toEqual([])
    expect(answers(cp, SA_USER, 403)).toEqual([])
    // The ServiceAccount requested the certificate and did nothing else; the node did the rest.
    const bySa = cp.auditEvents().filter((e) => e.user.username === SA_USER)
    expect(bySa.some((e) => e.verb === 'create' && e.objectRef?.resource === 'certificatesigningrequests')).toBe(true)
    expect(bySa.filter((e) => e.objectRef?.resource !== 'certificatesigningrequests').map((e) => `${e.verb} ${e.requestURI}`)).toEqual([])
    await a.stop()
    agent = undefined
  })

  it("measures the default identities: nothing of another node's readable or deletable", async () => {
    await createRowObjects(cp)
    await measure(cp, measured, {
      'ServiceAccount (bootstrap-rbac.yaml)': { token: await cp.serviceAccountToken('kube-system', 'kubevol', { boundTo: pod }) },
      'node identity (system:node:<node>)': { user: NODE_USER, groups: ['system:nodes'] },
    })
    // Whatever the table says: neither identity of the default bundle reads or deletes another node's pods, or reads its Secrets.
    const otherNodes = ['list every pod', 'get a pod of another node by name', "read a Secret only another node's pod uses", 'list every Secret', 'delete a pod of another node']
    for (const row of otherNodes) {
      expect({ row, ...measured[row] }).toEqual({ row, 'ServiceAccount (bootstrap-rbac.yaml)': 'no', 'node identity (system:node:<node>)': 'no' })
    }
  })

  it('runs without TLS bootstrapping, with serviceaccount-rbac.yaml as deploy/README.md switches to it: every volume kind, no 403, nothing granted unused', async () => {
    // The same user as the bootstrap credential's (refused on purpose above): only what comes after the switch counts.
    let since = cp.auditEvents().length
    const after = () => cp.auditEvents().slice(since).filter((e) => e.user.username === SA_USER)
    await deleteManifests(cp, manifests('bootstrap-rbac.yaml'))
    await applyManifests(cp, manifests('serviceaccount-rbac.yaml'))
    // The Node goes too, so that the ServiceAccount registers it (the right it is given for that).
    await cp.must('DELETE', `/api/v1/nodes/${NODE}`)
    const token = await cp.serviceAccountToken('kube-system', 'kubevol', { boundTo: pod })
    await untilPolicyEnforced(cp, token)
    // The wait's own refused probes are not the agent's.
    since = cp.auditEvents().length
    const { argv } = daemonSetArgs(argsWithoutBootstrapping())
    expect(argv.some((a) => a.startsWith('--bootstrap-kubeconfig'))).toBe(false)
    const { agent: a, host } = await run(argv, cp.kubeConfig({ token }))
    await mountsEveryKind(a, host, 'every-sa', SA_USER)
    await a.stop()
    agent = undefined
    expect(after().filter((e) => e.responseStatus?.code === 403).map((e) => `${e.verb} ${e.requestURI}: ${e.responseStatus?.message ?? ''}`)).toEqual([])

    const role = manifests('serviceaccount-rbac.yaml').find((m) => m.kind === 'ClusterRole') as ClusterRole
    const granted = rightsOf(role)
    const used = new Set(
      after()
        .filter((e) => e.objectRef?.resource)
        .map((e) => `${e.verb} ${e.objectRef?.apiGroup ? `${e.objectRef.apiGroup}/` : ''}${e.objectRef?.resource}${e.objectRef?.subresource ? `/${e.objectRef.subresource}` : ''}`),
    )
    // Rights for paths this run does not drive: a CSI driver registering (CSINode, the Node's nodeid
    // annotation), a CSI volume the attach/detach controller attaches, a node expansion, an existing
    // Node whose attach/detach annotation is set again, an event repeated.
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
    expect(granted.filter((r) => !used.has(r) && !notDrivenHere.has(r))).toEqual([])
    // And nothing the agent used was outside the role (the 403 check above says the same from the server's side).
    expect([...used].filter((r) => !granted.includes(r))).toEqual([])

    await measure(cp, measured, { 'ServiceAccount (serviceaccount-rbac.yaml)': { token } })
  })

  it("holds each identity to deploy/README.md's table (what it may do, as measured here)", () => {
    expect(Object.keys(measured).length).toBeGreaterThan(0)
    expect(rightsTable()).toEqual(measured)
  })
})

/**
 * A ValidatingAdmissionPolicy is enforced a moment after it is created (the API server loads it
 * through an informer): waits until the ServiceAccount's delete of another node's pod is refused, at
 * most 30 s. If it never is, the table's check says so.
 */
async function untilPolicyEnforced(cp: ControlPlane, token: string): Promise<void> {
  const deadline = Date.now() + 30_000
  while (Date.now() < deadline) {
    const res = await cp.request('DELETE', '/api/v1/namespaces/default/pods/theirs?dryRun=All', undefined, { as: { token } })
    // 404: no pod of another node yet (a filtered run); nothing to wait for.
    if (res.status === 403 || res.status === 404) return
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
}

/** A pod of this node and one of another node, each with a Secret of its own and its own ServiceAccount. */
async function createRowObjects(cp: ControlPlane): Promise<void> {
  await cp.must('POST', '/api/v1/nodes', { metadata: { name: OTHER } }, { accept: [409] })
  for (const who of ['mine', 'theirs']) {
    await cp.must('POST', '/api/v1/namespaces/default/serviceaccounts', { metadata: { name: `${who}-sa` } })
    await cp.must('POST', '/api/v1/namespaces/default/secrets', { metadata: { name: `${who}-secret` }, data: { k: Buffer.from(who).toString('base64') } })
    await createPod(cp, podObject(who, who === 'mine' ? NODE : OTHER, [{ name: 's', secret: { secretName: `${who}-secret` } }], { serviceAccountName: `${who}-sa`, automount: false }))
  }
}

/** Sends each row's request as each identity (writes with dryRun=All: authorized and admitted, never stored) and notes yes (2xx) or no (403). */
async function measure(cp: ControlPlane, into: Record<string, Record<string, string>>, identities: Record<string, { token: string } | { user: string; groups: string[] }>): Promise<void> {
  const uidOf = async (name: string) => (await cp.must<{ metadata: { uid: string } }>('GET', `/api/v1/namespaces/default/pods/${name}`)).metadata.uid
  const tokenFor = async (p: string) => ({ apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: p, uid: await uidOf(p) } } })
  const merge = 'application/merge-patch+json'
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
    'list certificate signing requests': ['GET', '/apis/certificates.k8s.io/v1/certificatesigningrequests'],
  }
  for (const [row, [method, path, body, contentType]] of Object.entries(rows)) {
    const cells = (into[row] ??= {})
    for (const [identity, as] of Object.entries(identities)) {
      const res = await cp.request(method, path, body, { as, ...(contentType ? { contentType } : {}) })
      if (res.status !== 403 && (res.status < 200 || res.status >= 300)) throw new Error(`${row} as ${identity}: HTTP ${res.status}: ${JSON.stringify(res.body).slice(0, 1000)}`)
      cells[identity] = res.status === 403 ? 'no' : 'yes'
    }
  }
}
