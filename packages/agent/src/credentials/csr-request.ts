/**
 * One certificate request as the kubelet's certificate manager makes it (client-go
 * `util/certificate/csr`): create a `certificates.k8s.io/v1` CertificateSigningRequest named
 * `csr-<random>` for the kubelet client signer, then list and watch it by name until it is approved
 * and signed, denied, failed or deleted.
 */
import { CertificatesV1Api, type KubeConfig, type V1CertificateSigningRequest, Watch } from '@kubernetes/client-node'
import { apiErrorMessage } from '../kube/kube-client.js'
import { KUBELET_CLIENT_SIGNER, KUBELET_CLIENT_USAGES } from './csr.js'

const CSR_PATH = '/apis/certificates.k8s.io/v1/certificatesigningrequests'

/** A request that did not give a certificate; `message` is what the agent reports. */
class CertificateRequestError extends Error {
  override readonly name = 'CertificateRequestError'
}

/** Creates the request; resolves with its name and UID. */
export async function createCertificateRequest(kc: KubeConfig, csrPem: string): Promise<{ readonly name: string; readonly uid: string }> {
  const api = kc.makeApiClient(CertificatesV1Api)
  try {
    const created = await api.createCertificateSigningRequest({
      body: {
        apiVersion: 'certificates.k8s.io/v1',
        kind: 'CertificateSigningRequest',
        // The kubelet's rotation names its requests so (the API server adds 5 random characters).
        metadata: { generateName: 'csr-' },
        spec: { request: Buffer.from(csrPem).toString('base64'), signerName: KUBELET_CLIENT_SIGNER, usages: [...KUBELET_CLIENT_USAGES] },
      },
    })
    return { name: created.metadata?.name ?? '', uid: created.metadata?.uid ?? '' }
  } catch (err) {
    throw new CertificateRequestError(`cannot create certificate signing request: ${apiErrorMessage(err)}`, { cause: err })
  }
}

/**
 * What a request's object says: its certificate (PEM) once approved and signed, an error once
 * denied or failed (client-go's words, with the request's name), or `undefined` while pending.
 */
export function requestOutcome(csr: V1CertificateSigningRequest, uid: string): { readonly certificate: string } | { readonly error: string } | undefined {
  const name = csr.metadata?.name ?? ''
  if (csr.metadata?.uid !== uid) return { error: `certificate signing request ${name} changed UIDs` }
  let approved = false
  for (const c of csr.status?.conditions ?? []) {
    if (c.type === 'Denied') return { error: `certificate signing request ${name} is denied, reason: ${c.reason ?? ''}, message: ${c.message ?? ''}` }
    if (c.type === 'Failed') return { error: `certificate signing request ${name} failed, reason: ${c.reason ?? ''}, message: ${c.message ?? ''}` }
    if (c.type === 'Approved') approved = true
  }
  const certificate = csr.status?.certificate
  if (approved && certificate) return { certificate: Buffer.from(certificate, 'base64').toString('utf8') }
  return undefined
}

/**
 * Waits until the request named `name` (of UID `uid`) is signed, and resolves with its certificate.
 * Lists it by name, then watches from that list; a watch that ends is listed and watched again.
 * Rejects with a {@link CertificateRequestError} when it is denied, failed or deleted, after
 * `timeoutMs`, or when `signal` aborts.
 */
export async function waitForCertificate(
  kc: KubeConfig,
  request: { readonly name: string; readonly uid: string },
  o: {
    readonly timeoutMs: number
    readonly signal: AbortSignal
    /** Told why the request cannot be read for now (a 403, an unreachable server), and `undefined` once it can. */
    readonly onReadProblem?: (message: string | undefined) => void
  },
): Promise<string> {
  const api = kc.makeApiClient(CertificatesV1Api)
  const watch = new Watch(kc)
  const fieldSelector = `metadata.name=${request.name}`
  const timeout = AbortSignal.timeout(o.timeoutMs)
  const signal = AbortSignal.any([o.signal, timeout])
  const failed = (message: string, cause?: unknown): CertificateRequestError => new CertificateRequestError(message, cause === undefined ? {} : { cause })
  const settle = (outcome: ReturnType<typeof requestOutcome>): string | undefined => {
    if (outcome && 'error' in outcome) throw failed(outcome.error)
    return outcome?.certificate
  }
  while (!signal.aborted) {
    let resourceVersion: string | undefined
    try {
      const list = await api.listCertificateSigningRequest({ fieldSelector })
      o.onReadProblem?.(undefined)
      const csr = list.items[0]
      if (!csr) throw failed(`certificate signing request ${request.name} was deleted`)
      const certificate = settle(requestOutcome(csr, request.uid))
      if (certificate !== undefined) return certificate
      resourceVersion = list.metadata?.resourceVersion
    } catch (err) {
      if (err instanceof CertificateRequestError) throw err
      // The API server is unreachable or refuses for now: look again shortly, as client-go does.
      o.onReadProblem?.(`cannot read certificate signing request ${request.name}: ${apiErrorMessage(err)}`)
      await new Promise((resolve) => setTimeout(resolve, 1_000).unref())
      continue
    }
    const certificate = await new Promise<string | undefined>((resolve, reject) => {
      let request_: AbortController | undefined
      const onAbort = (): void => {
        request_?.abort()
        resolve(undefined)
      }
      signal.addEventListener('abort', onAbort, { once: true })
      const finish = (fn: () => void): void => {
        signal.removeEventListener('abort', onAbort)
        request_?.abort()
        fn()
      }
      watch
        .watch(
          CSR_PATH,
          { fieldSelector, resourceVersion, allowWatchBookmarks: true, timeoutSeconds: 300 },
          (phase, object: V1CertificateSigningRequest) => {
            if (phase === 'DELETED') return finish(() => reject(failed(`certificate signing request ${request.name} was deleted`)))
            if (phase !== 'ADDED' && phase !== 'MODIFIED') return
            try {
              const got = settle(requestOutcome(object, request.uid))
              if (got !== undefined) finish(() => resolve(got))
            } catch (err) {
              finish(() => reject(err))
            }
          },
          // A watch that ended in an error is started again after a second, not at once.
          (err: unknown) => finish(() => (err ? setTimeout(() => resolve(undefined), 1_000).unref() : resolve(undefined))),
        )
        .then(
          (controller) => {
            request_ = controller
            if (signal.aborted) controller.abort()
          },
          () => finish(() => setTimeout(() => resolve(undefined), 1_000).unref()),
        )
    })
    if (certificate !== undefined) return certificate
  }
  if (timeout.aborted && !o.signal.aborted) throw failed(`certificate signing request ${request.name} was not signed within ${Math.round(o.timeoutMs / 60_000)} minutes`)
  throw failed('stopped while waiting for a certificate')
}
