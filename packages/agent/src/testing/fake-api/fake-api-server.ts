/**
 * A Kubernetes API test double: an HTTP server on 127.0.0.1 that reproduces what kubevol's client
 * code meets on the wire (KUBE-API.md): lists with a resourceVersion and items without kind; watches
 * that replay from a resourceVersion, send an ERROR 410 Expired event for a compacted one and
 * bookmarks only when asked; field selectors with the 400 for an unsupported field; PATCH only with a
 * patch content type (415 for application/json); 409 for a stale resourceVersion; Status bodies;
 * graceful pod deletion; finalizers that hold a deleted object; the Node authorizer's 403s for a node identity
 * and NodeRestriction's (a node creates only its own Node); and, when asked, the attach/detach controller.
 *
 * Tests drive it directly too: create, patch and delete objects as an administrator, cut or expire
 * watches, compact the history, make the next requests fail, and read the request log.
 */
import { randomBytes } from 'node:crypto'
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { KubeConfig } from '@kubernetes/client-node'
import { startAttachDetachController } from './attach-detach-controller.js'
import { type Identity, type Verb, admitNodeUpdate, authorize } from './node-authorizer.js'
import { matchesFields, matchesLabels, parseFieldSelector, parseLabelSelector } from './selectors.js'
import { StatusError, badRequest, methodNotAllowed, notFound, statusBody, unauthorized, unsupportedMediaType } from './status.js'
import { ObjectWrites } from './object-writes.js'
import { type RequestCount, RequestCounter, type RequestFilter } from './request-counter.js'
import { FakeStore, type KubeObject, RESOURCES, type ResourceInfo, resourceOf, withTypeMeta, withoutTypeMeta } from './store.js'
import { WatchStream } from './watch-stream.js'

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
  /** Ends every open watch cleanly (a server-side watch timeout). */
  closeWatches(resource?: string): void
  /** Sends a bookmark to every watch that asked for them (where the resourceVersion advanced). */
  sendBookmarks(): void
  /** Forgets the change history: resuming a watch from before now gets 410 Expired. */
  compact(): void
  /** Answers the next matching requests with an error Status. */
  failNext(rule: FailureRule): void
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

const PATCH_TYPES = new Set(['application/merge-patch+json', 'application/strategic-merge-patch+json', 'application/json-patch+json'])

interface Route {
  readonly resource: ResourceInfo
  readonly namespace?: string
  readonly name?: string
  readonly subresource?: string
}

/** Parses `/api/v1/...` and `/apis/<group>/<version>/...`. */
function route(path: string): Route | undefined {
  const parts = path.split('/').filter(Boolean)
  let rest: string[]
  let group = ''
  if (parts[0] === 'api' && parts[1] === 'v1') rest = parts.slice(2)
  else if (parts[0] === 'apis' && parts.length >= 3) {
    group = parts[1] as string
    if (parts[2] !== 'v1') return undefined
    rest = parts.slice(3)
  } else return undefined
  let namespace: string | undefined
  if (rest[0] === 'namespaces' && rest.length >= 3) {
    namespace = rest[1]
    rest = rest.slice(2)
  }
  const resource = RESOURCES.find((r) => r.plural === rest[0] && r.group === group)
  if (!resource) return undefined
  if (namespace !== undefined && !resource.namespaced) return undefined
  return { resource, ...(namespace !== undefined ? { namespace } : {}), ...(rest[1] ? { name: rest[1] } : {}), ...(rest[2] ? { subresource: rest[2] } : {}) }
}

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  const text = Buffer.concat(chunks).toString('utf8')
  if (!text) return undefined
  try {
    return JSON.parse(text)
  } catch {
    throw badRequest('the server could not find the requested resource: invalid JSON in the request body')
  }
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'Content-Type': 'application/json' })
  res.end(JSON.stringify(body))
}

