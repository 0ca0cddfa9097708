/**
 * The fake's RBAC authorizer with the bundle's own deploy/serviceaccount-rbac.yaml: the ServiceAccount gets what the
 * role grants and the API server's 403 for the rest (test/envtest/fake-vs-real.test.ts compares these
 * answers with a real API server's); a RoleBinding grants only in its namespace; resource names apply
 * to a single-object list; without RBAC objects a ServiceAccount may do anything, as before.
 */
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { parseAllDocuments } from 'yaml'
import { afterEach, describe, expect, it } from 'vitest'
import { type FakeApiServer, startFakeApiServer } from './fake-api-server.js'

const rbac = parseAllDocuments(readFileSync(fileURLToPath(new URL('../../../../../deploy/serviceaccount-rbac.yaml', import.meta.url)), 'utf8')).map((d) => d.toJS() as Record<string, unknown>)
const SA = { user: 'system:serviceaccount:kube-system:kubevol', groups: ['system:serviceaccounts', 'system:serviceaccounts:kube-system', 'system:authenticated'] }

let api: FakeApiServer | undefined
afterEach(async () => {
  await api?.close()
  api = undefined
})

async function status(server: FakeApiServer, token: string, path: string, method = 'GET') {
  const res = await fetch(`${server.url}${path}`, { method, headers: { authorization: `Bearer ${token}` } })
  const body = (await res.json()) as { message?: string }
  return { status: res.status, ...(res.status === 403 ? { message: body.message } : {}) }
}

describe('RBAC in the fake API server', () => {
  it("holds a ServiceAccount to deploy/serviceaccount-rbac.yaml's role", async () => {
    api = await startFakeApiServer({ rbac })
    api.addToken('sa', SA)
    api.create('ConfigMap', { metadata: { name: 'cfg', namespace: 'default' } })
    api.create('Pod', { metadata: { name: 'p', namespace: 'default' }, spec: { nodeName: 'n1', containers: [{ name: 'c' }] } })
    expect(await status(api, 'sa', '/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%3Dcfg')).toEqual({ status: 200 })
    expect(await status(api, 'sa', '/api/v1/pods?fieldSelector=spec.nodeName%3Dn1')).toEqual({ status: 200 })
    expect(await status(api, 'sa', '/api/v1/namespaces/default/pods/p')).toEqual({
      status: 403,
      message: 'pods "p" is forbidden: User "system:serviceaccount:kube-system:kubevol" cannot get resource "pods" in API group "" in the namespace "default"',
    })
    expect((await status(api, 'sa', '/apis/storage.k8s.io/v1/volumeattachments')).status).toBe(403)
    // The administrator is in system:masters.
    expect(await status(api, api.adminToken, '/api/v1/namespaces/default/pods/p')).toEqual({ status: 200 })
  })

  it('grants a RoleBinding only in its namespace, and resource names to a single-object list', async () => {
    const reader = { kind: 'Role', metadata: { name: 'reader', namespace: 'team' }, rules: [{ apiGroups: [''], resources: ['secrets'], verbs: ['get', 'list'], resourceNames: ['one'] }] }
    const binding = { kind: 'RoleBinding', metadata: { name: 'reader', namespace: 'team' }, roleRef: { kind: 'Role', name: 'reader' }, subjects: [{ kind: 'User', name: 'alice' }] }
    api = await startFakeApiServer({ rbac: [reader, binding] })
    api.addToken('alice', { user: 'alice', groups: ['system:authenticated'] })
    api.create('Secret', { metadata: { name: 'one', namespace: 'team' } })
    api.create('Secret', { metadata: { name: 'one', namespace: 'other' } })
    expect((await status(api, 'alice', '/api/v1/namespaces/team/secrets?fieldSelector=metadata.name%3Done')).status).toBe(200)
    expect((await status(api, 'alice', '/api/v1/namespaces/team/secrets')).status).toBe(403)
    expect((await status(api, 'alice', '/api/v1/namespaces/other/secrets/one')).status).toBe(403)
  })

  it('lets every identity but a node do anything without RBAC objects', async () => {
    api = await startFakeApiServer()
    api.addToken('sa', SA)
    api.create('Pod', { metadata: { name: 'p', namespace: 'default' }, spec: { containers: [{ name: 'c' }] } })
    expect(await status(api, 'sa', '/api/v1/namespaces/default/pods/p')).toEqual({ status: 200 })
  })
})
