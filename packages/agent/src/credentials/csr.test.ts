import { createPublicKey, verify } from 'node:crypto'
import { CertificationRequest } from '@peculiar/asn1-csr'
import { AsnConvert } from '@peculiar/asn1-schema'
import { describe, expect, it } from 'vitest'
import { pemBlocks } from './client-pair.js'
import { buildNodeCsr, generateNodeKey } from './csr.js'

/** The DER of a PEM text's one block. */
const der = (pem: string) => Buffer.from(pem.replace(/-----[^-]+-----/g, '').replace(/\s+/g, ''), 'base64')

describe('generateNodeKey', () => {
  it('makes an ECDSA P-256 key as SEC1 PEM, a new one each time', () => {
    const a = generateNodeKey()
    const b = generateNodeKey()
    expect(a.key.asymmetricKeyType).toBe('ec')
    expect(a.key.asymmetricKeyDetails?.namedCurve).toBe('prime256v1')
    expect(pemBlocks(a.keyPem).map((x) => x.label)).toEqual(['EC PRIVATE KEY'])
    expect(a.keyPem).not.toBe(b.keyPem)
  })
})

describe('buildNodeCsr', () => {
  const { key, keyPem } = generateNodeKey()
  const pem = buildNodeCsr(key, 'n1-kubevol')
  const request = AsnConvert.parse(der(pem), CertificationRequest)
  const info = request.certificationRequestInfo

  it('asks for CN=system:node:<node>, O=system:nodes, in Go order, as PrintableStrings, with nothing else', () => {
    expect(pemBlocks(pem).map((b) => b.label)).toEqual(['CERTIFICATE REQUEST'])
    expect(info.version).toBe(0)
    const attrs = info.subject.map((rdn) => rdn.map((a) => [a.type, a.value.printableString]))
    expect(attrs).toEqual([[['2.5.4.10', 'system:nodes']], [['2.5.4.3', 'system:node:n1-kubevol']]])
    // No SANs, no extension request: the approver refuses a node client request that has any.
    expect(info.attributes).toEqual([])
  })

  it('carries the key and a valid ECDSA-SHA256 signature of the request info', () => {
    const publicKey = createPublicKey(key)
    expect(Buffer.from(AsnConvert.serialize(info.subjectPKInfo)).equals(publicKey.export({ type: 'spki', format: 'der' }))).toBe(true)
    expect(request.signatureAlgorithm.algorithm).toBe('1.2.840.10045.4.3.2')
    const tbs = Buffer.from(AsnConvert.serialize(info))
    expect(verify('sha256', tbs, publicKey, Buffer.from(request.signature))).toBe(true)
    // The same from the key's PEM.
    const again = AsnConvert.parse(der(buildNodeCsr(keyPem, 'n1-kubevol')), CertificationRequest)
    expect(verify('sha256', Buffer.from(AsnConvert.serialize(again.certificationRequestInfo)), publicKey, Buffer.from(again.signature))).toBe(true)
  })

  it('refuses a key that is not an EC key', async () => {
    const { generateKeyPairSync } = await import('node:crypto')
    const { privateKey } = generateKeyPairSync('ed25519')
    expect(() => buildNodeCsr(privateKey, 'n1')).toThrow('a node key must be an EC key, not ed25519')
  })
})
