/**
 * The node's client certificate, obtained and renewed as the kubelet's TLS bootstrapping does
 * (`--bootstrap-kubeconfig`, `--rotate-certificates`; client-go's certificate manager):
 *
 * - **Which identity at start.** The cert directory's current pair when it holds an unexpired one;
 *   else the node kubeconfig's (`--kubeconfig`) client certificate when it is unexpired; else none,
 *   and a certificate is requested with the bootstrap kubeconfig's credentials. A node kubeconfig
 *   that gives no valid certificate is written anew, pointing at the cert directory's current pair.
 * - **Requests.** A new ECDSA P-256 key and a CSR for `system:node:<node>` / `system:nodes`, signer
 *   `kubernetes.io/kube-apiserver-client-kubelet`, usages digital signature and client auth; made
 *   with the current certificate while it is valid (a renewal the approver checks as
 *   `selfnodeclient`), else with the bootstrap credentials (`nodeclient`). A request is awaited for
 *   15 minutes; a failed one is retried after 2, 4, 8, 16 s, then every 32 s.
 * - **Renewal.** With rotation on, at a random point between 70% and 90% of the certificate's
 *   lifetime; the API clients use the new pair from their next request on, with no restart (an open
 *   watch keeps its connection until it is renewed). A certificate whose subject is not this node's
 *   is replaced at once.
 *
 * The API clients of the agent ask this for their key and certificate on every request (a client-node
 * `Authenticator`); without a valid pair a request waits until one is issued, and `/readyz`'s
 * `node-credentials` check says why there is none (a denied request, an unreachable server).
 */
import { type Cluster, KubeConfig } from '@kubernetes/client-node'
import { type Clock, type Logger, errorMessage } from '@kubevol/core'
import { type ClientPair, type StoredPair, createCertStore } from './client-pair.js'
import type { CredentialFiles } from './credential-files.js'
import { buildNodeCsr, generateNodeKey, nodeSubject } from './csr.js'
import { createCertificateRequest, waitForCertificate } from './csr-request.js'
import { type NodeKubeconfig, loadBootstrapKubeConfig, nodeKubeconfigYaml, readNodeKubeconfig } from './node-kubeconfig.js'
import { CERTIFICATE_WAIT_MS, rotationDeadline, rotationRetryMs } from './rotation.js'

/** The user name of the node's identity in the clients' kubeconfig; the authenticator serves it. */
const NODE_USER = 'kubevol-node-certificate'
/** Timers longer than this are split: a Node timer fires at once past 2^31 - 1 ms. */
const MAX_SLEEP_MS = 24 * 60 * 60_000
/** client-node's `Authenticator` (not exported by name). */
type Authenticator = Parameters<KubeConfig['addAuthenticator']>[0]

export interface NodeCredentialsOptions {
  readonly nodeName: string
  /** `--bootstrap-kubeconfig`. */
  readonly bootstrapKubeconfig: string
  /** `--kubeconfig`: the node's kubeconfig, used while valid, else written. */
  readonly kubeconfig: string
  /** `--cert-dir`: where the current pair is kept. */
  readonly certDir: string
  /** `--rotate-certificates`: renew before expiry. Without it, a certificate is requested only when there is no valid one (at start, or once it has expired). */
  readonly rotate: boolean
  readonly files: CredentialFiles
  readonly clock: Clock
  readonly logger: Logger
  /** @default Math.random */
  readonly random?: () => number
  /** How long one request is awaited. @default 15 minutes */
  readonly requestTimeoutMs?: number
}

/** What the node's credentials are doing, for `/v1/state`. */
export interface NodeCredentialsStatus {
  readonly subject?: string
  readonly notBefore?: string
  readonly notAfter?: string
  readonly rotationDeadline?: string
  /** The request waited for, if any. */
  readonly pendingRequest?: string
  readonly lastError?: string
  readonly requests: number
}

/** The node's client certificate, and its renewal. */
export class NodeCredentials {
  /** The kubeconfig the agent's API clients use: the cluster, and this node's current pair on every request. */
  readonly kubeConfig: KubeConfig
  readonly #o: NodeCredentialsOptions
  readonly #store
  readonly #initial: NodeKubeconfig
  readonly #cluster: Cluster
  readonly #random: () => number
  #pair: ClientPair | undefined
  #deadline: number | undefined
  #pending: string | undefined
  /** Why the pending request cannot be read, while it cannot. */
  #readProblem: string | undefined
  #lastError: string | undefined
  #requests = 0
  #stop = new AbortController()
  #running: Promise<void> | undefined
  #waiters: { resolve: (pair: ClientPair) => void; reject: (err: Error) => void }[] = []