/** Starts the fake API server on 127.0.0.1 (a free port). */
export async function startFakeApiServer(options: FakeApiServerOptions = {}): Promise<FakeApiServer> {
  const store = new FakeStore({ ...(options.startResourceVersion ? { startRV: options.startResourceVersion } : {}), ...(options.maxHistory ? { maxHistory: options.maxHistory } : {}) })
  const tokens = new Map<string, Identity>()
  const adminToken = `admin-${randomBytes(8).toString('hex')}`
  tokens.set(adminToken, { user: 'kubernetes-admin', groups: ['system:masters', 'system:authenticated'] })
  const watches = new Set<WatchStream>()
  const requests: RequestRecord[] = []
  const counter = new RequestCounter()
  const failures: { rule: FailureRule; left: number }[] = []
  const bookmarkIntervalMs = options.bookmarkIntervalMs ?? 60_000
  const stopController = options.attachDetachController ? startAttachDetachController(store) : () => {}

  const writes = new ObjectWrites(store)
  const remove = (info: ResourceInfo, namespace: string | undefined, name: string, opts?: DeleteOptions): KubeObject => writes.remove(info, namespace, name, opts)
  const update = (info: ResourceInfo, next: KubeObject): KubeObject => writes.update(info, next)
  const patchObject: ObjectWrites['patch'] = (...args) => writes.patch(...args)

  const handle = async (req: IncomingMessage, res: ServerResponse, record: RequestRecord): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://localhost')
    const query = url.searchParams
    for (const f of failures) {
      const { rule } = f
      if (f.left <= 0) continue
      if (rule.method && rule.method !== req.method) continue
      if (rule.path && (typeof rule.path === 'string' ? rule.path !== url.pathname : !rule.path.test(url.pathname))) continue
      f.left--
      throw new StatusError(statusBody(rule.status, rule.reason ?? 'InternalError', rule.message ?? `injected failure ${rule.status}`))
    }
    const auth = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')
    const identity = auth ? tokens.get(auth[1] as string) : undefined
    if (!identity) throw unauthorized()
    record.user = identity.user
    const r = route(url.pathname)
    if (!r) throw new StatusError(statusBody(404, 'NotFound', 'the server could not find the requested resource'))
    const { resource: info, namespace, name, subresource } = r
    const method = req.method ?? 'GET'
    const isWatch = method === 'GET' && !name && (query.get('watch') === 'true' || query.get('watch') === '1')
    record.watch = isWatch
    const verb: Verb =
      method === 'GET' ? (name ? 'get' : isWatch ? 'watch' : 'list') : method === 'POST' ? 'create' : method === 'PUT' ? 'update' : method === 'PATCH' ? 'patch' : method === 'DELETE' ? 'delete' : 'get'
    if (!['GET', 'POST', 'PUT', 'PATCH', 'DELETE'].includes(method)) throw methodNotAllowed()
    counter.add(verb, subresource ? `${info.plural}/${subresource}` : info.plural, identity.user)
    const fields = parseFieldSelector(query.get('fieldSelector'), info.plural)
    if (!fields.ok) throw badRequest(fields.message)
    const labels = parseLabelSelector(query.get('labelSelector'))
    if (!labels.ok) throw badRequest(labels.message)
    const contentType = (req.headers['content-type'] ?? '').split(';')[0]?.trim() ?? ''
    // The content type is checked before the body is read or the request authorized, as the API server does.
    if (method === 'PATCH' && !PATCH_TYPES.has(contentType)) {
      if (contentType === 'application/apply-patch+yaml') throw badRequest('server-side apply is not supported by the fake API server')
      throw unsupportedMediaType(contentType)
    }
    const body = method === 'POST' || method === 'PUT' || method === 'PATCH' || method === 'DELETE' ? await readBody(req) : undefined
    const denied = authorize(store, identity, {
      verb,
      resource: info,
      ...(subresource ? { subresource } : {}),
      ...(namespace !== undefined ? { namespace } : {}),
      ...(name ? { name } : {}),
      fieldSelector: fields.value,
      ...(body && typeof body === 'object' ? { body: body as KubeObject } : {}),
    })
    if (denied) throw denied

    if (verb === 'watch') {
      const timeout = query.get('timeoutSeconds')
      const stream = new WatchStream(
        store,
        res,
        {
          resource: info,
          ...(namespace !== undefined ? { namespace } : {}),
          fields: fields.value,
          labels: labels.value,
          resourceVersion: query.get('resourceVersion') ?? '',
          bookmarks: query.get('allowWatchBookmarks') === 'true',
          sendInitialEvents: query.get('sendInitialEvents') === 'true',
          ...(timeout && /^\d+$/.test(timeout) ? { timeoutSeconds: Number(timeout) } : {}),
          bookmarkIntervalMs,
        },
        () => watches.delete(stream),
      )
      watches.add(stream)
      record.status = 200
      stream.start()
      return
    }
    if (verb === 'list') {
      const rv = query.get('resourceVersion')
      if (query.get('resourceVersionMatch') === 'Exact' && rv && Number(rv) < store.compactedResourceVersion) {
        throw new StatusError(statusBody(410, 'Expired', `The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. (requested ${rv}, compacted ${store.compactedResourceVersion})`))
      }
      // A list of one name (a node's single-object list) is a lookup, not a scan of the store.
      const only = fields.value.find((f) => f.field === 'metadata.name' && f.op === '=')?.value
      const candidates = only !== undefined && (namespace !== undefined || !info.namespaced) ? [store.get(info, namespace, only)].filter((o) => o !== undefined) : store.list(info, namespace)
      const items = candidates
        .filter((o) => (namespace === undefined || !info.namespaced || o.metadata.namespace === namespace))
        .filter((o) => matchesFields(o, fields.value) && matchesLabels(o, labels.value))
        .map(withoutTypeMeta)
      record.status = 200
      return sendJson(res, 200, { kind: `${info.kind}List`, apiVersion: info.group ? `${info.group}/v1` : 'v1', metadata: { resourceVersion: String(store.resourceVersion) }, items })
    }
    if (verb === 'get') {
      if (subresource && subresource !== 'status') throw new StatusError(statusBody(404, 'NotFound', 'the server could not find the requested resource'))
      const object = store.get(info, namespace, name as string)
      if (!object) throw notFound(info.plural, name as string, info.group)
      record.status = 200
      return sendJson(res, 200, withTypeMeta(info, object))
    }
    if (verb === 'create') {
      if (info.plural === 'serviceaccounts' && subresource === 'token') {
        const sa = name as string
        if (sa !== 'default' && !store.get(info, namespace, sa)) throw notFound('serviceaccounts', sa)
        const spec = ((body as { spec?: Record<string, unknown> } | undefined)?.spec ?? {}) as { expirationSeconds?: number; audiences?: string[] }
        const seconds = spec.expirationSeconds ?? 3600
        record.status = 201
        return sendJson(res, 201, {
          kind: 'TokenRequest',
          apiVersion: 'authentication.k8s.io/v1',
          metadata: { name: sa, namespace, creationTimestamp: null },
          spec: { ...spec, audiences: spec.audiences?.length ? spec.audiences : ['https://kubernetes.default.svc'], expirationSeconds: seconds },
          status: { token: `fake-token.${namespace}.${sa}.${randomBytes(6).toString('hex')}`, expirationTimestamp: new Date(Date.now() + seconds * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z') },
        })
      }
      if (name || subresource) throw methodNotAllowed()
      if (typeof body !== 'object' || body === null) throw badRequest('the request body must be an object')
      const object = body as KubeObject
      if (!object.metadata) throw badRequest('metadata is required')
      if (namespace !== undefined && object.metadata.namespace !== undefined && object.metadata.namespace !== namespace) {
        throw badRequest('the namespace of the provided object does not match the namespace sent on the request')
      }
      const created = store.create(info, object, namespace)
      record.status = 201
      return sendJson(res, 201, withTypeMeta(info, created))
    }
    if (verb === 'update') {
      const current = store.get(info, namespace, name as string)
      if (!current) throw notFound(info.plural, name as string, info.group)
      const object = withoutTypeMeta(body as KubeObject)
      const result = writes.merged(info, current, { ...object, metadata: { ...object.metadata, namespace } }, subresource)
      const refused = admitNodeUpdate(identity, info, current, result)
      if (refused) throw refused
      const updated = update(info, result)
      record.status = 200
      return sendJson(res, 200, withTypeMeta(info, updated))
    }
    if (verb === 'patch') {
      const updated = patchObject(info, namespace, name as string, contentType, body, subresource, identity)
      record.status = 200
      return sendJson(res, 200, withTypeMeta(info, updated))
    }
    // delete
    if (!name) throw methodNotAllowed()
    const opts = (body ?? {}) as DeleteOptions
    const graceParam = query.get('gracePeriodSeconds')
    const removed = remove(info, namespace, name, {
      ...opts,
      ...(graceParam !== null && /^\d+$/.test(graceParam) ? { gracePeriodSeconds: Number(graceParam) } : {}),
    })
    record.status = 200
    return sendJson(res, 200, withTypeMeta(info, removed))
  }

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
    handle(req, res, record).catch((err: unknown) => {
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
    kubeConfig(token) {
      const kc = new KubeConfig()
      kc.loadFromOptions({
        clusters: [{ name: 'fake', server: url, skipTLSVerify: true }],
        users: [{ name: 'user', token }],
        contexts: [{ name: 'fake', cluster: 'fake', user: 'user' }],
        currentContext: 'fake',
      })
      return kc
    },
    create: (kind, object) => store.create(resourceOf(kind), object as KubeObject),
    get: (kind, namespace, name) => store.get(resourceOf(kind), namespace, name),
    list: (kind, namespace) => store.list(resourceOf(kind), namespace),
    patch(kind, namespace, name, patch, opts) {
      return patchObject(resourceOf(kind), namespace, name, 'application/merge-patch+json', patch, opts?.subresource)
    },
    delete: (kind, namespace, name, opts) => remove(resourceOf(kind), namespace, name, opts),
    openWatches(resource) {
      let n = 0
      each(resource, () => n++)
      return n
    },
    dropWatches: (resource) => each(resource, (w) => w.drop()),
    expireWatches: (resource) => each(resource, (w) => w.expire()),
    closeWatches: (resource) => each(resource, (w) => w.close()),
    sendBookmarks: () => each(undefined, (w) => w.sendBookmark()),
    compact: () => store.compact(),
    failNext(rule) {
      failures.push({ rule, left: rule.times ?? 1 })
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
