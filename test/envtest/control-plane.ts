/**
 * The real Kubernetes control plane for tests (controller-runtime's envtest, for kubevol): etcd,
 * kube-apiserver and, when asked, kube-controller-manager, started from the binaries in the directory
 * `KUBEVOL_ENVTEST_ASSETS` names (`../shared/envtest/setup` prints one; any v1.30+ kube-apiserver
 * works). Each process runs in its own process group on free loopback ports and is stopped by its pid
 * (SIGKILL: an apiserver with open watches takes a minute to end on SIGTERM, and a crash is a test too).
 *
 * One certificate authority (made with openssl) signs the apiserver's serving certificate, the client
 * certificates of {@link ControlPlane.kubeConfigFor} and, in the controller manager, approved
 * CertificateSigningRequests; the apiserver trusts it for client certificates. Identities:
 * a static token file (an administrator in system:masters and one token per node of
 * {@link ControlPlaneOptions.nodes}), client certificates for any user and groups, and ServiceAccount
 * tokens by TokenRequest. Authorization is the cluster's: `--authorization-mode=Node,RBAC` with the
 * NodeRestriction admission plugin. An audit log records every request at the Metadata level.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { generateKeyPairSync, randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { KubeConfig } from '@kubernetes/client-node'
import { Agent, request as httpsRequest } from 'node:https'
import { describe, it } from 'vitest'

/** The binaries the control plane needs, in the assets directory. */
const BINARIES = ['etcd', 'kube-apiserver', 'kube-controller-manager'] as const

/**
 * The envtest assets directory, or why the control plane cannot run here: `KUBEVOL_ENVTEST_ASSETS`
 * unset, a binary missing, or no `openssl` to make the certificates.
 */
export function envtestAssets(): { readonly dir: string; readonly skip?: undefined } | { readonly dir?: undefined; readonly skip: string } {
  const dir = process.env.KUBEVOL_ENVTEST_ASSETS
  if (!dir) return { skip: 'KUBEVOL_ENVTEST_ASSETS is not set (the directory ../shared/envtest/setup prints: etcd, kube-apiserver, kube-controller-manager)' }
  const missing = BINARIES.filter((b) => !existsSync(join(dir, b)))
  if (missing.length > 0) return { skip: `KUBEVOL_ENVTEST_ASSETS=${dir} lacks ${missing.join(', ')}` }
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' })
  } catch {
    return { skip: 'openssl is not installed (it makes the control plane certificates)' }
  }
  return { dir }
}

/**
 * `describe` for tests that need the real control plane: skipped with the reason when the assets are
 * missing, and failing instead under `CI=true` (CI sets `KUBEVOL_ENVTEST_ASSETS`; a skip there would
 * hide a broken set-up).
 */
export function describeWithControlPlane(name: string, body: () => void): void {
  const assets = envtestAssets()
  if (assets.dir) {
    describe(name, body)
    return
  }
  if (process.env.CI === 'true') {
    describe(name, () => {
      it(`cannot run: ${assets.skip}`, () => {
        throw new Error(`${name}: ${assets.skip}; CI must run the real control plane tests`)
      })
    })
    return
  }
  console.warn(`[envtest] skipping "${name}": ${assets.skip}`)
  describe.skip(name, body)
}

/** Who a request is sent as. */
export type Identity =
  /** A bearer token (the token file's, a ServiceAccount's). */
  | { readonly token: string }
  /** A client certificate signed by the control plane's CA: any user in any groups. */
  | { readonly user: string; readonly groups?: readonly string[] }

export interface ControlPlaneOptions {
  /**
   * Runs kube-controller-manager: `true` for {@link DEFAULT_CONTROLLERS}, or the `--controllers` list.
   * @default false
   */
  readonly controllerManager?: boolean | readonly string[]
  /** Nodes with a token in the token file ({@link ControlPlane.nodeToken}). @default ['node1', 'node2'] */
  readonly nodes?: readonly string[]
  /** More kube-apiserver flags (`--name=value`), after the harness's own (a later flag wins). */
  readonly apiServerArgs?: readonly string[]
  /** More kube-controller-manager flags. */
  readonly controllerManagerArgs?: readonly string[]
  /**
   * The controller manager's `--cluster-signing-duration` (certificates it signs).
   * @default '24h'
   */
  readonly signingDuration?: string
  /** Prints the processes' output to stderr. @default process.env.KUBEVOL_ENVTEST_VERBOSE === '1' */
  readonly verbose?: boolean
}

