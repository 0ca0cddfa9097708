/**
 * Certificates for the credential tests: self-signed, for any subject and validity (an expired one
 * too), built with the same ASN.1 library the agent's requests use and signed by node:crypto.
 */
import { createPublicKey, sign } from 'node:crypto'
import { AsnConvert } from '@peculiar/asn1-schema'
import { AlgorithmIdentifier, AttributeTypeAndValue, AttributeValue, Certificate, Name, RelativeDistinguishedName, SubjectPublicKeyInfo, TBSCertificate, Validity, Version } from '@peculiar/asn1-x509'
import { generateNodeKey, toPem } from '../src/credentials/csr.js'

const ECDSA_SHA256 = '1.2.840.10045.4.3.2'
const rdn = (oid: string, value: string) => new RelativeDistinguishedName([new AttributeTypeAndValue({ type: oid, value: new AttributeValue({ utf8String: value }) })])

/** A self-signed ECDSA certificate for `CN=<commonName>, O=<organization>`, valid from `notBefore` to `notAfter` (ms). */
export function selfSignedPair(o: { readonly commonName: string; readonly organization?: string; readonly notBefore: number; readonly notAfter: number }): { readonly certPem: string; readonly keyPem: string } {
  const { key, keyPem } = generateNodeKey()
  const alg = new AlgorithmIdentifier({ algorithm: ECDSA_SHA256 })
  const name = new Name([...(o.organization ? [rdn('2.5.4.10', o.organization)] : []), rdn('2.5.4.3', o.commonName)])
  const tbs = new TBSCertificate({
    version: Version.v3,
    serialNumber: new Uint8Array([1, 2, 3]).buffer,
    signature: alg,
    issuer: name,
    // Whole seconds: X.509 times have no fractions.
    validity: new Validity({ notBefore: new Date(Math.floor(o.notBefore / 1000) * 1000), notAfter: new Date(Math.floor(o.notAfter / 1000) * 1000) }),
    subject: name,
    subjectPublicKeyInfo: AsnConvert.parse(createPublicKey(key).export({ type: 'spki', format: 'der' }), SubjectPublicKeyInfo),
  })
  const signature = sign('sha256', Buffer.from(AsnConvert.serialize(tbs)), key)
  const cert = new Certificate({ tbsCertificate: tbs, signatureAlgorithm: alg, signatureValue: new Uint8Array(signature).buffer })
  return { certPem: toPem('CERTIFICATE', new Uint8Array(AsnConvert.serialize(cert))), keyPem }
}
