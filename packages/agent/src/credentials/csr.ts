/**
 * The node's key and its PKCS#10 certificate signing request, as the kubelet's certificate manager
 * makes them (client-go `util/certificate`): a new ECDSA P-256 key for every request, and a request
 * for `CN=system:node:<node>, O=system:nodes` with no SANs, signed with ECDSA-SHA256. node:crypto
 * makes the key and the signature; the ASN.1 structures are @peculiar/asn1-csr's (RFC 2986).
 */
import { type KeyObject, createPrivateKey, createPublicKey, generateKeyPairSync, sign } from 'node:crypto'
import { CertificationRequest, CertificationRequestInfo } from '@peculiar/asn1-csr'
import { AsnConvert } from '@peculiar/asn1-schema'
import { AlgorithmIdentifier, AttributeTypeAndValue, AttributeValue, Name, RelativeDistinguishedName, SubjectPublicKeyInfo } from '@peculiar/asn1-x509'

/** The signer of kubelet client certificates (`certificates.k8s.io/v1` `KubeAPIServerClientKubeletSignerName`). */
export const KUBELET_CLIENT_SIGNER = 'kubernetes.io/kube-apiserver-client-kubelet'

/**
 * The usages the kubelet asks for with an ECDSA key (client-go's `DefaultKubeletClientGetUsages`:
 * key encipherment only for an RSA key).
 */
export const KUBELET_CLIENT_USAGES: readonly string[] = ['digital signature', 'client auth']

/** The user a node's client certificate names: `system:node:<node>`, in the group `system:nodes`. */
export function nodeSubject(nodeName: string): { readonly commonName: string; readonly organization: string } {
  return { commonName: `system:node:${nodeName}`, organization: 'system:nodes' }
}

const OID_COMMON_NAME = '2.5.4.3'
const OID_ORGANIZATION = '2.5.4.10'
const OID_ECDSA_WITH_SHA256 = '1.2.840.10045.4.3.2'
// PrintableString's alphabet (X.680): Go's x509 writes a name in it when it can, as here.
const PRINTABLE = /^[A-Za-z0-9 '()+,\-./:=?]*$/

function rdn(oid: string, value: string): RelativeDistinguishedName {
  const text = PRINTABLE.test(value) ? new AttributeValue({ printableString: value }) : new AttributeValue({ utf8String: value })
  return new RelativeDistinguishedName([new AttributeTypeAndValue({ type: oid, value: text })])
}

/** A new private key as the kubelet makes one: ECDSA on P-256, as SEC1 PEM (`EC PRIVATE KEY`). */
export function generateNodeKey(): { readonly key: KeyObject; readonly keyPem: string } {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
  return { key: privateKey, keyPem: privateKey.export({ type: 'sec1', format: 'pem' }).toString() }
}

/** PEM armour of DER bytes. */
export function toPem(label: string, der: Uint8Array): string {
  const base64 = Buffer.from(der).toString('base64')
  return `-----BEGIN ${label}-----\n${base64.match(/.{1,64}/g)?.join('\n') ?? ''}\n-----END ${label}-----\n`
}

/**
 * The PEM certificate signing request of `key` for the node's client certificate: the subject in
 * Go's order (O, then CN), no attributes, no extensions. The key is an EC key (a PEM string or a
 * KeyObject); its public half goes into the request.
 */
export function buildNodeCsr(key: KeyObject | string, nodeName: string): string {
  const privateKey = typeof key === 'string' ? createPrivateKey(key) : key
  if (privateKey.asymmetricKeyType !== 'ec') throw new Error(`a node key must be an EC key, not ${privateKey.asymmetricKeyType ?? 'unknown'}`)
  const subject = nodeSubject(nodeName)
  const spki = AsnConvert.parse(createPublicKey(privateKey).export({ type: 'spki', format: 'der' }), SubjectPublicKeyInfo)
  const info = new CertificationRequestInfo({
    subject: new Name([rdn(OID_ORGANIZATION, subject.organization), rdn(OID_COMMON_NAME, subject.commonName)]),
    subjectPKInfo: spki,
  })
  // ECDSA signatures from node:crypto are DER (r, s), as X.509 wants them.
  const signature = sign('sha256', Buffer.from(AsnConvert.serialize(info)), privateKey)
  const request = new CertificationRequest({
    certificationRequestInfo: info,
    signatureAlgorithm: new AlgorithmIdentifier({ algorithm: OID_ECDSA_WITH_SHA256 }),
    signature: new Uint8Array(signature).buffer,
  })
  return toPem('CERTIFICATE REQUEST', new Uint8Array(AsnConvert.serialize(request)))
}