/**
 * The controllers a test control plane runs by default: the default ServiceAccount and the
 * `kube-root-ca.crt` ConfigMap of each namespace (so pods are admitted with their
 * kube-api-access volume and it can mount), PV/PVC binding and the attach/detach controller,
 * CertificateSigningRequest approval and signing, and the garbage collector (owner references).
 */
const DEFAULT_CONTROLLERS: readonly string[] = [
  'serviceaccount-controller',
  'root-ca-certificate-publisher-controller',
  'persistentvolume-binder-controller',
  'persistentvolume-attach-detach-controller',
  'certificatesigningrequest-approving-controller',
  'certificatesigningrequest-signing-controller',
  'garbage-collector-controller',
]

/** One JSON line of the apiserver's audit log (the fields tests read). */
export interface AuditEvent {
  readonly stage: string
  /** RFC 3339 with microseconds. */
  readonly requestReceivedTimestamp: string
  readonly verb: string
  readonly requestURI: string
  readonly user: { readonly username: string; readonly groups?: readonly string[] }
  readonly objectRef?: { readonly resource?: string; readonly subresource?: string; readonly namespace?: string; readonly name?: string; readonly apiGroup?: string }
  readonly responseStatus?: { readonly code?: number; readonly message?: string; readonly reason?: string }
  readonly annotations?: Readonly<Record<string, string>>
}

/** A plain HTTP answer of {@link ControlPlane.request}. */
interface ApiResponse<T = Record<string, unknown>> {
  readonly status: number
  readonly body: T
}

export interface ControlPlane {
  /** `https://127.0.0.1:<port>` */
  readonly url: string
  /** The CA (PEM file) that signed the serving certificate and every client certificate. */
  readonly caFile: string
  readonly caPem: string
  /** The CA's private key (PEM file): what a CertificateSigningRequest signer holds. */
  readonly caKeyFile: string
  /** A token of `admin` in `system:masters`. */
  readonly adminToken: string
  /** The token of `system:node:<node>` in `system:nodes` (a node of {@link ControlPlaneOptions.nodes}). */
  nodeToken(node: string): string
  /** A kubeconfig for `identity`, in memory (for an agent started in this process). */
  kubeConfig(identity?: Identity): KubeConfig
  /** A kubeconfig file for `identity` (CA by path), e.g. for `--kubeconfig`. */
  kubeconfigFor(identity?: Identity, name?: string): string
  /** A client certificate (PEM) and its key for `user` in `groups`, signed by the CA. */
  clientCertificate(user: string, groups?: readonly string[]): { readonly certPem: string; readonly keyPem: string }
  /**
   * One HTTP request (JSON), as the administrator unless `as` says otherwise. Never throws for an
   * HTTP status; the body is parsed JSON (or `{ text }`).
   */
  request<T = Record<string, unknown>>(method: string, path: string, body?: unknown, options?: { readonly as?: Identity; readonly contentType?: string }): Promise<ApiResponse<T>>
  /** Like {@link request}, failing with the Status message unless the status is 2xx (or one of `accept`). */
  must<T = Record<string, unknown>>(method: string, path: string, body?: unknown, options?: { readonly as?: Identity; readonly contentType?: string; readonly accept?: readonly number[] }): Promise<T>
  /**
   * Creates a namespace where pods can run: with the `openshift-service-ca.crt` ConfigMap the kit's
   * apiserver puts in kube-api-access volumes, and without the controller manager, the `default`
   * ServiceAccount. `default` and `kube-system` are ready at start. Idempotent.
   */
  createNamespace(name: string): Promise<void>
  /**
   * A ServiceAccount token by TokenRequest (created as the administrator): `expirationSeconds`
   * (default 3600), and `boundTo` a pod as the kubelet asks for a pod's token (the API server then adds
   * the pod's node to the token's user: `authentication.kubernetes.io/node-name`).
   */
  serviceAccountToken(namespace: string, name: string, options?: number | { readonly expirationSeconds?: number; readonly boundTo?: { readonly name: string; readonly uid: string } }): Promise<string>
  /** The audit log file (JSON lines, Metadata level). */
  readonly auditLogPath: string
  /**
   * The audit log's events so far: one at ResponseComplete for each request, and for a watch (long-running)
   * one more at ResponseStarted, when it begins.
   */
  auditEvents(): AuditEvent[]
  /** The working directory (certificates, kubeconfigs, etcd's data unless on /dev/shm, logs). */
  readonly dir: string
  /** The kube-apiserver's pid (changes on a restart). */
  readonly apiServerPid: number
  /** SIGKILLs the apiserver (a crash: watches break); {@link startApiServer} brings it back. */
  killApiServer(): Promise<void>
  /** Starts the apiserver again on the same port and data, after {@link killApiServer}; resolves once ready. */
  startApiServer(): Promise<void>
  /** {@link killApiServer} then {@link startApiServer}. */
  restartApiServer(): Promise<void>
  /** Resolves once `/readyz` answers `ok`. */
  waitReady(timeoutMs?: number): Promise<void>
  /** The pids of the processes that run (etcd, kube-apiserver, kube-controller-manager). */
  pids(): Readonly<Record<string, number>>
  /** CPU seconds (user + system) and resident memory of the apiserver, from /proc. */
  apiServerUsage(): { readonly cpuSeconds: number; readonly rssBytes: number }
  /** Stops every process (SIGKILL by pid, each group) and removes the working directory. */
  stop(): Promise<void>
}

