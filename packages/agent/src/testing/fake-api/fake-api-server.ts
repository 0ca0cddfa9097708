/**
 * A Kubernetes API test double: an HTTP server on 127.0.0.1 that reproduces what kubevol's client
 * code meets on the wire (KUBE-API.md): lists with a resourceVersion and items without kind; watches
 * that replay from a resourceVersion, send an ERROR 410 Expired event for a compacted one and
 * bookmarks only when asked; field selectors with the 400 for an unsupported field; PATCH only with a
 * patch content type (415 for application/json); 409 for a stale resourceVersion; Status bodies;
 * graceful pod deletion; finalizers that hold a deleted object; the Node authorizer's 403s for a node identity
 * and NodeRestriction's (a node creates only its own Node); when given RBAC objects, the RBAC
 * authorizer's 403s for other identities; and, when asked, the attach/detach controller.
 *
 * Tests drive it directly too: create, patch and delete objects as an administrator, cut or expire
 * watches, compact the history, make the next requests fail, and read the request log.
 */
import { randomBytes } from 'node:crypto'
import { type Server, createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { KubeConfig } from '@kubernetes/client-node'
import { startAttachDetachController } from './attach-detach-controller.js'
import type { Identity } from './node-authorizer.js'
import { ObjectWrites } from './object-writes.js'
import { createRbacAuthorizer } from './rbac-authorizer.js'
import { type RequestCount, RequestCounter, type RequestFilter } from './request-counter.js'
import { RequestHandler, sendJson } from './request-handler.js'
import { StatusError, statusBody } from './status.js'
import { FakeStore, type KubeObject, resourceOf } from './store.js'
import type { WatchStream } from './watch-stream.js'

export interface FakeApiServerOptions {
  /** The interval of periodic bookmarks. @default 60000 (the API server's) */
  readonly bookmarkIntervalMs?: number
  /** The first resourceVersion. @default 100 */
  readonly startResourceVersion?: number
  /** Changes kept for watches to resume from. @default 10000 */
  readonly maxHistory?: number
  /**
   * Runs a model of the attach/detach controller (see attach-detach-controller.ts): annotated Nodes
   * get VolumeAttachments for their pods' CSI volumes and `status.volumesAttached` once attached.
   * @default false
   */
  readonly attachDetachController?: boolean
  /**
   * RBAC objects (ClusterRole, ClusterRoleBinding, Role, RoleBinding, as parsed from their YAML): when
   * given, identities that are not nodes are held to them, as the RBAC authorizer holds them (a
   * ServiceAccount with {@link FakeApiServer.addToken}: user `system:serviceaccount:<ns>:<name>`);
   * `system:masters` may do anything. @default none: every identity but a node's may do anything
   */
  readonly rbac?: readonly Record<string, unknown>[]
}

/** One request as the server saw it. */
export interface RequestRecord {
  readonly method: string
  readonly path: string
  readonly query: Readonly<Record<string, string>>
  readonly contentType?: string
  user?: string
  watch: boolean
  status: number
}

/** A request to answer with an error instead of serving it. */
export interface FailureRule {
  readonly method?: string
  /** Matches the path (a string: exact; a RegExp: tested). */
  readonly path?: string | RegExp
  readonly status: number
  readonly reason?: string
  readonly message?: string
  /** @default 1 */
  readonly times?: number
}

/** Requests whose connection to reset instead of answering them. */
export interface ConnectionResetRule {
  /** The HTTP method (`GET` is a list, a read or a watch). @default any */
  readonly method?: string
  /** Matches the path (a string: exact; a RegExp: tested). */
  readonly path?: string | RegExp
  /** How many matching requests to reset. @default 1 */
  readonly times?: number
}

export interface DeleteOptions {
  /** Pods bound to a node: > 0 marks them terminating; 0 deletes. @default the pod's terminationGracePeriodSeconds, else 30 */
  readonly gracePeriodSeconds?: number
  readonly preconditions?: { readonly uid?: string; readonly resourceVersion?: string }
}

export interface FakeApiServer {
  /** `http://127.0.0.1:<port>` */
  readonly url: string
  readonly store: FakeStore
  /** A token of the administrator (any request allowed). */
  readonly adminToken: string
  /** Registers (once) and returns a token of `system:node:<node>` (the Node authorizer applies). */
  nodeToken(node: string): string
  /** Registers a token for any identity. */
  addToken(token: string, identity: Identity): void
  /** A kubeconfig for this server with a bearer token. */
  kubeConfig(token: string): KubeConfig
  /** Creates an object as the administrator (`kind` or plural). */
  create(kind: string, object: Record<string, unknown>): KubeObject
  get(kind: string, namespace: string | undefined, name: string): KubeObject | undefined
  list(kind: string, namespace?: string): KubeObject[]
  /** Merge-patches an object (its status with `subresource: 'status'`). */
  patch(kind: string, namespace: string | undefined, name: string, patch: Record<string, unknown>, options?: { readonly subresource?: 'status' }): KubeObject
  /**
   * Deletes as the API does: pods bound to a node are only marked unless the grace period is 0 (or
   * they finished); an object with finalizers is only marked, and goes when an update removes the
   * last one.
   */
  delete(kind: string, namespace: string | undefined, name: string, options?: DeleteOptions): KubeObject
  /** Open watch connections (of one resource). */
  openWatches(resource?: string): number
  /** Cuts every open watch connection (of one resource). */
  dropWatches(resource?: string): void
  /** Sends ERROR 410 Expired to every open watch (of one resource) and ends them. */
  expireWatches(resource?: string): void
  /** Resets every open watch connection (of one resource) mid-stream (TCP RST: the client reads ECONNRESET). */
  resetWatches(resource?: string): void
  /** Ends every open watch cleanly (a server-side watch timeout). */
  closeWatches(resource?: string): void
  /** Sends a bookmark to every watch that asked for them (where the resourceVersion advanced). */
  sendBookmarks(): void
  /** Forgets the change history: resuming a watch from before now gets 410 Expired. */
  compact(): void
  /** Answers the next matching requests with an error Status. */
  failNext(rule: FailureRule): void
  /**
   * Resets the connection of the next matching requests (a list, a watch, a patch) before any byte
   * of an answer, as a proxy or a load balancer in between may: the client sees ECONNRESET ("socket
   * hang up"). The request log records status 0.
   */
  resetNext(rule: ConnectionResetRule): void
  /** The last 10,000 requests. */
  readonly requests: readonly RequestRecord[]
  /**
   * Requests that reached authorization (authenticated, a served path) matching `filter`, since the
   * start or the last {@link resetRequestCounts}: `countRequests({ verb: 'get', resource: 'configmaps', user: 'system:node:n1' })`.
   * A watch counts once, when it starts.
   */
  countRequests(filter?: RequestFilter): number
  /** Every request counter (verb, resource, user). */
  requestCounts(): RequestCount[]
  /** Sets every request counter back to zero (the request log stays). */
  resetRequestCounts(): void
  close(): Promise<void>
}

/** Starts the fake API server on 127.0.0.1 (a free port). */
export async function startFakeApiServer(options: FakeApiServerOptions = {}): Promise<FakeApiServer> {
  const store = new FakeStore({ ...(options.startResourceVersion ? { startRV: options.startResourceVersion } : {}), ...(options.maxHistory ? { maxHistory: options.maxHistory } : {}) })
  const tokens = new Map<string, Identity>()
  const adminToken = `admin-${randomBytes(8).toString('hex')}`
  tokens.set(adminToken, { user: 'kubernetes-admin', groups: ['system:masters', 'system:authenticated'] })
  const writes = new ObjectWrites(store)
  const handler = new RequestHandler({
    store,
    writes,
    tokens,
    watches: new Set<WatchStream>(),
    counter: new RequestCounter(),
    failures: [],
    bookmarkIntervalMs: options.bookmarkIntervalMs ?? 60_000,
    ...(options.rbac ? { rbac: createRbacAuthorizer(options.rbac) } : {}),
  })
  const { watches, counter, failures } = handler.state
  const requests: RequestRecord[] = []
  const stopController = options.attachDetachController ? startAttachDetachController(store) : () => {}
  const server = await listen(handler, requests)
  const { port } = server.address() as AddressInfo
  const url = `http://127.0.0.1:${port}`

  const each = (resource: string | undefined, fn: (w: WatchStream) => void): void => {
    const plural = resource ? resourceOf(resource).plural : undefined
    for (const w of [...watches]) if (!plural || w.request.resource.plural === plural) fn(w)
  }

  return {
    url,
    store,
    adminToken,
    get requests() {
      return requests
    },
    countRequests: (filter) => counter.total(filter),
    requestCounts: () => counter.counts(),
    resetRequestCounts: () => counter.reset(),
    nodeToken(node) {
      const token = `node-${node}`
      tokens.set(token, { user: `system:node:${node}`, groups: ['system:nodes', 'system:authenticated'] })
      return token
    },
    addToken(token, identity) {
      tokens.set(token, identity)
    },
    kubeConfig: (token) => kubeConfigFor(url, token),
    create: (kind, object) => store.create(resourceOf(kind), object as KubeObject),
    get: (kind, namespace, name) => store.get(resourceOf(kind), namespace, name),
    list: (kind, namespace) => store.list(resourceOf(kind), namespace),
    patch(kind, namespace, name, patch, opts) {
      return writes.patch(resourceOf(kind), namespace, name, 'application/merge-patch+json', patch, opts?.subresource)
    },
    delete: (kind, namespace, name, opts) => writes.remove(resourceOf(kind), namespace, name, opts),
    openWatches(resource) {
      let n = 0
      each(resource, () => n++)
      return n
    },
    dropWatches: (resource) => each(resource, (w) => w.drop()),
    expireWatches: (resource) => each(resource, (w) => w.expire()),
    closeWatches: (resource) => each(resource, (w) => w.close()),
    resetWatches: (resource) => each(resource, (w) => w.reset()),
    sendBookmarks: () => each(undefined, (w) => w.sendBookmark()),
    compact: () => store.compact(),
    failNext(rule) {
      failures.push({ rule, left: rule.times ?? 1 })
    },
    resetNext(rule) {
      failures.push({ rule: { ...rule, status: 0 }, left: rule.times ?? 1, reset: true })
    },
    close: () =>
      new Promise<void>((resolve) => {
        stopController()
        for (const w of [...watches]) w.drop()
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}

function kubeConfigFor(server: string, token: string): KubeConfig {
  const kc = new KubeConfig()
  kc.loadFromOptions({
    clusters: [{ name: 'fake', server, skipTLSVerify: true }],
    users: [{ name: 'user', token }],
    contexts: [{ name: 'fake', cluster: 'fake', user: 'user' }],
    currentContext: 'fake',
  })
  return kc
}

/** The HTTP server: each request logged (the last 10,000), answered by the handler, a failure as its Status. */
async function listen(handler: RequestHandler, requests: RequestRecord[]): Promise<Server> {
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost')
    const record: RequestRecord = {
      method: req.method ?? 'GET',
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      ...(req.headers['content-type'] ? { contentType: req.headers['content-type'] } : {}),
      watch: false,
      status: 0,
    }
    requests.push(record)
    if (requests.length > 10_000) requests.splice(0, requests.length - 10_000)
    handler.handle(req, res, record).catch((err: unknown) => {
      const body = err instanceof StatusError ? err.body : statusBody(500, 'InternalError', `Internal error occurred: ${err instanceof Error ? err.message : String(err)}`)
      record.status = body.code
      if (res.headersSent) {
        res.end()
        return
      }
      sendJson(res, body.code, body)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return server
}
