import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { selfSignedPair } from '../../test/certificates.js'
import { loadBootstrapKubeConfig, nodeKubeconfigYaml, readNodeKubeconfig } from './node-kubeconfig.js'

const dir = mkdtempSync(join(tmpdir(), 'kubevol-kubeconfig-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const file = (name: string, text: string): string => {
  const path = join(dir, name)
  writeFileSync(path, text)
  return path
}
const now = Date.now()
const kubeconfig = (user: string, cluster = "server: 'https://127.0.0.1:6443'\n      certificate-authority: ca.crt") => `apiVersion: v1
kind: Config
clusters:
  - name: c
    cluster:
      ${cluster}
users:
  - name: u
    user:
${user}
contexts:
  - name: x
    context: { cluster: c, user: u }
current-context: x
`

describe('loadBootstrapKubeConfig', () => {
  it("reads a user's tokenFile (relative to the file) and makes the CA path absolute", () => {
    file('sa.token', 'the-token\n')
    const kc = loadBootstrapKubeConfig(file('bootstrap.yaml', kubeconfig('      tokenFile: sa.token')))
    expect(kc.getCurrentUser()?.token).toBe('the-token')
    expect(kc.getCurrentCluster()).toMatchObject({ server: 'https://127.0.0.1:6443', caFile: join(dir, 'ca.crt') })
  })

  it('reads the token file again on every load (a projected token is renewed)', () => {
    const path = file('renewed.yaml', kubeconfig(`      tokenFile: ${join(dir, 'renewed.token')}`))
    file('renewed.token', 'one')
    expect(loadBootstrapKubeConfig(path).getCurrentUser()?.token).toBe('one')
    file('renewed.token', 'two')
    expect(loadBootstrapKubeConfig(path).getCurrentUser()?.token).toBe('two')
  })

  it('fails with the file name when it names no cluster', () => {
    const path = file('empty.yaml', 'apiVersion: v1\nkind: Config\n')
    expect(() => loadBootstrapKubeConfig(path)).toThrow(`the bootstrap kubeconfig ${path} names no current cluster`)
  })
})

describe('the node kubeconfig', () => {
  it('is written as the kubelet writes it and read back as valid while its certificate is', () => {
    const pair = selfSignedPair({ commonName: 'system:node:n1', organization: 'system:nodes', notBefore: now - 60_000, notAfter: now + 3_600_000 })
    const pem = file('kubelet-client-current.pem', pair.certPem + pair.keyPem)
    const cluster = { name: 'c', server: 'https://127.0.0.1:6443', caData: Buffer.from('CA').toString('base64'), skipTLSVerify: false }
    const text = nodeKubeconfigYaml(cluster, pem)
    expect(text).toContain('current-context: default-context')
    expect(text).toContain(`client-certificate: ${pem}`)
    expect(text).toContain(`client-key: ${pem}`)
    expect(text).toContain(`certificate-authority-data: ${cluster.caData}`)
    const path = file('node.yaml', text)
    const read = readNodeKubeconfig(path, now)
    expect(read).toMatchObject({ state: 'valid', cluster: { server: cluster.server, caData: cluster.caData }, pair: { commonName: 'system:node:n1' } })
    // Past its end it no longer counts, and says when it ended.
    const after = now + 3_700_000
    expect(readNodeKubeconfig(path, after)).toEqual({ state: 'invalid', reason: `the client certificate of ${path} expired at ${new Date(Math.floor((now + 3_600_000) / 1000) * 1000).toISOString()}` })
  })

  it.each([
    ['a token user', kubeconfig('      token: abc'), 'holds no client certificate and key'],
    ['a certificate whose file is gone', kubeconfig(`      client-certificate: ${join(dir, 'gone.pem')}\n      client-key: ${join(dir, 'gone.pem')}`), 'cannot be used: ENOENT'],
  ])('gives no identity with %s', (name, text, reason) => {
    const path = file(`${name.replace(/ /g, '-')}.yaml`, text)
    const read = readNodeKubeconfig(path, now)
    expect(read.state).toBe('invalid')
    expect(read.state === 'invalid' && read.reason).toContain(reason)
  })

  it('is missing when there is no file', () => {
    expect(readNodeKubeconfig(join(dir, 'none.yaml'), now)).toEqual({ state: 'missing' })
  })
})