/** A free TCP port on 127.0.0.1 (bound and released; used at once). */
async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.unref()
    server.on('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      const port = typeof address === 'object' && address ? address.port : 0
      server.close(() => resolve(port))
    })
  })
}

/** A started process in its own process group, its output kept (the last 64 KiB) for error messages. */
interface Proc {
  readonly name: string
  readonly child: ChildProcess
  readonly exited: Promise<number | string>
  output(): string
}

const running = new Set<Proc>()
// A test worker that ends without stop() (a crash, a timeout) takes its processes with it.
process.once('exit', () => {
  for (const p of running) killGroup(p)
})

function killGroup(p: Proc): void {
  const pid = p.child.pid
  if (pid === undefined || p.child.exitCode !== null || p.child.signalCode !== null) return
  try {
    process.kill(-pid, 'SIGKILL')
  } catch {
    // Already gone.
  }
}

function start(name: string, binary: string, args: readonly string[], verbose: boolean): Proc {
  const child = spawn(binary, args, { detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  const keep = (chunk: Buffer) => {
    out = (out + chunk.toString('utf8')).slice(-65_536)
    if (verbose) process.stderr.write(`[${name}] ${chunk.toString('utf8')}`)
  }
  child.stdout?.on('data', keep)
  child.stderr?.on('data', keep)
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')))
  const proc: Proc = { name, child, exited, output: () => out }
  running.add(proc)
  void exited.then(() => running.delete(proc))
  return proc
}

async function stopProc(p: Proc | undefined): Promise<void> {
  if (!p) return
  killGroup(p)
  await p.exited
}

function openssl(args: readonly string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] })
}

