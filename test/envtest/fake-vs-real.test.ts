/**
 * The fake API server (`@kubevol/agent/testing`) against the real one, on the same requests: the same
 * objects on both, the same identities (the administrator, the bundle's ServiceAccount held by
 * deploy/serviceaccount-rbac.yaml's role, a node held by the Node authorizer), and each request's status and Status
 * message must agree. This is where a disagreement is found and the fake fixed first: the fake let
 * every ServiceAccount do anything, so the bundle's role was never checked until it met a real server
 * (the single-object ConfigMap watch was refused there); the fake now takes RBAC objects.
 *
 * Not compared: admission policies (deploy/serviceaccount-rbac.yaml's ValidatingAdmissionPolicy; the fake has none),
 * and what the real server adds to objects (managedFields, defaults).
 */
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { type FakeApiServer, startFakeApiServer } from '@kubevol/agent/testing'
import { parseAllDocuments } from 'yaml'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { applyManifests, type Manifest } from './apply.js'
import { type ControlPlane, describeWithControlPlane, type Identity, startControlPlane } from './control-plane.js'

const rbac = parseAllDocuments(readFileSync(fileURLToPath(new URL('../../deploy/serviceaccount-rbac.yaml', import.meta.url)), 'utf8')).map((d) => d.toJS() as Manifest)
const SA = { user: 'system:serviceaccount:kube-system:kubevol', groups: ['system:serviceaccounts', 'system:serviceaccounts:kube-system', 'system:authenticated'] }

type Who = 'admin' | 'sa' | 'node1'
interface Answer {
  readonly status: number
  readonly message?: string
}
type Send = (method: string, path: string, body: unknown, who: Who, contentType?: string) => Promise<Answer>

/** The objects both servers hold: a pod on node1 and one on node2, each with its ConfigMap and Secret. */
async function seed(send: Send): Promise<void> {
  const post = async (path: string, body: unknown) => {
    const res = await send('POST', path, body, 'admin')
    if (res.status !== 201) throw new Error(`seed ${path}: HTTP ${res.status} ${res.message ?? ''}`)
  }
  await post('/api/v1/nodes', { metadata: { name: 'node1' } })
  for (const [pod, node] of [
    ['mine', 'node1'],
    ['theirs', 'node2'],
  ] as const) {
    await post('/api/v1/namespaces/default/configmaps', { metadata: { name: `${pod}-cfg` }, data: { a: '1' } })
    await post('/api/v1/namespaces/default/secrets', { metadata: { name: `${pod}-sec` }, data: { a: 'MQ==' } })
    await post('/api/v1/namespaces/default/pods', {
      metadata: { name: pod },
      spec: {
        nodeName: node,
        automountServiceAccountToken: false,
        containers: [{ name: 'c', image: 'busybox' }],
        volumes: [
          { name: 'c', configMap: { name: `${pod}-cfg` } },
          { name: 's', secret: { secretName: `${pod}-sec` } },
        ],
      },
    })
  }
}

