/**
 * The read-only HTTP endpoints (node:http): `/livez`, `/readyz` (`?verbose` lists the checks, in the
 * kube-apiserver's format), `/metrics`, `/v1/state`, `/v1/pods/<uid>`, `/v1/events`, and a
 * container's mounts at `/v1/pods/<uid>/containers/<name>/mounts` (`?wait=30s`). Bound to
 * 127.0.0.1 by default; with a bearer token, every endpoint requires it (the plain health checks
 * can be exempted for probes). Only GET and HEAD; nothing here changes state. A malformed request
 * gets a 4xx answer, never a crash.
 */
import { timingSafeEqual } from 'node:crypto'
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { type Logger, errorMessage } from '@kubevol/core'
import { parseDuration } from '../config/duration.js'
import type { ContainerMountsRequest, RouteAnswer } from './container-mounts-view.js'

/** A client must have sent its request headers within this long of connecting (then `408`). */
export const HEADERS_TIMEOUT_MS = 10_000
/** A client must have sent its whole request within this long. */
const REQUEST_TIMEOUT_MS = 30_000
const CONNECTION_SWEEP_MS = 1_000

/** One health check's outcome. */
export interface HealthCheck {
  readonly name: string
  readonly ok: boolean
  /** Why it failed, or a detail. */
  readonly message?: string
}

/** What the endpoints answer with. */
interface StatusRoutes {
  livez(): readonly HealthCheck[]
  readyz(): Promise<readonly HealthCheck[]>
  metrics(): Promise<{ readonly contentType: string; readonly body: string }>
  state(): unknown
  /** undefined: 404. */
  pod(uid: string): unknown
  events(filter: { readonly podUID?: string; readonly limit?: number }): unknown
  /** A container's mounts (`/v1/pods/<uid>/containers/<name>/mounts`), or every container's (`/v1/pods/<uid>/mounts`); absent: 404. */
  mounts?(request: ContainerMountsRequest): Promise<RouteAnswer>
}

/** The longest `?wait=` of the mounts endpoint. */
const MAX_MOUNTS_WAIT_MS = 10 * 60_000

export interface StatusServerOptions {
  /** @default '127.0.0.1' */
  readonly address?: string
  /** 0 picks a free port. */
  readonly port: number
  /** Required as `Authorization: Bearer <token>` on every endpoint. */
  readonly token?: string
  /**
   * With a token: answer /livez, /healthz and /readyz without `?verbose` to requests without it
   * (the verbose answers name volumes and still need it). @default false
   */
  readonly unauthenticatedProbes?: boolean
  readonly routes: StatusRoutes
  readonly logger: Logger
}

export interface StatusServer {
  /** `http://127.0.0.1:10280` */
  readonly url: string
  close(): Promise<void>
}

function send(res: ServerResponse, status: number, body: string, contentType = 'text/plain; charset=utf-8'): void {
  res.writeHead(status, { 'Content-Type': contentType, 'Cache-Control': 'no-store', 'X-Content-Type-Options': 'nosniff' })
  res.end(body)
}

function sendJson(res: ServerResponse, status: number, value: unknown): void {
  send(res, status, `${JSON.stringify(value, null, 2)}\n`, 'application/json')
}

function authorized(req: IncomingMessage, token: string | undefined): boolean {
  if (token === undefined) return true
  const header = req.headers.authorization ?? ''
  // The scheme is case-insensitive (RFC 7235 §2.1) and one or more spaces separate it from the token.
  const match = /^bearer +(.+)$/i.exec(header)
  if (!match) return false
  const given = Buffer.from(match[1] as string)
  const wanted = Buffer.from(token)
  return given.length === wanted.length && timingSafeEqual(given, wanted)
}