  /**
   * Reads the node kubeconfig and the bootstrap kubeconfig (not the cert directory: that is under the
   * root, read at `start()`). Throws when the bootstrap kubeconfig is needed and cannot be read.
   */
  constructor(o: NodeCredentialsOptions) {
    this.#o = o
    this.#random = o.random ?? Math.random
    this.#store = createCertStore(o.files, o.certDir)
    this.#initial = readNodeKubeconfig(o.kubeconfig, o.clock.now())
    let cluster: Cluster
    try {
      cluster = this.#initial.state === 'valid' ? this.#initial.cluster : (loadBootstrapKubeConfig(o.bootstrapKubeconfig).getCurrentCluster() as Cluster)
    } catch (err) {
      throw new Error(`cannot read the bootstrap kubeconfig ${o.bootstrapKubeconfig}: ${errorMessage(err)}`, { cause: err })
    }
    this.#cluster = cluster
    this.kubeConfig = this.#kubeConfigOf(cluster)
  }

  /** The cluster's kubeconfig whose user is this node's current pair. */
  #kubeConfigOf(cluster: Cluster): KubeConfig {
    const kc = new KubeConfig()
    kc.loadFromOptions({
      clusters: [{ ...cluster, name: 'default-cluster' }],
      users: [{ name: NODE_USER }],
      contexts: [{ name: 'default-context', cluster: 'default-cluster', user: NODE_USER }],
      currentContext: 'default-context',
    })
    const authenticator: Authenticator = {
      isAuthProvider: (user) => user.name === NODE_USER,
      applyAuthentication: async (_user, opts) => {
        const pair = this.current() ?? (await this.#whenIssued())
        Object.assign(opts, { cert: pair.certPem, key: pair.keyPem })
      },
    }
    kc.addAuthenticator(authenticator)
    return kc
  }

  /** When the pair in use ends (an expired one too), for the TTL gauge; `undefined` before there is one. */
  notAfter(): number | undefined {
    return this.#pair?.notAfter
  }

  /** The current pair while it is valid. */
  current(): ClientPair | undefined {
    const pair = this.#pair
    return pair && this.#o.clock.now() < pair.notAfter ? pair : undefined
  }

