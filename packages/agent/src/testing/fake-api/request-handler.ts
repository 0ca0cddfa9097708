/**
 * How the fake API server answers one request, in the API server's order: injected failures,
 * authentication, the route, the verb, the selectors, the patch content type (before the body is
 * read), the body, authorization (the Node authorizer for nodes; RBAC for the others when the server
 * has RBAC objects), then the verb's own handler.
 */
import { randomBytes } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { DeleteOptions, FailureRule, RequestRecord } from './fake-api-server.js'
import { type AuthzRequest, type Identity, type Verb, admitNodeUpdate, authorize, nodeOf } from './node-authorizer.js'
import type { RbacAuthorizer } from './rbac-authorizer.js'
import type { ObjectWrites } from './object-writes.js'
import type { RequestCounter } from './request-counter.js'
import { type FieldRequirement, type LabelRequirement, matchesFields, matchesLabels, parseFieldSelector, parseLabelSelector } from './selectors.js'
import { StatusError, badRequest, methodNotAllowed, notFound, statusBody, unauthorized, unsupportedMediaType } from './status.js'
import { type FakeStore, type KubeObject, RESOURCES, type ResourceInfo, withTypeMeta, withoutTypeMeta } from './store.js'
import { WatchStream } from './watch-stream.js'

const PATCH_TYPES = new Set(['application/merge-patch+json', 'application/strategic-merge-patch+json', 'application/json-patch+json'])

const METHODS = new Set(['GET', 'POST', 'PUT', 'PATCH', 'DELETE'])

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

function verbOf(method: string, name: string | undefined, isWatch: boolean): Verb {
  if (method === 'GET') return name ? 'get' : isWatch ? 'watch' : 'list'
  if (method === 'POST') return 'create'
  if (method === 'PUT') return 'update'
  if (method === 'PATCH') return 'patch'
  if (method === 'DELETE') return 'delete'
  return 'get'
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

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'Content-Type': 'application/json' })
  res.end(JSON.stringify(body))
}

/** A request once authenticated, routed, parsed and authorized. */
interface Admitted extends Route {
  readonly identity: Identity
  readonly verb: Verb
  readonly query: URLSearchParams
  readonly fields: readonly FieldRequirement[]
  readonly labels: readonly LabelRequirement[]
  readonly contentType: string
  readonly body: unknown
}

/** What the handler shares with the server that owns it. */
export interface HandlerState {
  readonly store: FakeStore
  readonly writes: ObjectWrites
  readonly tokens: ReadonlyMap<string, Identity>
  readonly watches: Set<WatchStream>
  readonly counter: RequestCounter
  /** Injected failures; `reset`: cut the connection instead of answering. */
  readonly failures: { readonly rule: FailureRule; left: number; readonly reset?: boolean }[]
  readonly bookmarkIntervalMs: number
  /** Decides for identities that are not nodes; without it they may do anything. */
  readonly rbac?: RbacAuthorizer
}

export class RequestHandler {
  constructor(readonly state: HandlerState) {}