function healthBody(name: string, checks: readonly HealthCheck[], verbose: boolean): string {
  const ok = checks.every((c) => c.ok)
  if (!verbose) return ok ? 'ok\n' : `${checks.filter((c) => !c.ok).map((c) => `[-]${c.name} failed: ${c.message ?? 'not ready'}`).join('\n')}\n${name} check failed\n`
  const lines = checks.map((c) => (c.ok ? `[+]${c.name} ok${c.message ? ` (${c.message})` : ''}` : `[-]${c.name} failed: ${c.message ?? 'not ready'}`))
  return `${lines.join('\n')}\n${name} check ${ok ? 'passed' : 'failed'}\n`
}

/** Checks the method, the target and the token, then answers from the routes. */
async function handleRequest(options: StatusServerOptions, req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.setHeader('Allow', 'GET, HEAD')
    return send(res, 405, 'method not allowed\n')
  }
  // Origin-form only ("/path?query"): an absolute URL or "*" is not for this server.
  const raw = req.url ?? ''
  if (!raw.startsWith('/') || raw.startsWith('//')) return send(res, 400, 'bad request: the target must be a path\n')
  let url: URL
  try {
    url = new URL(raw, 'http://localhost')
  } catch {
    return send(res, 400, 'bad request: malformed URL\n')
  }
  const path = url.pathname.replace(/\/+$/, '') || '/'
  const verbose = url.searchParams.has('verbose')
  const probe = path === '/livez' || path === '/healthz' || path === '/readyz'
  // Authentication comes before routing, so that without the token nothing is learnt, not even
  // which paths exist.
  if (!(probe && !verbose && options.unauthenticatedProbes) && !authorized(req, options.token)) {
    res.setHeader('WWW-Authenticate', 'Bearer realm="kubevol"')
    return send(res, 401, 'unauthorized\n')
  }
  return route(options.routes, res, path, url, verbose)
}

/** `/v1/pods/<uid>[/containers/<name>]/mounts[?wait=30s][&recursiveReadOnly=true]`. */
async function mountsRoute(routes: StatusRoutes, res: ServerResponse, match: RegExpExecArray, url: URL): Promise<void> {
  let uid: string
  let container: string | undefined
  try {
    uid = decodeURIComponent(match[1] as string)
    container = match[2] === undefined ? undefined : decodeURIComponent(match[2])
  } catch {
    return sendJson(res, 400, { error: 'malformed percent-encoding in the pod UID or the container name' })
  }
  const wait = url.searchParams.get('wait')
  const waitMs = wait === null ? undefined : parseDuration(wait)
  if (wait !== null && (waitMs === undefined || waitMs > MAX_MOUNTS_WAIT_MS)) {
    return sendJson(res, 400, { error: `wait must be a duration such as 30s or 2m, at most 10m, not ${JSON.stringify(wait.slice(0, 40))}` })
  }
  const rro = url.searchParams.get('recursiveReadOnly')
  if (rro !== null && rro !== 'true' && rro !== 'false') return sendJson(res, 400, { error: `recursiveReadOnly must be true or false, not ${JSON.stringify(rro.slice(0, 40))}` })
  // A client that goes away ends the wait.
  const gone = new AbortController()
  const onClose = (): void => gone.abort()
  res.once('close', onClose)
  try {
    const answer = await (routes.mounts as NonNullable<StatusRoutes['mounts']>)({
      uid,
      ...(container === undefined ? {} : { container }),
      ...(waitMs === undefined ? {} : { waitMs }),
      recursiveReadOnly: rro === 'true',
      signal: gone.signal,
    })
    if (!res.writableEnded && !res.destroyed) sendJson(res, answer.status, answer.body)
  } finally {
    res.off('close', onClose)
  }
}