  #whenIssued(): Promise<ClientPair> {
    if (this.#stop.signal.aborted) return Promise.reject(new Error('the node credentials are stopped'))
    return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject }))
  }

  /**
   * Picks the identity to start from (the cert directory's pair, else the node kubeconfig's), writes
   * the node kubeconfig when it gave none, and starts requesting or renewing in the background.
   */
  async start(): Promise<void> {
    const { logger } = this.#o
    const stored = await this.#store.current()
    const fromStore = this.#usable(stored)
    if ('invalid' in stored) logger.warn('The stored client certificate cannot be used; requesting a new one', { reason: stored.invalid })
    this.#pair = fromStore ?? (this.#initial.state === 'valid' ? this.#initial.pair : undefined)
    if (this.#initial.state !== 'valid') {
      if (this.#initial.state === 'invalid') logger.info('The node kubeconfig gives no valid client certificate; writing it for the bootstrapped one', { reason: this.#initial.reason })
      await this.#o.files.writeAtomic(this.#o.kubeconfig, nodeKubeconfigYaml(this.#cluster, this.#store.path))
    }
    const pair = this.#pair
    if (pair) logger.info('Using the stored client certificate', { subject: pair.commonName, notAfter: new Date(pair.notAfter).toISOString(), from: fromStore ? this.#store.path : this.#o.kubeconfig })
    else logger.info('No valid client certificate; requesting one with the bootstrap kubeconfig', { bootstrapKubeconfig: this.#o.bootstrapKubeconfig, node: this.#o.nodeName })
    this.#running = this.#run(this.#stop.signal)
  }

  /** A stored pair that has not expired. */
  #usable(stored: StoredPair): ClientPair | undefined {
    if (!('pair' in stored)) return undefined
    if (this.#o.clock.now() >= stored.pair.notAfter) {
      this.#o.logger.info('The stored client certificate has expired; requesting a new one with the bootstrap kubeconfig', { notAfter: new Date(stored.pair.notAfter).toISOString() })
      return undefined
    }
    return stored.pair
  }

  /** Stops requesting and renewing; requests still waiting for a certificate fail. Idempotent. */
  async stop(): Promise<void> {
    this.#stop.abort()
    for (const waiter of this.#waiters.splice(0)) waiter.reject(new Error('the node credentials are stopped'))
    await this.#running
  }

  /** Why the node has no usable certificate, or `undefined` when it has one. */
  check(): string | undefined {
    if (this.current()) return undefined
    // The last failure stays in front while the next request waits: it is why there is no certificate yet.
    const parts = [
      ...(this.#pair ? [`the client certificate expired at ${new Date(this.#pair.notAfter).toISOString()}`] : []),
      ...(this.#lastError !== undefined ? [`no client certificate: ${this.#lastError}`] : []),
      ...(this.#pending !== undefined ? [`waiting for certificate signing request ${this.#pending} to be approved and signed${this.#readProblem ? ` (${this.#readProblem})` : ''}`] : []),
    ]
    return parts.length > 0 ? parts.join('; ') : 'requesting a client certificate with the bootstrap kubeconfig'
  }

  status(): NodeCredentialsStatus {
    const pair = this.#pair
    const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString())
    return {
      ...(pair ? { subject: `CN=${pair.commonName}, O=${pair.organizations.join('+')}`, notBefore: iso(pair.notBefore), notAfter: iso(pair.notAfter) } : {}),
      ...(this.#deadline !== undefined ? { rotationDeadline: iso(this.#deadline) } : {}),
      ...(this.#pending !== undefined ? { pendingRequest: this.#pending } : {}),
      ...(this.#lastError !== undefined ? { lastError: this.#lastError } : {}),
      requests: this.#requests,
    } as NodeCredentialsStatus
  }

  async #run(signal: AbortSignal): Promise<void> {
    const { clock, nodeName } = this.#o
    const subject = nodeSubject(nodeName)
    let attempt = 0
    try {
      while (!signal.aborted) {
        const pair = this.current()
        if (pair) {
          const fits = pair.commonName === subject.commonName && pair.organizations.includes(subject.organization)
          if (!fits) this.#o.logger.info('The client certificate is not for this node; requesting one that is', { subject: pair.commonName, want: subject.commonName })
          else if (!this.#o.rotate) {
            // No renewal: the certificate serves until it expires, then one is requested as at a start without one.
            await clock.sleep(Math.min(pair.notAfter - clock.now(), MAX_SLEEP_MS), signal)
            continue
          } else {
            this.#deadline ??= rotationDeadline(pair, this.#random)
            if (this.#deadline > clock.now()) {
              this.#o.logger.debug('Waiting for the client certificate rotation deadline', { notAfter: new Date(pair.notAfter).toISOString(), deadline: new Date(this.#deadline).toISOString() })
              await clock.sleep(Math.min(this.#deadline - clock.now(), MAX_SLEEP_MS), signal)
              continue
            }
          }
        }
        if (await this.#requestOnce(signal)) {
          attempt = 0
          continue
        }
        if (signal.aborted) return
        const retryMs = rotationRetryMs(attempt++, this.#random)
        this.#o.logger.warn('Requesting a client certificate failed; trying again', { err: this.#lastError, retryInMs: Math.round(retryMs) })
        await clock.sleep(retryMs, signal)
      }
    } catch (err) {
      // Only a stop ends the loop; anything else is reported and the loop is not left silently.
      if (!signal.aborted) {
        this.#lastError = `the certificate manager stopped: ${errorMessage(err)}`
        this.#o.logger.error('The client certificate manager stopped', { err: errorMessage(err) })
      }
    }
  }

  /** One request: key, CSR, create, wait, store. True when a new pair is in use. */
  async #requestOnce(signal: AbortSignal): Promise<boolean> {
    const { logger, nodeName } = this.#o
    this.#requests++
    try {
      const { key, keyPem } = generateNodeKey()
      const csrPem = buildNodeCsr(key, nodeName)
      // Renewals with the node's own identity, while it is valid; else the bootstrap credentials.
      const kc = this.current() ? this.kubeConfig : loadBootstrapKubeConfig(this.#o.bootstrapKubeconfig)
      const request = await createCertificateRequest(kc, csrPem)
      this.#pending = request.name
      logger.info('Requested a client certificate', { csr: request.name, node: nodeName })
      const certPem = await waitForCertificate(kc, request, {
        timeoutMs: this.#o.requestTimeoutMs ?? CERTIFICATE_WAIT_MS,
        signal,
        onReadProblem: (problem) => {
          if (problem !== undefined && problem !== this.#readProblem) logger.warn('Cannot read the certificate signing request; looking again', { csr: request.name, err: problem })
          this.#readProblem = problem
        },
      })
      const pair = await this.#store.update(certPem, keyPem)
      const old = this.#pair
      this.#pair = pair
      this.#deadline = undefined
      this.#pending = undefined
      this.#readProblem = undefined
      this.#lastError = undefined
      logger.info(old ? 'Rotated the client certificate' : 'Got the client certificate', { csr: request.name, subject: pair.commonName, notAfter: new Date(pair.notAfter).toISOString(), path: this.#store.path })
      for (const waiter of this.#waiters.splice(0)) waiter.resolve(pair)
      return true
    } catch (err) {
      if (signal.aborted) return false
      this.#pending = undefined
      this.#readProblem = undefined
      this.#lastError = errorMessage(err)
      return false
    }
  }
}
