/**
 * A client certificate and its key, and where the agent keeps the current one: one PEM file holding
 * the certificate then the key, `<cert dir>/kubelet-client-current.pem`, as the kubelet's certificate
 * store names it (the kubelet keeps each pair in a dated file and points `-current` at it with a
 * symlink; kubevol follows no symlink it did not make, so its `-current` file is the pair itself,
 * replaced atomically).
 */
import { X509Certificate, createPrivateKey } from 'node:crypto'
import type { CredentialFiles } from './credential-files.js'

/** The file name of the current pair in the cert directory. */
export const CURRENT_PAIR_FILE = 'kubelet-client-current.pem'

/** A certificate and the key it was issued for, checked to match. */
export interface ClientPair {
  /** The certificate (the first of the chain, if the file held more), PEM. */
  readonly certPem: string
  readonly keyPem: string
  /** Milliseconds since the epoch. */
  readonly notBefore: number
  readonly notAfter: number
  readonly commonName: string
  readonly organizations: readonly string[]
}

const BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----[\s\S]*?-----END \1-----\n?/g

/** The PEM blocks of a text, by label. */
export function pemBlocks(text: string): { readonly label: string; readonly pem: string }[] {
  return [...text.matchAll(BLOCK)].map((m) => ({ label: m[1] ?? '', pem: m[0].endsWith('\n') ? m[0] : `${m[0]}\n` }))
}

/** Values of one attribute in an X509Certificate's `subject` text (`O=a\nCN=b`). */
function attribute(subject: string, name: string): string[] {
  return subject
    .split('\n')
    .filter((line) => line.startsWith(`${name}=`))
    .map((line) => line.slice(name.length + 1))
}

/**
 * A pair from PEM texts: `certPem` holds one certificate or more (the first is the client's),
 * `keyPem` a private key. Throws when either does not parse or the key is not the certificate's.
 */
export function parseClientPair(certPem: string, keyPem: string): ClientPair {
  const certs = pemBlocks(certPem).filter((b) => b.label === 'CERTIFICATE')
  const first = certs[0]
  if (!first) throw new Error('no certificate found')
  const cert = new X509Certificate(first.pem)
  const key = createPrivateKey(keyPem)
  if (!cert.checkPrivateKey(key)) throw new Error('the private key does not belong to the certificate')
  return {
    certPem: first.pem,
    keyPem: key.export({ type: key.asymmetricKeyType === 'ec' ? 'sec1' : 'pkcs8', format: 'pem' }).toString(),
    notBefore: Date.parse(cert.validFrom),
    notAfter: Date.parse(cert.validTo),
    commonName: attribute(cert.subject, 'CN')[0] ?? '',
    organizations: attribute(cert.subject, 'O'),
  }
}

/** A pair from one PEM text holding both (the store's file). */
export function parseCombinedPem(text: string): ClientPair {
  const blocks = pemBlocks(text)
  const key = blocks.find((b) => b.label.endsWith('PRIVATE KEY'))
  if (!key) throw new Error('no private key found')
  return parseClientPair(blocks.filter((b) => b.label === 'CERTIFICATE').map((b) => b.pem).join(''), key.pem)
}

/** What the store holds: a pair, nothing, or a file it could not read as one. */
export type StoredPair = { readonly pair: ClientPair } | { readonly missing: true } | { readonly invalid: string }

/** The current pair of a cert directory. */
export interface CertStore {
  /** `<cert dir>/kubelet-client-current.pem`: what the node's kubeconfig names. */
  readonly path: string
  /** The stored pair; never throws (a file that cannot be read or parsed is `invalid`, with why). */
  current(): Promise<StoredPair>
  /** Checks the pair and makes it the current one (mode 0600, replaced atomically). */
  update(certPem: string, keyPem: string): Promise<ClientPair>
}

/** The store of `certDir`, its files read and written through `files`. */
export function createCertStore(files: CredentialFiles, certDir: string): CertStore {
  const path = `${certDir.replace(/\/+$/, '')}/${CURRENT_PAIR_FILE}`
  return {
    path,
    async current() {
      // A file that cannot be read (a symlink planted beneath the root: ELOOP) is no pair; a new one replaces it.
      try {
        const data = await files.read(path)
        if (data === undefined) return { missing: true }
        return { pair: parseCombinedPem(Buffer.from(data).toString('utf8')) }
      } catch (err) {
        return { invalid: `${path}: ${err instanceof Error ? err.message : String(err)}` }
      }
    },
    async update(certPem, keyPem) {
      const pair = parseClientPair(certPem, keyPem)
      await files.writeAtomic(path, `${pair.certPem}${pair.keyPem}`)
      return pair
    },
  }
}