async function route(routes: StatusRoutes, res: ServerResponse, path: string, url: URL, verbose: boolean): Promise<void> {
  if (path === '/livez' || path === '/healthz') {
    const checks = routes.livez()
    return send(res, checks.every((c) => c.ok) ? 200 : 503, healthBody('livez', checks, verbose))
  }
  if (path === '/readyz') {
    const checks = await routes.readyz()
    return send(res, checks.every((c) => c.ok) ? 200 : 503, healthBody('readyz', checks, verbose))
  }
  if (path === '/metrics') {
    const { contentType, body } = await routes.metrics()
    return send(res, 200, body, contentType)
  }
  if (path === '/v1/state') return sendJson(res, 200, routes.state())
  if (path === '/v1/events') {
    const limit = url.searchParams.get('limit')
    const podUID = url.searchParams.get('pod') ?? undefined
    if (limit !== null && !/^\d{1,9}$/.test(limit)) return sendJson(res, 400, { error: `limit must be a non-negative integer, not ${JSON.stringify(limit.slice(0, 40))}` })
    return sendJson(res, 200, routes.events({ ...(podUID ? { podUID } : {}), ...(limit !== null ? { limit: Number(limit) } : {}) }))
  }
  const mounts = routes.mounts ? /^\/v1\/pods\/([^/]+)(?:\/containers\/([^/]+))?\/mounts$/.exec(path) : null
  if (mounts) return mountsRoute(routes, res, mounts, url)
  const pod = /^\/v1\/pods\/([^/]+)$/.exec(path)
  if (pod) {
    let uid: string
    try {
      uid = decodeURIComponent(pod[1] as string)
    } catch {
      return sendJson(res, 400, { error: 'malformed percent-encoding in the pod UID' })
    }
    const view = routes.pod(uid)
    if (view === undefined) return sendJson(res, 404, { error: `pod ${JSON.stringify(uid.slice(0, 100))} is not known on this node` })
    return sendJson(res, 200, view)
  }
  return sendJson(res, 404, { error: `no endpoint ${JSON.stringify(path.slice(0, 100))}`, endpoints: ['/livez', '/readyz', '/metrics', '/v1/state', '/v1/pods/<uid>', '/v1/pods/<uid>/mounts', '/v1/pods/<uid>/containers/<name>/mounts', '/v1/events'] })
}

/** Timeouts against slow clients, and answers to what never reaches the request handler. */
function harden(server: Server): void {
  // A client that sends headers slowly (or never) does not hold a connection for long.
  server.headersTimeout = HEADERS_TIMEOUT_MS
  server.requestTimeout = REQUEST_TIMEOUT_MS
  // Garbage on the socket: Node answers 400 (431 for headers that are too large) and closes it.
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    if (!socket.writable) return socket.destroy()
    const status = err.code === 'HPE_HEADER_OVERFLOW' ? '431 Request Header Fields Too Large' : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? '408 Request Timeout' : '400 Bad Request'
    socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`)
  })
  // CONNECT never reaches the request handler: refuse it here like any other method.
  server.on('connect', (_req: IncomingMessage, socket: import('node:stream').Duplex) => {
    socket.end('HTTP/1.1 405 Method Not Allowed\r\nAllow: GET, HEAD\r\nConnection: close\r\nContent-Length: 0\r\n\r\n')
  })
}

/** Starts listening; resolves once the port is bound. */
export async function startStatusServer(options: StatusServerOptions): Promise<StatusServer> {
  const { logger } = options
  const address = options.address ?? '127.0.0.1'
  // Node enforces headersTimeout and requestTimeout only when it sweeps its connections, every
  // connectionsCheckingInterval (30 s by default): a slow client kept a connection for 30 to 60 s
  // whatever headersTimeout said. A sweep each second makes the limits below hold within a second.
  const server: Server = createServer({ connectionsCheckingInterval: CONNECTION_SWEEP_MS }, (req, res) => {
    handleRequest(options, req, res).catch((err: unknown) => {
      logger.error('Status endpoint failed', { path: req.url, err: errorMessage(err) })
      if (!res.headersSent) send(res, 500, `internal error: ${errorMessage(err)}\n`)
      else res.end()
    })
  })
  harden(server)
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(options.port, address, () => {
      server.off('error', reject)
      resolve()
    })
  })
  const bound = server.address() as AddressInfo
  const host = bound.family === 'IPv6' ? `[${bound.address}]` : bound.address
  return {
    url: `http://${host}:${bound.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}
