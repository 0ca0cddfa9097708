import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createMemoryHost } from '@kubevol/adapter-mock'
import { afterAll, describe, expect, it } from 'vitest'
import { selfSignedPair } from '../../test/certificates.js'
import { CURRENT_PAIR_FILE, createCertStore, parseClientPair, parseCombinedPem } from './client-pair.js'
import { createCredentialFiles } from './credential-files.js'

const ROOT = '/var/lib/kubevol'
const now = Date.now()
const valid = selfSignedPair({ commonName: 'system:node:n1', organization: 'system:nodes', notBefore: now - 60_000, notAfter: now + 3_600_000 })
const other = selfSignedPair({ commonName: 'system:node:n1', organization: 'system:nodes', notBefore: now - 60_000, notAfter: now + 3_600_000 })

describe('parseClientPair', () => {
  it('reads the subject and the validity, and keeps the first certificate of a chain', () => {
    const pair = parseClientPair(valid.certPem + other.certPem, valid.keyPem)
    expect(pair).toMatchObject({ commonName: 'system:node:n1', organizations: ['system:nodes'], certPem: valid.certPem })
    expect(pair.notBefore).toBe(Math.floor((now - 60_000) / 1000) * 1000)
    expect(pair.notAfter).toBe(Math.floor((now + 3_600_000) / 1000) * 1000)
    expect(parseCombinedPem(valid.certPem + valid.keyPem)).toEqual(pair)
  })

  it.each([
    ['a key of another certificate', valid.certPem, other.keyPem, 'the private key does not belong to the certificate'],
    ['no certificate', valid.keyPem, valid.keyPem, 'no certificate found'],
  ])('refuses %s', (_name, cert, key, message) => {
    expect(() => parseClientPair(cert, key)).toThrow(message)
  })
})

describe('the cert store beneath the root (through the host)', () => {
  it('writes the pair as one 0600 file by rename, reads it back, and reports what it cannot use', async () => {
    const host = createMemoryHost()
    await host.lockRoot?.(ROOT)
    const store = createCertStore(createCredentialFiles(host, ROOT), `${ROOT}/pki`)
    expect(store.path).toBe(`${ROOT}/pki/${CURRENT_PAIR_FILE}`)
    expect(await store.current()).toEqual({ missing: true })

    // A temporary file left by a crash, with a wider mode: replaced, not reused.
    await host.mkdir(`${ROOT}/pki`, { recursive: true })
    await host.writeFile(`${ROOT}/pki/.${CURRENT_PAIR_FILE}.tmp`, 'stale', { mode: 0o644 })
    const pair = await store.update(valid.certPem, valid.keyPem)
    expect(await host.stat(store.path)).toMatchObject({ type: 'file', mode: 0o600 })
    expect(await host.readdir(`${ROOT}/pki`)).toEqual([CURRENT_PAIR_FILE])
    expect(Buffer.from(await host.readFile(store.path)).toString()).toBe(`${valid.certPem}${pair.keyPem}`)
    expect(await store.current()).toEqual({ pair })

    await store.update(other.certPem, other.keyPem)
    expect(await store.current()).toMatchObject({ pair: { certPem: other.certPem } })

    await expect(store.update(valid.certPem, other.keyPem)).rejects.toThrow('the private key does not belong to the certificate')
    await host.writeFile(store.path, 'garbage', { mode: 0o600 })
    expect(await store.current()).toEqual({ invalid: `${store.path}: no private key found` })
  })

  it('refuses to write through a symlink beneath the root', async () => {
    const host = createMemoryHost()
    await host.lockRoot?.(ROOT)
    await host.mkdir('/elsewhere', { recursive: true })
    await host.symlink('/elsewhere', `${ROOT}/pki`)
    const store = createCertStore(createCredentialFiles(host, ROOT), `${ROOT}/pki`)
    await expect(store.update(valid.certPem, valid.keyPem)).rejects.toMatchObject({ code: 'ELOOP' })
    expect(await host.readdir('/elsewhere')).toEqual([])
  })
})

describe('credential files outside the root (node:fs)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kubevol-credentials-'))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it('writes 0600 by rename into a directory made 0700, and reads a missing file as undefined', async () => {
    const files = createCredentialFiles(createMemoryHost(), ROOT)
    const path = join(dir, 'made', 'kubeconfig')
    expect(await files.read(path)).toBeUndefined()
    writeFileSync(join(dir, 'stale'), 'x')
    await files.writeAtomic(path, 'one')
    await files.writeAtomic(path, 'two')
    expect(readFileSync(path, 'utf8')).toBe('two')
    expect(statSync(path).mode & 0o777).toBe(0o600)
    expect(statSync(join(dir, 'made')).mode & 0o777).toBe(0o700)
    expect(readdirSync(join(dir, 'made'))).toEqual(['kubeconfig'])
    expect(Buffer.from((await files.read(path)) ?? []).toString()).toBe('two')
  })
})
