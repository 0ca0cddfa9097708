/**
 * Which identity the node's credentials start from, and what they say while they have none, with an
 * API server that cannot be reached (requests fail at once). The requests themselves, approval,
 * renewal and denial run against the real control plane in test/envtest/tls-bootstrap.test.ts.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createMemoryHost } from '@kubevol/adapter-mock'
import { silentLogger, systemClock } from '@kubevol/core'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { selfSignedPair } from '../../test/certificates.js'
import { until } from '../../test/helpers.js'
import { createCredentialFiles } from './credential-files.js'
import { NodeCredentials } from './node-credentials.js'

const ROOT = '/var/lib/kubevol'
const PAIR = `${ROOT}/pki/kubelet-client-current.pem`
const dir = mkdtempSync(join(tmpdir(), 'kubevol-node-credentials-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
// Port 1 on loopback: nothing listens, every request fails at once.
const BOOTSTRAP = join(dir, 'bootstrap.yaml')
writeFileSync(
  BOOTSTRAP,
  `apiVersion: v1
kind: Config
clusters: [{ name: c, cluster: { server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true } }]
users: [{ name: u, user: { token: bootstrap-token } }]
contexts: [{ name: x, context: { cluster: c, user: u } }]
current-context: x
`,
)
const now = Date.now()
const pairFor = (node: string, notAfter = now + 3_600_000) => selfSignedPair({ commonName: `system:node:${node}`, organization: 'system:nodes', notBefore: now - 60_000, notAfter })

describe('NodeCredentials', () => {
  const running: NodeCredentials[] = []
  afterEach(async () => {
    for (const c of running.splice(0)) await c.stop()
  })

  async function start(o: { kubeconfig?: string; rotate?: boolean; stored?: { certPem: string; keyPem: string } } = {}) {
    const host = createMemoryHost()
    await host.lockRoot?.(ROOT)
    if (o.stored) {
      await host.mkdir(`${ROOT}/pki`, { recursive: true })
      await host.writeFile(PAIR, o.stored.certPem + o.stored.keyPem, { mode: 0o600 })
    }
    const credentials = new NodeCredentials({
      nodeName: 'n1',
      bootstrapKubeconfig: BOOTSTRAP,
      kubeconfig: o.kubeconfig ?? `${ROOT}/kubeconfig`,
      certDir: `${ROOT}/pki`,
      rotate: o.rotate ?? true,
      files: createCredentialFiles(host, ROOT),
      clock: systemClock,
      logger: silentLogger,
    })
    running.push(credentials)
    await credentials.start()
    return { host, credentials }
  }

  it('starts from the stored pair: ready, no request, and the node kubeconfig written to name it', async () => {
    const stored = pairFor('n1')
    const { host, credentials } = await start({ stored })
    expect(credentials.current()?.certPem).toBe(stored.certPem)
    expect(credentials.check()).toBeUndefined()
    expect(credentials.status()).toMatchObject({ subject: 'CN=system:node:n1, O=system:nodes', requests: 0 })
    expect(credentials.status().rotationDeadline).toBeDefined()
    const kubeconfig = Buffer.from(await host.readFile(`${ROOT}/kubeconfig`)).toString()
    expect(kubeconfig).toContain(`client-certificate: ${PAIR}`)
    expect(kubeconfig).toContain("server: https://127.0.0.1:1")
    expect((await host.stat(`${ROOT}/kubeconfig`))?.mode).toBe(0o600)
  })

  it("starts from --kubeconfig's unexpired certificate when the store has none, and leaves that file alone", async () => {
    const given = pairFor('n1')
    const path = join(dir, 'given.yaml')
    const text = `apiVersion: v1
kind: Config
clusters: [{ name: c, cluster: { server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true } }]
users: [{ name: u, user: { client-certificate-data: ${Buffer.from(given.certPem).toString('base64')}, client-key-data: ${Buffer.from(given.keyPem).toString('base64')} } }]
contexts: [{ name: x, context: { cluster: c, user: u } }]
current-context: x
`
    writeFileSync(path, text)
    const { credentials } = await start({ kubeconfig: path })
    expect(credentials.current()?.certPem).toBe(given.certPem)
    expect(credentials.check()).toBeUndefined()
    expect(readFileSync(path, 'utf8')).toBe(text)
  })

  it('with an expired stored pair and no kubeconfig, requests one and says why it has none', async () => {
    const { host, credentials } = await start({ stored: pairFor('n1', now - 1_000) })
    expect(credentials.current()).toBeUndefined()
    expect(credentials.check()).toMatch(/^(requesting a client certificate with the bootstrap kubeconfig|no client certificate: .*)$/)
    await until('the failed request reported', () => /no client certificate: cannot create certificate signing request: .*ECONNREFUSED/.test(credentials.check() ?? ''), 10_000)
    // The node kubeconfig is written all the same, naming where the pair will be.
    expect(Buffer.from(await host.readFile(`${ROOT}/kubeconfig`)).toString()).toContain(`client-key: ${PAIR}`)
  })

  it("replaces at once a stored certificate for another node's name, keeping it in use meanwhile", async () => {
    const { credentials } = await start({ stored: pairFor('other') })
    expect(credentials.check()).toBeUndefined()
    await until('a request made', () => credentials.status().requests > 0 && credentials.status().lastError !== undefined, 10_000)
    expect(credentials.current()?.commonName).toBe('system:node:other')
  })

  it('without rotation, makes no request while the stored certificate is valid', async () => {
    const { credentials } = await start({ stored: pairFor('n1', now + 5_000), rotate: false })
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(credentials.status().requests).toBe(0)
    // Once it has expired, a new one is requested (here: refused at once).
    await until('a request after the end', () => credentials.status().requests > 0, 15_000)
    expect(credentials.current()).toBeUndefined()
  })

  it('fails API requests that wait for a certificate once it stops', async () => {
    const { credentials } = await start({ stored: pairFor('n1', now - 1_000) })
    const user = credentials.kubeConfig.getCurrentUser()
    const { CoreV1Api } = await import('@kubernetes/client-node')
    const waiting = credentials.kubeConfig.makeApiClient(CoreV1Api).readNode({ name: 'n1' })
    expect(user?.name).toBe('kubevol-node-certificate')
    const refused = expect(waiting).rejects.toThrow('the node credentials are stopped')
    await credentials.stop()
    await refused
  })
})
