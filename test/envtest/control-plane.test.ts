/**
 * The harness itself: the control plane comes up on loopback, each identity is who the server says
 * it is, the audit log records the answers, the apiserver survives a SIGKILL and a restart with its
 * data, and stop() leaves no process behind.
 */
import { afterAll, beforeAll, expect, it } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type ControlPlane, describeWithControlPlane, envtestAssets, startControlPlane } from './control-plane.js'

describeWithControlPlane('the envtest control plane', () => {
  let cp: ControlPlane
  beforeAll(async () => {
    cp = await startControlPlane({ controllerManager: true })
  })
  afterAll(async () => {
    await cp?.stop()
  })

  const whoAmI = async (as: Parameters<ControlPlane['request']>[3]) => {
    const review = await cp.must<{ status: { userInfo: { username: string; groups: string[] } } }>('POST', '/apis/authentication.k8s.io/v1/selfsubjectreviews', { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' }, as)
    return review.status.userInfo
  }

  it('authenticates the administrator, a node token, a client certificate and a ServiceAccount token', async () => {
    expect(cp.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/)
    expect(await whoAmI({})).toMatchObject({ username: 'admin', groups: expect.arrayContaining(['system:masters']) })
    expect(await whoAmI({ as: { token: cp.nodeToken('node1') } })).toMatchObject({ username: 'system:node:node1', groups: expect.arrayContaining(['system:nodes']) })
    expect(await whoAmI({ as: { user: 'system:node:n9', groups: ['system:nodes'] } })).toMatchObject({ username: 'system:node:n9', groups: expect.arrayContaining(['system:nodes']) })
    const token = await cp.serviceAccountToken('default', 'default')
    expect(await whoAmI({ as: { token } })).toMatchObject({ username: 'system:serviceaccount:default:default' })
    // The controller manager published the CA for pods.
    const root = await cp.must<{ data: Record<string, string> }>('GET', '/api/v1/namespaces/default/configmaps/kube-root-ca.crt')
    expect(root.data['ca.crt']).toBe(cp.caPem)
  })

  it('applies the Node authorizer to a node identity and writes the 403 to the audit log', async () => {
    const res = await cp.request('GET', '/api/v1/pods', undefined, { as: { token: cp.nodeToken('node1') } })
    expect(res.status).toBe(403)
    const denied = cp.auditEvents().filter((e) => e.user.username === 'system:node:node1' && e.responseStatus?.code === 403)
    expect(denied.map((e) => e.requestURI)).toContain('/api/v1/pods')
  })

  it('comes back from a SIGKILL with its data, on the same port', async () => {
    await cp.must('POST', '/api/v1/namespaces/default/configmaps', { metadata: { name: 'survives' }, data: { a: '1' } })
    const before = cp.apiServerPid
    await cp.restartApiServer()
    expect(cp.apiServerPid).not.toBe(before)
    expect((await cp.must<{ data: Record<string, string> }>('GET', '/api/v1/namespaces/default/configmaps/survives')).data).toEqual({ a: '1' })
  })

  it('reads its binaries from KUBEVOL_ENVTEST_ASSETS, and names the ones a directory lacks', () => {
    const dir = process.env.KUBEVOL_ENVTEST_ASSETS
    expect(envtestAssets()).toEqual({ dir })
    const empty = mkdtempSync(join(tmpdir(), 'kubevol-envtest-empty-'))
    try {
      process.env.KUBEVOL_ENVTEST_ASSETS = empty
      expect(envtestAssets().skip).toBe(`KUBEVOL_ENVTEST_ASSETS=${empty} lacks etcd, kube-apiserver, kube-controller-manager`)
    } finally {
      process.env.KUBEVOL_ENVTEST_ASSETS = dir
      rmSync(empty, { recursive: true })
    }
  })

  it('stops every process it started', async () => {
    const other = await startControlPlane({ nodes: [] })
    const pids = Object.values(other.pids())
    expect(pids).toHaveLength(2)
    await other.stop()
    for (const pid of pids) expect(() => process.kill(pid, 0)).toThrow()
  })
})
