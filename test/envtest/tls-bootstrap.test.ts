/**
 * TLS bootstrapping on the real control plane (kube-apiserver v1.32 with the Node authorizer and
 * NodeRestriction, the controller manager's csrapproving and csrsigning controllers): the agent starts
 * from a bootstrap credential with `deploy/bootstrap-rbac.yaml`'s rights only, requests its own node
 * certificate, is approved and signed, stores the pair under its root (0600), runs as the node, and
 * renews the certificate while running; a restart with a stored certificate makes no request, an
 * expired one is replaced through the bootstrap credential, and a denied request is reported in
 * `/readyz`.
 *
 * The controller manager signs for 2 minutes (`--cluster-signing-duration`; its signer backdates
 * `notBefore` by 5 minutes, so a certificate lives 7 minutes from 5 minutes ago), and a renewal, due at
 * 70 to 90% of the lifetime, comes 0 to 80 s after the certificate is issued.
 */
import { execFileSync } from 'node:child_process'
import { X509Certificate } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type MemoryHost, createMemoryHost } from '@kubevol/adapter-mock'
import { type Agent, type AgentConfigInput, loadAgentConfig, startAgent } from '@kubevol/agent'
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest'
import { parseAllDocuments } from 'yaml'
import { until as untilFast } from '../../packages/agent/test/helpers.js'
import { answers, createPod, podFile, podObject } from './agent-fixtures.js'
import { type Manifest, applyManifests } from './apply.js'
import { type ControlPlane, describeWithControlPlane, startControlPlane } from './control-plane.js'

const ROOT = '/var/lib/kubevol'
const PAIR = `${ROOT}/pki/kubelet-client-current.pem`
const bundle = parseAllDocuments(readFileSync(new URL('../../deploy/bootstrap-rbac.yaml', import.meta.url), 'utf8')).map((d) => d.toJS() as Manifest)
/** The bundle's bootstrap kubeconfig (its ConfigMap), as the DaemonSet's pod reads it. */
const shippedKubeconfig = (bundle.find((m) => m.kind === 'ConfigMap') as unknown as { data: { kubeconfig: string } }).data.kubeconfig

/** `until` for checks that ask the API server: every 250 ms, not every 10. */
const until = (what: string, check: () => boolean | Promise<boolean>, timeoutMs?: number) =>
  untilFast(
    what,
    async () => {
      if (await check()) return true
      await new Promise((resolve) => setTimeout(resolve, 250))
      return false
    },
    timeoutMs,
  )

interface Csr {
  readonly metadata: { readonly name: string; readonly creationTimestamp: string }
  readonly spec: { readonly username: string; readonly signerName: string; readonly usages: readonly string[]; readonly groups: readonly string[] }
  readonly status?: { readonly conditions?: readonly { readonly type: string; readonly reason?: string }[]; readonly certificate?: string }
}