  /** Answers the request, or throws a StatusError for the server to send. */
  async handle(req: IncomingMessage, res: ServerResponse, record: RequestRecord): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost')
    if (this.#injectedFailure(req.method, url.pathname) === 'reset') {
      // A TCP reset before any byte of an answer: the client sees ECONNRESET ("socket hang up").
      record.status = 0
      req.socket.resetAndDestroy()
      return
    }
    const r = await this.#admit(req, url, record)
    const answer = (status: number, body: unknown): void => {
      record.status = status
      sendJson(res, status, body)
    }
    switch (r.verb) {
      case 'watch':
        this.#watch(r, res)
        record.status = 200
        return
      case 'list':
        return answer(200, this.#list(r))
      case 'get':
        return answer(200, this.#get(r))
      case 'create':
        return r.resource.plural === 'serviceaccounts' && r.subresource === 'token' ? answer(201, this.#tokenRequest(r)) : answer(201, this.#create(r))
      case 'update':
        return answer(200, this.#update(r))
      case 'patch':
        return answer(200, withTypeMeta(r.resource, this.state.writes.patch(r.resource, r.namespace, r.name as string, r.contentType, r.body, r.subresource, r.identity)))
      default:
        return answer(200, this.#delete(r))
    }
  }

  #injectedFailure(method: string | undefined, pathname: string): 'reset' | undefined {
    for (const f of this.state.failures) {
      const { rule } = f
      if (f.left <= 0) continue
      if (rule.method && rule.method !== method) continue
      if (rule.path && (typeof rule.path === 'string' ? rule.path !== pathname : !rule.path.test(pathname))) continue
      f.left--
      if (f.reset) return 'reset'
      throw new StatusError(statusBody(rule.status, rule.reason ?? 'InternalError', rule.message ?? `injected failure ${rule.status}`))
    }
  }

  async #admit(req: IncomingMessage, url: URL, record: RequestRecord): Promise<Admitted> {
    const query = url.searchParams
    const auth = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')
    const identity = auth ? this.state.tokens.get(auth[1] as string) : undefined
    if (!identity) throw unauthorized()
    record.user = identity.user
    const r = route(url.pathname)
    if (!r) throw new StatusError(statusBody(404, 'NotFound', 'the server could not find the requested resource'))
    const method = req.method ?? 'GET'
    const isWatch = method === 'GET' && !r.name && (query.get('watch') === 'true' || query.get('watch') === '1')
    record.watch = isWatch
    const verb = verbOf(method, r.name, isWatch)
    if (!METHODS.has(method)) throw methodNotAllowed()
    this.state.counter.add(verb, r.subresource ? `${r.resource.plural}/${r.subresource}` : r.resource.plural, identity.user)
    const fields = parseFieldSelector(query.get('fieldSelector'), r.resource.plural)
    if (!fields.ok) throw badRequest(fields.message)
    const labels = parseLabelSelector(query.get('labelSelector'))
    if (!labels.ok) throw badRequest(labels.message)
    const contentType = (req.headers['content-type'] ?? '').split(';')[0]?.trim() ?? ''
    // The content type is checked before the body is read or the request authorized, as the API server does.
    if (method === 'PATCH' && !PATCH_TYPES.has(contentType)) {
      if (contentType === 'application/apply-patch+yaml') throw badRequest('server-side apply is not supported by the fake API server')
      throw unsupportedMediaType()
    }
    const body = method === 'GET' ? undefined : await readBody(req)
    const authz: AuthzRequest = {
      verb,
      resource: r.resource,
      ...(r.subresource ? { subresource: r.subresource } : {}),
      ...(r.namespace !== undefined ? { namespace: r.namespace } : {}),
      ...(r.name ? { name: r.name } : {}),
      fieldSelector: fields.value,
      ...(body && typeof body === 'object' ? { body: body as KubeObject } : {}),
    }
    const denied = nodeOf(identity) === undefined && this.state.rbac ? this.state.rbac(identity, authz) : authorize(this.state.store, identity, authz)
    if (denied) throw denied
    return { ...r, identity, verb, query, fields: fields.value, labels: labels.value, contentType, body }
  }

  #watch(r: Admitted, res: ServerResponse): void {
    const { query } = r
    const timeout = query.get('timeoutSeconds')
    const stream = new WatchStream(
      this.state.store,
      res,
      {
        resource: r.resource,
        ...(r.namespace !== undefined ? { namespace: r.namespace } : {}),
        fields: r.fields,
        labels: r.labels,
        resourceVersion: query.get('resourceVersion') ?? '',
        bookmarks: query.get('allowWatchBookmarks') === 'true',
        sendInitialEvents: query.get('sendInitialEvents') === 'true',
        ...(timeout && /^\d+$/.test(timeout) ? { timeoutSeconds: Number(timeout) } : {}),
        bookmarkIntervalMs: this.state.bookmarkIntervalMs,
      },
      () => this.state.watches.delete(stream),
    )
    this.state.watches.add(stream)
    stream.start()
  }

  #list(r: Admitted): unknown {
    const { store } = this.state
    const { resource: info, namespace } = r
    const rv = r.query.get('resourceVersion')
    if (r.query.get('resourceVersionMatch') === 'Exact' && rv && Number(rv) < store.compactedResourceVersion) {
      throw new StatusError(statusBody(410, 'Expired', `The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. (requested ${rv}, compacted ${store.compactedResourceVersion})`))
    }
    // A list of one name (a node's single-object list) is a lookup, not a scan of the store.
    const only = r.fields.find((f) => f.field === 'metadata.name' && f.op === '=')?.value
    const candidates = only !== undefined && (namespace !== undefined || !info.namespaced) ? [store.get(info, namespace, only)].filter((o) => o !== undefined) : store.list(info, namespace)
    const items = candidates
      .filter((o) => namespace === undefined || !info.namespaced || o.metadata.namespace === namespace)
      .filter((o) => matchesFields(o, r.fields) && matchesLabels(o, r.labels))
      .map(withoutTypeMeta)
    return { kind: `${info.kind}List`, apiVersion: info.group ? `${info.group}/v1` : 'v1', metadata: { resourceVersion: String(store.resourceVersion) }, items }
  }

