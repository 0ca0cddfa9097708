/**
 * The read-only HTTP endpoints (node:http): `/livez`, `/readyz` (`?verbose` lists the checks, in the
 * kube-apiserver's format), `/metrics`, `/v1/state`, `/v1/pods/<uid>`, `/v1/events`. Bound to
 * 127.0.0.1 by default; with a bearer token, every endpoint but the health checks requires it.
 */
import { timingSafeEqual } from 'node:crypto'
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { type Logger, errorMessage } from '@kubevol/core'

/** One health check's outcome. */
export interface HealthCheck {
  readonly name: string
  readonly ok: boolean
  /** Why it failed, or a detail. */
  readonly message?: string
}

/** What the endpoints answer with. */
export interface StatusRoutes {
  livez(): readonly HealthCheck[]
  readyz(): Promise<readonly HealthCheck[]>
  metrics(): Promise<{ readonly contentType: string; readonly body: string }>
  state(): unknown
  /** undefined: 404. */
  pod(uid: string): unknown
  events(filter: { readonly podUID?: string; readonly limit?: number }): unknown
}

export interface StatusServerOptions {
  /** @default '127.0.0.1' */
  readonly address?: string
  /** 0 picks a free port. */
  readonly port: number
  /** Required as `Authorization: Bearer <token>` on every endpoint but /livez and /readyz. */
  readonly token?: string
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
  const match = /^Bearer (.+)$/.exec(header)
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

/** Starts listening; resolves once the port is bound. */
export async function startStatusServer(options: StatusServerOptions): Promise<StatusServer> {
  const { routes, logger, token } = options
  const address = options.address ?? '127.0.0.1'
  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://localhost')
    const path = url.pathname.replace(/\/+$/, '') || '/'
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('Allow', 'GET, HEAD')
      return send(res, 405, 'method not allowed\n')
    }
    const verbose = url.searchParams.has('verbose')
    if (path === '/livez' || path === '/healthz') {
      const checks = routes.livez()
      return send(res, checks.every((c) => c.ok) ? 200 : 503, healthBody('livez', checks, verbose))
    }
    if (path === '/readyz') {
      const checks = await routes.readyz()
      return send(res, checks.every((c) => c.ok) ? 200 : 503, healthBody('readyz', checks, verbose))
    }
    if (!authorized(req, token)) {
      res.setHeader('WWW-Authenticate', 'Bearer realm="kubevol"')
      return send(res, 401, 'unauthorized\n')
    }
    if (path === '/metrics') {
      const { contentType, body } = await routes.metrics()
      return send(res, 200, body, contentType)
    }
    if (path === '/v1/state') return sendJson(res, 200, routes.state())
    if (path === '/v1/events') {
      const limit = url.searchParams.get('limit')
      const podUID = url.searchParams.get('pod') ?? undefined
      return sendJson(res, 200, routes.events({ ...(podUID ? { podUID } : {}), ...(limit && /^\d+$/.test(limit) ? { limit: Number(limit) } : {}) }))
    }
    const pod = /^\/v1\/pods\/([^/]+)$/.exec(path)
    if (pod) {
      const uid = decodeURIComponent(pod[1] as string)
      const view = routes.pod(uid)
      if (view === undefined) return sendJson(res, 404, { error: `pod ${uid} is not known on this node` })
      return sendJson(res, 200, view)
    }
    return sendJson(res, 404, { error: `no endpoint ${path}`, endpoints: ['/livez', '/readyz', '/metrics', '/v1/state', '/v1/pods/<uid>', '/v1/events'] })
  }
  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      logger.error('Status endpoint failed', { path: req.url, err: errorMessage(err) })
      if (!res.headersSent) send(res, 500, `internal error: ${errorMessage(err)}\n`)
      else res.end()
    })
  })
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