describeWithControlPlane('TLS bootstrapping on the real control plane', () => {
  let cp: ControlPlane
  let dir: string
  const agents: Agent[] = []

  beforeAll(async () => {
    cp = await startControlPlane({ controllerManager: true, nodes: [], signingDuration: '2m', apiServerArgs: ['--enable-bootstrap-token-auth=true'] })
    dir = mkdtempSync(join(tmpdir(), 'kubevol-tls-bootstrap-'))
    // The bundle's bootstrap rights, as shipped.
    await applyManifests(cp, bundle)
    await cp.must('POST', '/api/v1/namespaces/default/configmaps', { metadata: { name: 'settings' }, data: { mode: 'fast' } })
  })
  afterEach(async () => {
    for (const agent of agents.splice(0)) await agent.stop()
  })
  afterAll(async () => {
    await cp?.stop()
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  /**
   * The bundle's bootstrap kubeconfig with this cluster's address and CA and a token file of its own
   * in place of the pod's (`tokenFile`, read again for every request).
   */
  function bootstrapKubeconfig(name: string, token: string): string {
    const tokenFile = join(dir, `${name}.token`)
    writeFileSync(tokenFile, token, { mode: 0o600 })
    const file = join(dir, `${name}.kubeconfig`)
    const text = shippedKubeconfig
      .replace('https://kubernetes.default.svc', cp.url)
      .replace('/var/run/secrets/kubernetes.io/serviceaccount/ca.crt', cp.caFile)
      .replace('/var/run/secrets/kubernetes.io/serviceaccount/token', tokenFile)
    expect(text).not.toMatch(/kubernetes\.default\.svc|serviceaccount\/(ca\.crt|token)/)
    writeFileSync(file, text)
    return file
  }

  async function start(host: MemoryHost, node: string, bootstrap: string, config: Partial<AgentConfigInput> = {}): Promise<Agent> {
    const agent = await startAgent(
      { mode: 'api', nodeName: node, bootstrapKubeconfig: bootstrap, port: 0, nodeStatusPeriodMs: 100, watchRetryMs: 50, podSyncRetryMs: 100, objectCacheTtlMs: 0, statsPeriodMs: 0, shutdownGraceMs: 1_000, ...config },
      { host, log: { silent: process.env.KUBEVOL_ENVTEST_VERBOSE !== '1' }, manager: { backoff: { initialMs: 50, maxMs: 500 }, resyncPeriodMs: 500, housekeepingPeriodMs: 0 } as object },
    )
    agents.push(agent)
    return agent
  }
  const csrs = async (user: string): Promise<Csr[]> =>
    (await cp.must<{ items: Csr[] }>('GET', '/apis/certificates.k8s.io/v1/certificatesigningrequests')).items.filter((c) => c.spec.username === user)
  const credentialsCheck = async (agent: Agent) => (await agent.readiness()).find((c) => c.name === 'node-credentials')
  const storedCert = async (host: MemoryHost) => {
    const pem = Buffer.from(await host.readFile(PAIR)).toString('utf8')
    return execFileSync('openssl', ['x509', '-noout', '-subject', '-enddate'], { input: pem }).toString()
  }
  const saUser = 'system:serviceaccount:kube-system:kubevol'

  it('bootstraps with the bundle ServiceAccount, runs as its node, and renews the certificate without a restart', async () => {
    const host = createMemoryHost()
    const bootstrap = bootstrapKubeconfig('sa', await cp.serviceAccountToken('kube-system', 'kubevol'))
    const agent = await start(host, 'b1-kubevol', bootstrap)
    await until('the certificate issued', async () => (await credentialsCheck(agent))?.ok === true, 60_000)

    // The request, as the kubelet's: the node client signer, digital signature and client auth, approved by csrapproving.
    const [first] = await csrs(saUser)
    expect(first).toMatchObject({ metadata: { name: expect.stringMatching(/^csr-/) }, spec: { signerName: 'kubernetes.io/kube-apiserver-client-kubelet', usages: ['digital signature', 'client auth'] } })
    expect(first?.status?.conditions).toContainEqual(expect.objectContaining({ type: 'Approved', reason: 'AutoApproved' }))
    // The pair under the root, 0600, and the node kubeconfig naming it.
    expect(await host.stat(PAIR)).toMatchObject({ type: 'file', mode: 0o600 })
    expect(await storedCert(host)).toMatch(/subject=O = system:nodes, CN = system:node:b1-kubevol/)
    const kubeconfig = Buffer.from(await host.readFile(`${ROOT}/kubeconfig`)).toString('utf8')
    expect(kubeconfig).toContain(`client-certificate: ${PAIR}`)
    expect((await host.stat(`${ROOT}/kubeconfig`))?.mode).toBe(0o600)
    // The kubelet's gauge: seconds until the certificate ends, at most its lifetime (2 minutes, backdated by the signer up to 5).
    const ttl = Number(/^kubelet_certificate_manager_client_ttl_seconds (\S+)$/m.exec(await (await fetch(`${agent.url}/metrics`)).text())?.[1])
    expect(ttl).toBeGreaterThan(0)
    expect(ttl).toBeLessThanOrEqual(120)

    // The node identity registers its Node and mounts a pod's ConfigMap (the Node authorizer's graph).
    await until('the Node registered', async () => (await cp.request('GET', '/api/v1/nodes/b1-kubevol')).status === 200, 30_000)
    const uid = await createPod(cp, podObject('cfg-pod', 'b1-kubevol', [{ name: 'cfg', configMap: { name: 'settings' } }], { automount: false }))
    await until('the configMap mounted', async () => (await podFile(host, uid, 'kubernetes.io~configmap', 'cfg', 'mode')) === 'fast', 30_000)

    // Renewal: a second request, made as the node itself (selfnodeclient), approved and signed; the
    // agent goes on with the new pair and no restart.
    const notAfter = () => Date.parse((agent.state() as { nodeCredentials?: { notAfter?: string } }).nodeCredentials?.notAfter ?? '')
    const firstEnd = Date.parse(new X509Certificate(Buffer.from(first?.status?.certificate ?? '', 'base64')).validTo)
    await until('a renewed certificate in use', () => notAfter() > firstEnd, 150_000)
    const renewals = (await csrs('system:node:b1-kubevol')).filter((c) => c.status?.certificate)
    expect(renewals.length).toBeGreaterThan(0)
    for (const renewal of renewals) expect(renewal.status?.conditions).toContainEqual(expect.objectContaining({ type: 'Approved', reason: 'AutoApproved' }))
    const stored = Buffer.from(await host.readFile(PAIR)).toString('utf8')
    expect(renewals.map((c) => Buffer.from(c.status?.certificate ?? '', 'base64').toString('utf8')).some((cert) => stored.startsWith(cert.trim()))).toBe(true)
    await cp.must('PATCH', '/api/v1/namespaces/default/configmaps/settings', { data: { mode: 'renewed' } }, { contentType: 'application/merge-patch+json' })
    await until('a change after the renewal reaches the files', async () => (await podFile(host, uid, 'kubernetes.io~configmap', 'cfg', 'mode')) === 'renewed', 30_000)

    // The node was held to the Node authorizer and refused nothing; the ServiceAccount did nothing but request certificates.
    expect(answers(cp, 'system:node:b1-kubevol', 403)).toEqual([])
    const bySa = cp.auditEvents().filter((e) => e.user.username === saUser)
    expect(bySa.length).toBeGreaterThan(0)
    expect(bySa.filter((e) => e.objectRef?.resource !== 'certificatesigningrequests').map((e) => `${e.verb} ${e.requestURI}`)).toEqual([])
    expect(answers(cp, saUser, 403)).toEqual([])
    // What the bundle's ServiceAccount may do besides: nothing a node reads.
    const as = { token: await cp.serviceAccountToken('kube-system', 'kubevol') }
    for (const path of ['/api/v1/pods', '/api/v1/secrets', '/api/v1/namespaces/default/configmaps/settings', '/api/v1/nodes']) {
      expect((await cp.request('GET', path, undefined, { as })).status, path).toBe(403)
    }
  })

  // The DaemonSet's case: the root on disk. The pair and the node kubeconfig are written beneath the root
  // by the Linux host, and a restart reads the kubeconfig it wrote (no request).
  const onDisk = process.getuid?.() === 0 && process.env.KUBEVOL_TEST_MOUNT_NAMESPACE === 'private'
  it.skipIf(!onDisk && process.env.CI !== 'true')('keeps its pair and kubeconfig on disk beneath the root (Linux host) and restarts from them', async () => {
    const { createLinuxHost } = await import('@kubevol/adapter-linux')
    const rootDir = join(dir, 'disk-root')
    const bootstrap = bootstrapKubeconfig('disk', await cp.serviceAccountToken('kube-system', 'kubevol'))
    const run = async () => {
      const host = createLinuxHost({ callTimeoutMs: 20_000 })
      const agent = await startAgent(
        { mode: 'api', nodeName: 'b8-kubevol', bootstrapKubeconfig: bootstrap, rotateCertificates: false, rootDir, port: 0, watchRetryMs: 50, statsPeriodMs: 0, shutdownGraceMs: 1_000, pluginRegistration: false },
        { host, log: { silent: process.env.KUBEVOL_ENVTEST_VERBOSE !== '1' } },
      )
      return { agent, close: async () => { await agent.stop(); host.close() } }
    }
    const first = await run()
    try {
      await until('the certificate issued', async () => (await credentialsCheck(first.agent))?.ok === true, 60_000)
    } finally {
      await first.close()
    }
    const pem = join(rootDir, 'pki', 'kubelet-client-current.pem')
    expect(statSync(pem).mode & 0o777).toBe(0o600)
    expect(statSync(join(rootDir, 'kubeconfig')).mode & 0o777).toBe(0o600)
    expect(readFileSync(join(rootDir, 'kubeconfig'), 'utf8')).toContain(`client-certificate: ${pem}`)
    const requests = (await csrs(saUser)).length
    const again = await run()
    try {
      expect(await credentialsCheck(again.agent)).toEqual({ name: 'node-credentials', ok: true })
      await until('the Node registered', async () => (await cp.request('GET', '/api/v1/nodes/b8-kubevol')).status === 200, 30_000)
      expect((await csrs(saUser)).length).toBe(requests)
    } finally {
      await again.close()
    }
    expect(answers(cp, 'system:node:b8-kubevol', 403)).toEqual([])
  })

  it("runs with the DaemonSet's arguments and its bootstrap kubeconfig mount, as shipped", async () => {
    const ds = parseAllDocuments(readFileSync(new URL('../../deploy/daemonset.yaml', import.meta.url), 'utf8'))[0]?.toJS() as {
      spec: { template: { spec: { containers: { args: string[]; volumeMounts: { name: string; mountPath: string }[] }[]; volumes: { name: string; configMap?: { name: string; optional?: boolean } }[] } } }
    }
    const pod = ds.spec.template.spec
    const container = pod.containers[0]
    // The DaemonSet's flag names the file it mounts from the bundle's ConfigMap.
    const flag = container?.args.find((a) => a.startsWith('--bootstrap-kubeconfig=')) ?? ''
    const mount = container?.volumeMounts.find((m) => m.name === 'bootstrap-kubeconfig')
    expect(flag).toBe(`--bootstrap-kubeconfig=${mount?.mountPath}/kubeconfig`)
    expect(pod.volumes.find((v) => v.name === 'bootstrap-kubeconfig')?.configMap).toEqual({ name: 'kubevol-bootstrap-kubeconfig', optional: true })

    // The DaemonSet's arguments ($(NODE_NAME) is the machine's node), the flag pointing at this test's copy of the file.
    const bootstrap = bootstrapKubeconfig('daemonset', await cp.serviceAccountToken('kube-system', 'kubevol'))
    const argv = (container?.args ?? []).map((a) => a.replace('$(NODE_NAME)', 'machine1').replace(/^--bootstrap-kubeconfig=.*/, `--bootstrap-kubeconfig=${bootstrap}`))
    const config = await loadAgentConfig({ argv, env: {} })
    expect(config).toMatchObject({ mode: 'api', nodeName: 'machine1-kubevol', bootstrapKubeconfig: bootstrap, rotateCertificates: true, certDir: `${ROOT}/pki`, kubeconfig: `${ROOT}/kubeconfig` })
    const host = createMemoryHost()
    // The host in memory (no watch of the machine's plugins_registry) and any free status port; the rest as shipped.
    const agent = await startAgent({ ...config, port: 0, pluginRegistration: false }, { host, log: { silent: process.env.KUBEVOL_ENVTEST_VERBOSE !== '1' } })
    agents.push(agent)
    await until('the certificate issued', async () => (await credentialsCheck(agent))?.ok === true, 60_000)
    await until('the Node registered', async () => (await cp.request('GET', '/api/v1/nodes/machine1-kubevol')).status === 200, 30_000)
    const node = await cp.must<{ metadata: { labels: Record<string, string> } }>('GET', '/api/v1/nodes/machine1-kubevol')
    expect(node.metadata.labels).toMatchObject({ 'kubevol.io/host': 'machine1' })
    await cp.must('POST', '/api/v1/namespaces/default/secrets', { metadata: { name: 'ds-secret' }, data: { key: Buffer.from('s3cret').toString('base64') } })
    const uid = await createPod(cp, podObject('ds-pod', 'machine1-kubevol', [{ name: 'cfg', configMap: { name: 'settings' } }, { name: 'sec', secret: { secretName: 'ds-secret' } }], { automount: false }))
    await until('the secret mounted', async () => (await podFile(host, uid, 'kubernetes.io~secret', 'sec', 'key')) === 's3cret', 30_000)
    expect(await storedCert(host)).toMatch(/CN = system:node:machine1-kubevol/)
    expect(answers(cp, 'system:node:machine1-kubevol', 403)).toEqual([])
  })

  it('restarts with the stored certificate and makes no request', async () => {
    const host = createMemoryHost()
    const bootstrap = bootstrapKubeconfig('sa-restart', await cp.serviceAccountToken('kube-system', 'kubevol'))
    const first = await start(host, 'b2-kubevol', bootstrap, { rotateCertificates: false })
    await until('the certificate issued', async () => (await credentialsCheck(first))?.ok === true, 60_000)
    await first.stop()
    const requests = (await csrs(saUser)).length

    const again = await start(host, 'b2-kubevol', bootstrap, { rotateCertificates: false })
    // Ready at once from the store: no request, and the Node served by the same identity.
    expect(await credentialsCheck(again)).toEqual({ name: 'node-credentials', ok: true })
    await until('the pod list synced', async () => (await again.readiness()).find((c) => c.name === 'api-watch')?.ok === true, 30_000)
    expect((await csrs(saUser)).length).toBe(requests)
    expect((await csrs('system:node:b2-kubevol')).length).toBe(0)
  })

  it('uses an unexpired client certificate of --kubeconfig before the bootstrap credential, and leaves the file as it is', async () => {
    const host = createMemoryHost()
    const given = cp.kubeconfigFor({ user: 'system:node:b6-kubevol', groups: ['system:nodes'] }, 'b6-given')
    const text = readFileSync(given, 'utf8')
    const requests = (await csrs(saUser)).length
    const agent = await start(host, 'b6-kubevol', bootstrapKubeconfig('sa-given', await cp.serviceAccountToken('kube-system', 'kubevol')), { kubeconfig: given })
    expect(await credentialsCheck(agent)).toEqual({ name: 'node-credentials', ok: true })
    await until('the Node registered by the given identity', async () => (await cp.request('GET', '/api/v1/nodes/b6-kubevol')).status === 200, 30_000)
    expect((await csrs(saUser)).length).toBe(requests)
    expect(readFileSync(given, 'utf8')).toBe(text)
    expect(answers(cp, 'system:node:b6-kubevol', 403)).toEqual([])
  })

  it('replaces an expired stored certificate through the bootstrap credential', async () => {
    const host = createMemoryHost()
    // A certificate of this node signed by the cluster's CA that expired a day ago.
    const work = mkdtempSync(join(dir, 'expired-'))
    execFileSync('openssl', ['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', 'n.key', '-out', 'n.csr', '-subj', '/O=system:nodes/CN=system:node:b3-kubevol'], { cwd: work, stdio: 'ignore' })
    execFileSync('openssl', ['x509', '-req', '-in', 'n.csr', '-CA', cp.caFile, '-CAkey', cp.caKeyFile, '-days', '-1', '-out', 'n.crt'], { cwd: work, stdio: 'ignore' })
    await host.mkdir(`${ROOT}/pki`, { recursive: true })
    await host.writeFile(PAIR, readFileSync(join(work, 'n.crt'), 'utf8') + readFileSync(join(work, 'n.key'), 'utf8'), { mode: 0o600 })
    const expired = await storedCert(host)

    const requests = (await csrs(saUser)).length
    const agent = await start(host, 'b3-kubevol', bootstrapKubeconfig('sa-expired', await cp.serviceAccountToken('kube-system', 'kubevol')), { rotateCertificates: false })
    await until('a new certificate issued', async () => (await credentialsCheck(agent))?.ok === true, 60_000)
    expect((await csrs(saUser)).length).toBe(requests + 1)
    expect(await storedCert(host)).not.toBe(expired)
    await until('the Node registered by the new identity', async () => (await cp.request('GET', '/api/v1/nodes/b3-kubevol')).status === 200, 30_000)
    expect(answers(cp, 'system:node:b3-kubevol', 403)).toEqual([])
  })

  it('bootstraps from a bootstrap token of the group the bundle binds', async () => {
    const id = 'kvboot'
    const secret = '0123456789abcdef'
    await cp.must('POST', '/api/v1/namespaces/kube-system/secrets', {
      metadata: { name: `bootstrap-token-${id}` },
      type: 'bootstrap.kubernetes.io/token',
      stringData: { 'token-id': id, 'token-secret': secret, 'usage-bootstrap-authentication': 'true', 'auth-extra-groups': 'system:bootstrappers:kubevol' },
    })
    const host = createMemoryHost()
    const agent = await start(host, 'b4-kubevol', bootstrapKubeconfig('token', `${id}.${secret}`), { rotateCertificates: false })
    await until('the certificate issued', async () => (await credentialsCheck(agent))?.ok === true, 60_000)
    const [request] = await csrs(`system:bootstrap:${id}`)
    expect(request?.spec.groups).toContain('system:bootstrappers:kubevol')
    expect(await storedCert(host)).toMatch(/CN = system:node:b4-kubevol/)
  })

  it('says in /readyz when its request cannot be read (a credential that may create requests but not list them)', async () => {
    await cp.must('POST', '/api/v1/namespaces/kube-system/serviceaccounts', { metadata: { name: 'create-only' } })
    await cp.must('POST', '/apis/rbac.authorization.k8s.io/v1/clusterroles', {
      metadata: { name: 'csr-create-only' },
      rules: [{ apiGroups: ['certificates.k8s.io'], resources: ['certificatesigningrequests'], verbs: ['create'] }],
    })
    for (const [name, role] of [['create-only', 'csr-create-only'], ['create-only-approve', 'system:certificates.k8s.io:certificatesigningrequests:nodeclient']]) {
      await cp.must('POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
        metadata: { name },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
        subjects: [{ kind: 'ServiceAccount', name: 'create-only', namespace: 'kube-system' }],
      })
    }
    const agent = await start(createMemoryHost(), 'b7-kubevol', bootstrapKubeconfig('create-only', await cp.serviceAccountToken('kube-system', 'create-only')))
    let said = ''
    await until('readiness says the request cannot be read', async () =>
      /^waiting for certificate signing request (csr-\w+) to be approved and signed \(cannot read certificate signing request \1: certificatesigningrequests\.certificates\.k8s\.io "\1" is forbidden: User "system:serviceaccount:kube-system:create-only" cannot list resource/.test(
        (said = (await credentialsCheck(agent))?.message ?? ''),
      ),
    ).catch((err: Error) => {
      throw new Error(`${err.message}; /readyz said: ${said}`)
    })
  })

  it('reports a denied request in /readyz and keeps the agent running', async () => {
    // A ServiceAccount that may create requests but whose requests nobody approves.
    await cp.must('POST', '/api/v1/namespaces/kube-system/serviceaccounts', { metadata: { name: 'unapproved' } })
    await cp.must('POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      metadata: { name: 'unapproved-bootstrapper' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:node-bootstrapper' },
      subjects: [{ kind: 'ServiceAccount', name: 'unapproved', namespace: 'kube-system' }],
    })
    const host = createMemoryHost()
    const agent = await start(host, 'b5-kubevol', bootstrapKubeconfig('unapproved', await cp.serviceAccountToken('kube-system', 'unapproved')))
    let name = ''
    await until('a pending request', async () => {
      name = (await csrs('system:serviceaccount:kube-system:unapproved'))[0]?.metadata.name ?? ''
      return name !== ''
    })
    await until('readiness names the request', async () => (await credentialsCheck(agent))?.message === `waiting for certificate signing request ${name} to be approved and signed`)

    const csr = await cp.must<Record<string, unknown> & { status?: Record<string, unknown> }>('GET', `/apis/certificates.k8s.io/v1/certificatesigningrequests/${name}`)
    await cp.must('PUT', `/apis/certificates.k8s.io/v1/certificatesigningrequests/${name}/approval`, {
      ...csr,
      status: { conditions: [{ type: 'Denied', status: 'True', reason: 'NotThisNode', message: 'b5 is not ours' }] },
    })
    const denied = `no client certificate: certificate signing request ${name} is denied, reason: NotThisNode, message: b5 is not ours`
    // It says so, and goes on saying it while its next request (a new one, after 2 s, as the kubelet) waits.
    await until('readiness says it was denied', async () => (await credentialsCheck(agent))?.message?.startsWith(denied) === true, 30_000)
    await until('a new request after the denial, the denial still said', async () => {
      const message = (await credentialsCheck(agent))?.message ?? ''
      const next = /; waiting for certificate signing request (csr-\w+) to be approved and signed$/.exec(message)?.[1]
      return message.startsWith(denied) && next !== undefined && next !== name
    }, 30_000)
    const res = await fetch(`${agent.url}/readyz?verbose`)
    expect(res.status).toBe(503)
    expect(await res.text()).toContain(denied)
    // The agent still answers, and made no request as a node.
    expect((await fetch(`${agent.url}/livez`)).status).toBe(200)
    expect(cp.auditEvents().filter((e) => e.user.username === 'system:node:b5-kubevol')).toEqual([])
  })
})