describeWithControlPlane('the fake API server and the real one, on the same requests', () => {
  let cp: ControlPlane
  let fake: FakeApiServer
  let sendFake: Send
  let sendReal: Send

  beforeAll(async () => {
    cp = await startControlPlane({ nodes: ['node1'] })
    await applyManifests(cp, rbac)
    const saToken = await cp.serviceAccountToken('kube-system', 'kubevol')
    const realAs: Record<Who, Identity> = { admin: { token: cp.adminToken }, sa: { token: saToken }, node1: { token: cp.nodeToken('node1') } }
    sendReal = async (method, path, body, who, contentType) => {
      const res = await cp.request<{ message?: string }>(method, path, body, { as: realAs[who], ...(contentType ? { contentType } : {}) })
      return { status: res.status, ...(res.status >= 400 ? { message: res.body.message } : {}) }
    }

    fake = await startFakeApiServer({ rbac })
    fake.addToken('sa-token', SA)
    const fakeTokens: Record<Who, string> = { admin: fake.adminToken, sa: 'sa-token', node1: fake.nodeToken('node1') }
    sendFake = async (method, path, body, who, contentType) => {
      const res = await fetch(`${fake.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${fakeTokens[who]}`, ...(body !== undefined ? { 'content-type': contentType ?? 'application/json' } : {}) },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      })
      const parsed = (await res.json().catch(() => ({}))) as { message?: string }
      return { status: res.status, ...(res.status >= 400 ? { message: parsed.message } : {}) }
    }
    await seed(sendReal)
    await seed(sendFake)
  })
  afterAll(async () => {
    await fake?.close()
    await cp?.stop()
  })

  const merge = 'application/merge-patch+json'
  it.each<[string, Who, string, string, unknown?, string?]>([
    // The bundle's ServiceAccount, held by deploy/serviceaccount-rbac.yaml's ClusterRole.
    ['a single ConfigMap watched as the Watch strategy lists it', 'sa', 'GET', '/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%3Dmine-cfg'],
    ['a single Secret listed the same way', 'sa', 'GET', '/api/v1/namespaces/default/secrets?fieldSelector=metadata.name%3Dmine-sec'],
    ["the pods of its node, by the agent's field selector", 'sa', 'GET', '/api/v1/pods?fieldSelector=spec.nodeName%3Dnode1'],
    ['a pod by name (the role has no get on pods)', 'sa', 'GET', '/api/v1/namespaces/default/pods/mine'],
    ['a pod created', 'sa', 'POST', '/api/v1/namespaces/default/pods', { metadata: { name: 'x' }, spec: { containers: [{ name: 'c', image: 'i' }] } }],
    ['a ServiceAccount read', 'sa', 'GET', '/api/v1/namespaces/kube-system/serviceaccounts/kubevol'],
    ['a ConfigMap changed', 'sa', 'PATCH', '/api/v1/namespaces/default/configmaps/mine-cfg', { data: { a: '2' } }, merge],
    ['a claim read by name', 'sa', 'GET', '/api/v1/namespaces/default/persistentvolumeclaims/none'],
    ['VolumeAttachments listed (a resource of a named group)', 'sa', 'GET', '/apis/storage.k8s.io/v1/volumeattachments'],
    ['a CSINode read by name', 'sa', 'GET', '/apis/storage.k8s.io/v1/csinodes/node1'],
    // A node, held by the Node authorizer.
    ['every pod, without the field selector', 'node1', 'GET', '/api/v1/pods'],
    ['a Secret its pod references', 'node1', 'GET', '/api/v1/namespaces/default/secrets/mine-sec'],
    ["a Secret only another node's pod references", 'node1', 'GET', '/api/v1/namespaces/default/secrets/theirs-sec'],
    ['a ConfigMap its pod references, by the single-object list', 'node1', 'GET', '/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%3Dmine-cfg'],
    ["another node's ConfigMap, by the single-object list", 'node1', 'GET', '/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%3Dtheirs-cfg'],
    ["the pods of another node, by the field selector", 'node1', 'GET', '/api/v1/pods?fieldSelector=spec.nodeName%3Dnode2'],
    ['VolumeAttachments listed', 'node1', 'GET', '/apis/storage.k8s.io/v1/volumeattachments'],
    // The administrator: the wire facts of errors.
    ['a missing Node', 'admin', 'GET', '/api/v1/nodes/missing'],
    ['a patch sent as application/json', 'admin', 'PATCH', '/api/v1/nodes/node1', { metadata: { labels: { a: 'b' } } }, 'application/json'],
    ['a field selector the resource does not support', 'admin', 'GET', '/api/v1/pods?fieldSelector=spec.foo%3Dbar'],
    ['a Node created twice', 'admin', 'POST', '/api/v1/nodes', { metadata: { name: 'node1' } }],
  ])('%s (as %s)', async (_what, who, method, path, body, contentType) => {
    const [real, faked] = [await sendReal(method, path, body, who, contentType), await sendFake(method, path, body, who, contentType)]
    expect(faked).toEqual(real)
  })

  /** A request's whole JSON body as the administrator, from either server. */
  const bodies = async (method: string, path: string, body?: unknown, contentType?: string) => {
    const real = await cp.request<Record<string, unknown>>(method, path, body, contentType ? { contentType } : {})
    const res = await fetch(`${fake.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${fake.adminToken}`, ...(body !== undefined ? { 'content-type': contentType ?? 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    })
    return { real: { status: real.status, body: real.body }, fake: { status: res.status, body: (await res.json()) as Record<string, unknown> } }
  }

  it('answers a list, a stale patch and a graceful pod deletion in the same shapes', async () => {
    // A list: its kind, a resourceVersion, items without kind or apiVersion.
    const shape = (b: Record<string, unknown>) => {
      const items = b.items as Record<string, unknown>[]
      return { kind: b.kind, apiVersion: b.apiVersion, hasRV: typeof (b.metadata as { resourceVersion?: unknown }).resourceVersion === 'string', itemKinds: items.map((i) => i.kind ?? null) }
    }
    const list = await bodies('GET', '/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%3Dmine-cfg')
    expect(shape(list.fake.body)).toEqual(shape(list.real.body))
    expect(shape(list.real.body)).toEqual({ kind: 'ConfigMapList', apiVersion: 'v1', hasRV: true, itemKinds: [null] })

    // A merge patch that carries an old resourceVersion: 409 Conflict, with the same message.
    const patch = { metadata: { resourceVersion: '1' }, data: { a: '3' } }
    const stale = await bodies('PATCH', '/api/v1/namespaces/default/configmaps/mine-cfg', patch, 'application/merge-patch+json')
    const status = (x: { status: number; body: Record<string, unknown> }) => ({ status: x.status, reason: x.body.reason, message: x.body.message })
    expect(status(stale.fake)).toEqual(status(stale.real))
    expect(stale.real.status).toBe(409)

    // A pod bound to a node, deleted with a grace period: it stays, marked, with the grace period asked.
    const deleted = await bodies('DELETE', '/api/v1/namespaces/default/pods/theirs', { gracePeriodSeconds: 30 })
    const marked = (x: { status: number; body: Record<string, unknown> }) => {
      const m = x.body.metadata as { deletionTimestamp?: string; deletionGracePeriodSeconds?: number }
      return { status: x.status, kind: x.body.kind, marked: typeof m.deletionTimestamp === 'string', grace: m.deletionGracePeriodSeconds }
    }
    expect(marked(deleted.fake)).toEqual(marked(deleted.real))
    expect(marked(deleted.real)).toEqual({ status: 200, kind: 'Pod', marked: true, grace: 30 })
  })
})