/** A self-signed CA and a serving certificate for 127.0.0.1 and localhost, in `dir`. */
function makeCertificates(dir: string): void {
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']
  openssl(['req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '3', '-subj', '/CN=kubevol-envtest-ca', '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign,digitalSignature'], dir)
  openssl(
    ['req', '-x509', ...ec, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-keyout', 'serving.key', '-out', 'serving.crt', '-days', '3', '-subj', '/CN=kube-apiserver', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc', '-addext', 'extendedKeyUsage=serverAuth', '-addext', 'basicConstraints=critical,CA:FALSE'],
    dir,
  )
  const sa = generateKeyPairSync('rsa', { modulusLength: 2048 })
  writeFileSync(join(dir, 'sa.key'), sa.privateKey.export({ type: 'pkcs8', format: 'pem' }))
  writeFileSync(join(dir, 'sa.pub'), sa.publicKey.export({ type: 'spki', format: 'pem' }))
}

/** Everything (Metadata level: who, what, the answer), at the end of each request. */
const AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
`

/** A directory for etcd's data: tmpfs when there is one (fsync is most of etcd's write latency). */
function etcdDataDir(dir: string): string {
  if (existsSync('/dev/shm')) {
    try {
      return mkdtempSync('/dev/shm/kubevol-envtest-etcd-')
    } catch {
      // Not writable: beside the rest.
    }
  }
  return join(dir, 'etcd')
}

/**
 * Starts etcd, kube-apiserver (and kube-controller-manager when asked) and resolves once the apiserver
 * is ready (3–5 s) and, with the controller manager, once the `default` ServiceAccount exists. Without
 * the controller manager the harness creates the `default` ServiceAccount of `default` itself, so pods
 * are admitted. Fails with the processes' last output when one does not come up.
 */
export async function startControlPlane(options: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const assets = envtestAssets()
  if (!assets.dir) throw new Error(`the control plane cannot start: ${assets.skip}`)
  const bin = assets.dir
  const verbose = options.verbose ?? process.env.KUBEVOL_ENVTEST_VERBOSE === '1'
  const dir = mkdtempSync(join(tmpdir(), 'kubevol-envtest-'))
  const dataDir = etcdDataDir(dir)
  makeCertificates(dir)
  const caFile = join(dir, 'ca.crt')
  const caKeyFile = join(dir, 'ca.key')
  const caPem = readFileSync(caFile, 'utf8')

  const adminToken = randomBytes(16).toString('hex')
  const nodeTokens = new Map((options.nodes ?? ['node1', 'node2']).map((n) => [n, randomBytes(16).toString('hex')]))
  writeFileSync(
    join(dir, 'tokens.csv'),
    [`${adminToken},admin,admin-uid,system:masters`, ...[...nodeTokens].map(([n, t]) => `${t},system:node:${n},node-${n}-uid,system:nodes`)].join('\n') + '\n',
    { mode: 0o600 },
  )
  writeFileSync(join(dir, 'audit-policy.yaml'), AUDIT_POLICY)
  const auditLogPath = join(dir, 'audit.log')

  const [etcdClient, etcdPeer, apiPort] = [await freePort(), await freePort(), await freePort()]
  const url = `https://127.0.0.1:${apiPort}`
  const procs: Record<'etcd' | 'apiserver' | 'controllerManager', Proc | undefined> = { etcd: undefined, apiserver: undefined, controllerManager: undefined }

  const stopAll = async (): Promise<void> => {
    // The controller manager first (it would log the apiserver's absence), etcd last.
    await stopProc(procs.controllerManager)
    await stopProc(procs.apiserver)
    await stopProc(procs.etcd)
  }
  const removeDirs = (): void => {
    rmSync(dir, { recursive: true, force: true })
    if (dataDir.startsWith('/dev/shm/')) rmSync(dataDir, { recursive: true, force: true })
  }

  const tls = new Agent({ ca: caPem, keepAlive: true, maxSockets: 16 })
  const clientCerts = new Map<string, { certPem: string; keyPem: string }>()
  const clientCertificate = (user: string, groups: readonly string[] = []): { certPem: string; keyPem: string } => {
    const key = JSON.stringify([user, groups])
    const cached = clientCerts.get(key)
    if (cached) return cached
    const certsDir = join(dir, 'clients')
    mkdirSync(certsDir, { recursive: true })
    const base = `c${clientCerts.size}`
    // A subject from its parts (escaped as openssl's -subj wants), O per group then CN, as kubeadm's client certificates.
    const esc = (s: string) => s.replace(/[\\/,+=]/g, (c) => `\\${c}`)
    const subj = [...groups.map((g) => `/O=${esc(g)}`), `/CN=${esc(user)}`].join('')
    openssl(
      ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-CA', caFile, '-CAkey', caKeyFile, '-keyout', `${base}.key`, '-out', `${base}.crt`, '-days', '2', '-subj', subj, '-addext', 'extendedKeyUsage=clientAuth', '-addext', 'basicConstraints=critical,CA:FALSE'],
      certsDir,
    )
    const made = { certPem: readFileSync(join(certsDir, `${base}.crt`), 'utf8'), keyPem: readFileSync(join(certsDir, `${base}.key`), 'utf8') }
    clientCerts.set(key, made)
    return made
  }

  const request = async <T = Record<string, unknown>>(method: string, path: string, body?: unknown, opts: { as?: Identity; contentType?: string } = {}): Promise<ApiResponse<T>> => {
    const as = opts.as ?? { token: adminToken }
    const headers: Record<string, string> = { accept: 'application/json' }
    const cert = 'user' in as ? clientCertificate(as.user, as.groups) : undefined
    if ('token' in as) headers.authorization = `Bearer ${as.token}`
    const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body)
    if (payload !== undefined) {
      headers['content-type'] = opts.contentType ?? 'application/json'
      // Node sends a DELETE's body unframed (no chunking by default): the length keeps the connection usable.
      headers['content-length'] = String(Buffer.byteLength(payload))
    }
    return new Promise((resolve, reject) => {
      const req = httpsRequest(`${url}${path}`, { method, headers, ...(cert ? { cert: cert.certPem, key: cert.keyPem, ca: caPem } : { agent: tls }) }, (res) => {
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8')
          let parsed: unknown
          try {
            parsed = JSON.parse(text)
          } catch {
            parsed = { text }
          }
          resolve({ status: res.statusCode ?? 0, body: parsed as T })
        })
        res.on('error', reject)
      })
      req.on('error', reject)
      req.end(payload)
    })
  }

  const must = async <T = Record<string, unknown>>(method: string, path: string, body?: unknown, opts: { as?: Identity; contentType?: string; accept?: readonly number[] } = {}): Promise<T> => {
    const res = await request<T>(method, path, body, opts)
    if ((res.status >= 200 && res.status < 300) || opts.accept?.includes(res.status)) return res.body
    const message = (res.body as { message?: string }).message ?? JSON.stringify(res.body).slice(0, 300)
    throw new Error(`${method} ${path}: HTTP ${res.status}: ${message}`)
  }

  // The kit's kube-apiserver is built from the Kubernetes tree OpenShift MicroShift vendors: its
  // ServiceAccount admission plugin adds an `openshift-service-ca.crt` ConfigMap (key service-ca.crt, not
  // optional) to every kube-api-access volume, which OpenShift's service CA operator publishes in each
  // namespace. The harness publishes it (the cluster's CA) where pods run, so such a pod can mount.
  const publishServiceCa = async (namespace: string): Promise<void> => {
    await must('POST', `/api/v1/namespaces/${namespace}/configmaps`, { metadata: { name: 'openshift-service-ca.crt' }, data: { 'service-ca.crt': caPem } }, { accept: [409] })
  }
  const createNamespace = async (name: string): Promise<void> => {
    await must('POST', '/api/v1/namespaces', { metadata: { name } }, { accept: [409] })
    await publishServiceCa(name)
    if (!procs.controllerManager) await must('POST', `/api/v1/namespaces/${name}/serviceaccounts`, { metadata: { name: 'default' } }, { accept: [409] })
  }

  const apiServerArgs = [
    `--etcd-servers=http://127.0.0.1:${etcdClient}`,
    '--bind-address=127.0.0.1',
    `--secure-port=${apiPort}`,
    '--advertise-address=127.0.0.1',
    `--cert-dir=${join(dir, 'apiserver-certs')}`,
    `--tls-cert-file=${join(dir, 'serving.crt')}`,
    `--tls-private-key-file=${join(dir, 'serving.key')}`,
    `--client-ca-file=${caFile}`,
    `--token-auth-file=${join(dir, 'tokens.csv')}`,
    '--authorization-mode=Node,RBAC',
    '--enable-admission-plugins=NodeRestriction',
    '--service-account-issuer=https://kubernetes.default.svc',
    `--service-account-key-file=${join(dir, 'sa.pub')}`,
    `--service-account-signing-key-file=${join(dir, 'sa.key')}`,
    '--api-audiences=https://kubernetes.default.svc',
    '--service-cluster-ip-range=10.0.0.0/24',
    '--endpoint-reconciler-type=none',
    '--allow-privileged=true',
    // etcd 3.4 fails watches that ask for bookmarks with no resourceVersion unless WatchList is off.
    '--feature-gates=WatchList=false',
    `--audit-policy-file=${join(dir, 'audit-policy.yaml')}`,
    `--audit-log-path=${auditLogPath}`,
    '--audit-log-maxbackup=0',
    '--audit-log-format=json',
    ...(options.apiServerArgs ?? []),
  ]

  const waitReady = async (timeoutMs = 120_000): Promise<void> => {
    const deadline = Date.now() + timeoutMs
    let last = ''
    for (;;) {
      const p = procs.apiserver
      if (p && (p.child.exitCode !== null || p.child.signalCode !== null)) {
        throw new Error(`kube-apiserver exited (${p.child.exitCode ?? p.child.signalCode}):\n${p.output().slice(-4_000)}`)
      }
      try {
        const res = await request<{ text?: string }>('GET', '/readyz')
        if (res.status === 200) return
        last = `HTTP ${res.status}`
      } catch (err) {
        last = err instanceof Error ? err.message : String(err)
      }
      if (Date.now() > deadline) throw new Error(`kube-apiserver not ready after ${timeoutMs} ms (${last}):\n${p?.output().slice(-4_000) ?? ''}`)
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  }

  const startApiServer = async (): Promise<void> => {
    if (procs.apiserver && procs.apiserver.child.exitCode === null && procs.apiserver.child.signalCode === null) throw new Error('kube-apiserver is already running')
    procs.apiserver = start('kube-apiserver', join(bin, 'kube-apiserver'), apiServerArgs, verbose)
    await waitReady()
  }

  const kubeconfigYaml = (identity: Identity, caPath: string): string => {
    const user =
      'token' in identity
        ? `      token: ${identity.token}`
        : (() => {
            const c = clientCertificate(identity.user, identity.groups)
            return `      client-certificate-data: ${Buffer.from(c.certPem).toString('base64')}\n      client-key-data: ${Buffer.from(c.keyPem).toString('base64')}`
          })()
    return `apiVersion: v1
kind: Config
clusters:
  - name: envtest
    cluster:
      server: ${url}
      certificate-authority: ${caPath}
users:
  - name: user
    user:
${user}
contexts:
  - name: envtest
    context: { cluster: envtest, user: user }
current-context: envtest
`
  }
  let kubeconfigs = 0
  const kubeconfigFor = (identity: Identity = { token: adminToken }, name?: string): string => {
    const file = join(dir, 'kubeconfigs', `${name ?? `kubeconfig-${kubeconfigs++}`}.yaml`)
    mkdirSync(join(dir, 'kubeconfigs'), { recursive: true })
    writeFileSync(file, kubeconfigYaml(identity, caFile), { mode: 0o600 })
    return file
  }

  try {
    procs.etcd = start(
      'etcd',
      join(bin, 'etcd'),
      [
        `--data-dir=${dataDir}`,
        `--listen-client-urls=http://127.0.0.1:${etcdClient}`,
        `--advertise-client-urls=http://127.0.0.1:${etcdClient}`,
        `--listen-peer-urls=http://127.0.0.1:${etcdPeer}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeer}`,
        `--initial-cluster=default=http://127.0.0.1:${etcdPeer}`,
        '--log-level=warn',
        '--logger=zap',
      ],
      verbose,
    )
    await startApiServer()

    const controllers = options.controllerManager === true ? DEFAULT_CONTROLLERS : options.controllerManager || undefined
    if (controllers) {
      procs.controllerManager = start(
        'kube-controller-manager',
        join(bin, 'kube-controller-manager'),
        [
          `--kubeconfig=${kubeconfigFor({ token: adminToken }, 'controller-manager')}`,
          '--leader-elect=false',
          '--bind-address=127.0.0.1',
          `--secure-port=${await freePort()}`,
          `--cert-dir=${join(dir, 'controller-manager-certs')}`,
          `--controllers=${controllers.join(',')}`,
          `--root-ca-file=${caFile}`,
          `--cluster-signing-cert-file=${caFile}`,
          `--cluster-signing-key-file=${caKeyFile}`,
          `--cluster-signing-duration=${options.signingDuration ?? '24h'}`,
          `--service-account-private-key-file=${join(dir, 'sa.key')}`,
          // The PV binder's resync (default 15 s) finishes a pre-bound claim's binding: a test waits for it.
          '--pvclaimbinder-sync-period=1s',
          ...(options.controllerManagerArgs ?? []),
        ],
        verbose,
      )
    }
    // Pods in `default` are admitted once its ServiceAccount exists (the ServiceAccount admission plugin).
    if (controllers?.includes('serviceaccount-controller')) {
      const deadline = Date.now() + 90_000
      while ((await request('GET', '/api/v1/namespaces/default/serviceaccounts/default')).status !== 200) {
        const cm = procs.controllerManager
        if (cm && (cm.child.exitCode !== null || cm.child.signalCode !== null)) throw new Error(`kube-controller-manager exited:\n${cm.output().slice(-4_000)}`)
        if (Date.now() > deadline) throw new Error(`no default ServiceAccount after 90 s:\n${cm?.output().slice(-4_000) ?? ''}`)
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
    } else {
      await must('POST', '/api/v1/namespaces/default/serviceaccounts', { metadata: { name: 'default' } }, { accept: [409] })
    }
    for (const ns of ['default', 'kube-system']) await publishServiceCa(ns)
  } catch (err) {
    await stopAll()
    removeDirs()
    throw err
  }

  return {
    url,
    caFile,
    caPem,
    caKeyFile,
    adminToken,
    dir,
    auditLogPath,
    get apiServerPid() {
      return procs.apiserver?.child.pid ?? 0
    },
    nodeToken(node) {
      const token = nodeTokens.get(node)
      if (!token) throw new Error(`node "${node}" has no token: list it in startControlPlane({ nodes })`)
      return token
    },
    kubeConfig(identity = { token: adminToken }) {
      const kc = new KubeConfig()
      const user = 'token' in identity ? { name: 'user', token: identity.token } : (() => {
        const c = clientCertificate(identity.user, identity.groups)
        return { name: 'user', certData: Buffer.from(c.certPem).toString('base64'), keyData: Buffer.from(c.keyPem).toString('base64') }
      })()
      kc.loadFromOptions({
        clusters: [{ name: 'envtest', server: url, caData: Buffer.from(caPem).toString('base64'), skipTLSVerify: false }],
        users: [user],
        contexts: [{ name: 'envtest', cluster: 'envtest', user: 'user' }],
        currentContext: 'envtest',
      })
      return kc
    },
    kubeconfigFor,
    clientCertificate,
    createNamespace,
    request,
    must,
    async serviceAccountToken(namespace, name, options = {}) {
      const { expirationSeconds = 3600, boundTo } = typeof options === 'number' ? { expirationSeconds: options, boundTo: undefined } : options
      const tr = await must<{ status: { token: string } }>('POST', `/api/v1/namespaces/${namespace}/serviceaccounts/${name}/token`, {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: { expirationSeconds, ...(boundTo ? { boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: boundTo.name, uid: boundTo.uid } } : {}) },
      })
      return tr.status.token
    },
    auditEvents() {
      if (!existsSync(auditLogPath)) return []
      return readFileSync(auditLogPath, 'utf8')
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l) => JSON.parse(l) as AuditEvent)
    },
    async killApiServer() {
      await stopProc(procs.apiserver)
      procs.apiserver = undefined
    },
    startApiServer,
    async restartApiServer() {
      await stopProc(procs.apiserver)
      procs.apiserver = undefined
      await startApiServer()
    },
    waitReady,
    pids() {
      const out: Record<string, number> = {}
      for (const [k, p] of Object.entries(procs)) if (p?.child.pid && p.child.exitCode === null && p.child.signalCode === null) out[k] = p.child.pid
      return out
    },
    apiServerUsage() {
      const pid = procs.apiserver?.child.pid
      if (!pid) return { cpuSeconds: 0, rssBytes: 0 }
      // /proc/<pid>/stat: fields 14 and 15 are utime and stime in clock ticks (100 a second on Linux).
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      const ticks = Number(fields[11]) + Number(fields[12])
      const rssKiB = Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0)
      return { cpuSeconds: ticks / 100, rssBytes: rssKiB * 1024 }
    },
    async stop() {
      tls.destroy()
      await stopAll()
      removeDirs()
    },
  }
}