  #get(r: Admitted): unknown {
    if (r.subresource && r.subresource !== 'status') throw new StatusError(statusBody(404, 'NotFound', 'the server could not find the requested resource'))
    const object = this.state.store.get(r.resource, r.namespace, r.name as string)
    if (!object) throw notFound(r.resource.plural, r.name as string, r.resource.group)
    return withTypeMeta(r.resource, object)
  }

  /** A TokenRequest for a pod's service account (`serviceaccounts/<name>/token`). */
  #tokenRequest(r: Admitted): unknown {
    const sa = r.name as string
    const { namespace } = r
    if (sa !== 'default' && !this.state.store.get(r.resource, namespace, sa)) throw notFound('serviceaccounts', sa)
    const spec = ((r.body as { spec?: Record<string, unknown> } | undefined)?.spec ?? {}) as { expirationSeconds?: number; audiences?: string[] }
    const seconds = spec.expirationSeconds ?? 3600
    return {
      kind: 'TokenRequest',
      apiVersion: 'authentication.k8s.io/v1',
      metadata: { name: sa, namespace, creationTimestamp: null },
      spec: { ...spec, audiences: spec.audiences?.length ? spec.audiences : ['https://kubernetes.default.svc'], expirationSeconds: seconds },
      status: { token: `fake-token.${namespace}.${sa}.${randomBytes(6).toString('hex')}`, expirationTimestamp: new Date(Date.now() + seconds * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z') },
    }
  }

  #create(r: Admitted): unknown {
    if (r.name || r.subresource) throw methodNotAllowed()
    if (typeof r.body !== 'object' || r.body === null) throw badRequest('the request body must be an object')
    const object = r.body as KubeObject
    if (!object.metadata) throw badRequest('metadata is required')
    if (r.namespace !== undefined && object.metadata.namespace !== undefined && object.metadata.namespace !== r.namespace) {
      throw badRequest('the namespace of the provided object does not match the namespace sent on the request')
    }
    return withTypeMeta(r.resource, this.state.store.create(r.resource, object, r.namespace))
  }

  #update(r: Admitted): unknown {
    const { resource: info, namespace } = r
    const current = this.state.store.get(info, namespace, r.name as string)
    if (!current) throw notFound(info.plural, r.name as string, info.group)
    const object = withoutTypeMeta(r.body as KubeObject)
    const result = this.state.writes.merged(info, current, { ...object, metadata: { ...object.metadata, namespace } }, r.subresource)
    const refused = admitNodeUpdate(r.identity, info, current, result)
    if (refused) throw refused
    return withTypeMeta(info, this.state.writes.update(info, result))
  }

  #delete(r: Admitted): unknown {
    if (!r.name) throw methodNotAllowed()
    const opts = (r.body ?? {}) as DeleteOptions
    const graceParam = r.query.get('gracePeriodSeconds')
    const removed = this.state.writes.remove(r.resource, r.namespace, r.name, {
      ...opts,
      ...(graceParam !== null && /^\d+$/.test(graceParam) ? { gracePeriodSeconds: Number(graceParam) } : {}),
    })
    return withTypeMeta(r.resource, removed)
  }
}
