/**
 * The status server's attack surface: it binds to loopback by default; with a token every endpoint
 * refuses requests without it (probes only when exempted, and never verbose); only GET and HEAD are
 * accepted and nothing changes state; malformed requests (bad paths, bad percent-encoding, bad query
 * strings, huge headers, raw garbage on the socket) get a 4xx answer and the server stays up. The
 * last test sends generated raw HTTP requests (fast-check; the seed is printed for replay with
 * `KUBEVOL_FC_SEED`, `KUBEVOL_FC_RUNS` for more).
 */
import { connect } from 'node:net'
import { silentLogger } from '@kubevol/core'
import fc from 'fast-check'
import { afterEach, describe, expect, it } from 'vitest'
import { get } from '../../test/helpers.js'
import { type StatusServer, type StatusServerOptions, startStatusServer } from './status-server.js'

const TOKEN = 's3cret-token'
const ENDPOINTS = ['/livez', '/healthz', '/readyz', '/readyz?verbose', '/livez?verbose', '/metrics', '/v1/state', '/v1/pods/known', '/v1/events', '/nope', '/']

let server: StatusServer | undefined
afterEach(async () => {
  await server?.close()
  server = undefined
})

/** A server whose routes record every call, so a test can tell that nothing but reads happened. */
async function start(options: Partial<StatusServerOptions> = {}) {
  const calls: string[] = []
  server = await startStatusServer({
    port: 0,
    logger: silentLogger,
    ...options,
    routes: {
      livez: () => [{ name: 'manager-loop', ok: true }],
      readyz: async () => [{ name: 'operations', ok: false, message: 'stuck: volume_mount of kubernetes.io/empty-dir/u-a (pod u) running for 200s' }],
      metrics: async () => ({ contentType: 'text/plain; version=0.0.4; charset=utf-8', body: 'x 1\n' }),
      state: () => {
        calls.push('state')
        return { ok: true }
      },
      pod: (uid) => {
        calls.push(`pod ${uid}`)
        return uid === 'known' ? { uid } : undefined
      },
      events: (filter) => {
        calls.push('events')
        return [filter]
      },
      ...options.routes,
    },
  })
  return { url: server.url, port: Number(new URL(server.url).port), calls }
}

/** Sends raw bytes and resolves with what came back before the server closed (or 1 s passed). */
function raw(port: number, bytes: string | Uint8Array): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    let answer = ''
    const done = () => {
      socket.destroy()
      resolve(answer)
    }
    const timer = setTimeout(done, 1_000)
    socket.on('data', (d) => {
      answer += d.toString('latin1')
      // One answer is all a test needs; keep-alive would hold the socket open.
      if (/\r\n\r\n/.test(answer)) {
        const length = /content-length: (\d+)/i.exec(answer)
        const body = answer.slice(answer.indexOf('\r\n\r\n') + 4)
        if (!length || body.length >= Number(length[1])) {
          clearTimeout(timer)
          done()
        }
      }
    })
    socket.on('close', () => {
      clearTimeout(timer)
      done()
    })
    socket.on('error', () => undefined)
    // Half-close: a request cut short is then answered (400) instead of waited for.
    socket.end(bytes)
  })
}

const statusOf = (answer: string): number => Number(/^HTTP\/1\.[01] (\d{3})/.exec(answer)?.[1] ?? 0)

describe('the status server surface', () => {
  it('binds to loopback by default, in the agent configuration too', async () => {
    const { url } = await start()
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
    const { agentConfigSchema } = await import('../config/options.js')
    expect(agentConfigSchema.parse({ nodeName: 'n1' }).address).toBe('127.0.0.1')
  })

  it.each(ENDPOINTS)('with a token, %s refuses requests without it or with a wrong one', async (path) => {
    const { url, calls } = await start({ token: TOKEN })
    for (const header of [undefined, 'Bearer wrong', `Bearer ${TOKEN}x`, `Basic ${TOKEN}`, `bearer ${TOKEN}x`, 'Bearer ', TOKEN]) {
      const res = await fetch(`${url}${path}`, header === undefined ? {} : { headers: { authorization: header } })
      expect(res.status).toBe(401)
      expect(res.headers.get('www-authenticate')).toBe('Bearer realm="kubevol"')
      expect(await res.text()).toBe('unauthorized\n')
    }
    expect(calls).toEqual([])
    const ok = await get(`${url}${path}`, TOKEN)
    expect(ok.status).not.toBe(401)
    // The scheme is case-insensitive (RFC 7235): a lower-case `bearer` with the right token is let in.
    const lower = await fetch(`${url}${path}`, { headers: { authorization: `bearer ${TOKEN}` } })
    expect(lower.status).not.toBe(401)
  })

  it('exempts the plain probes only when asked, and never their verbose answers', async () => {
    const { url } = await start({ token: TOKEN, unauthenticatedProbes: true })
    expect((await get(`${url}/livez`)).status).toBe(200)
    expect((await get(`${url}/readyz`)).status).toBe(503)
    expect((await get(`${url}/readyz?verbose`)).status).toBe(401)
    expect((await get(`${url}/metrics`)).status).toBe(401)
    expect((await get(`${url}/v1/state`)).status).toBe(401)
  })

  it.each(['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'CONNECT_', 'TRACE', 'PROPFIND'])('answers %s with 405 and changes nothing', async (method) => {
    const { port, calls } = await start({ token: TOKEN })
    for (const path of ['/v1/state', '/v1/pods/known', '/v1/events', '/livez']) {
      const answer = await raw(port, `${method.replace('_', '')} ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`)
      expect([400, 405]).toContain(statusOf(answer))
      if (statusOf(answer) === 405) expect(answer).toMatch(/allow: GET, HEAD/i)
    }
    expect(calls).toEqual([])
  })

  it.each([
    { name: 'bad percent-encoding in a pod UID', target: '/v1/pods/%E0%A4%A', status: 400 },
    { name: 'a lone percent sign', target: '/v1/pods/%', status: 400 },
    { name: 'a limit that is not a number', target: '/v1/events?limit=abc', status: 400 },
    { name: 'a negative limit', target: '/v1/events?limit=-1', status: 400 },
    { name: 'a huge limit', target: `/v1/events?limit=${'9'.repeat(400)}`, status: 400 },
    { name: 'an absolute-form target', target: 'http://evil.example/v1/state', status: 400 },
    { name: 'an asterisk target', target: '*', status: 400 },
    { name: 'a protocol-relative target', target: '//evil.example/v1/state', status: 400 },
    { name: 'traversal in the path', target: '/v1/pods/../../etc/passwd', status: 404 },
    { name: 'an encoded traversal', target: '/v1/pods/..%2F..%2Fetc%2Fpasswd', status: 404 },
    { name: 'a NUL in the path', target: '/v1/pods/a%00b', status: 404 },
    { name: 'a huge path', target: `/${'a'.repeat(12_000)}`, status: 404 },
    { name: 'an unknown endpoint', target: '/v2/secrets', status: 404 },
  ])('answers $name with $status', async ({ target, status }) => {
    const { port } = await start({ token: TOKEN })
    const answer = await raw(port, `GET ${target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\nConnection: close\r\n\r\n`)
    expect(statusOf(answer)).toBe(status)
    expect(answer).not.toMatch(/internal error|at .*\.ts:\d+/)
  })

  it.each([
    { name: 'headers too large', bytes: `GET /livez HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(64 * 1024)}\r\n\r\n`, status: 431 },
    { name: 'garbage', bytes: '\u0000\u0001\u0002 garbage \r\n\r\n', status: 400 },
    { name: 'a bad request line', bytes: 'GET\r\n\r\n', status: 400 },
    { name: 'an unknown HTTP version', bytes: 'GET /livez HTTP/9.9\r\nHost: x\r\n\r\n', status: 400 },
    { name: 'a bad header line', bytes: 'GET /livez HTTP/1.1\r\nHost x\r\n\r\n', status: 400 },
    { name: 'a bad content length', bytes: 'GET /livez HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n', status: 400 },
    { name: 'two content lengths', bytes: 'GET /livez HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n', status: 400 },
  ])('answers $name with $status and stays up', async ({ bytes, status }) => {
    const { url, port } = await start({ token: TOKEN })
    expect(statusOf(await raw(port, bytes))).toBe(status)
    expect((await get(`${url}/livez`, TOKEN)).status).toBe(200)
  })

  it('answers generated raw requests with a status below 500 and stays up (fuzz)', async () => {
    const seed = process.env.KUBEVOL_FC_SEED ? Number(process.env.KUBEVOL_FC_SEED) : (Date.now() ^ (Math.random() * 0x7fffffff)) | 0
    const numRuns = process.env.KUBEVOL_FC_RUNS ? Math.max(100, Math.floor(Number(process.env.KUBEVOL_FC_RUNS) / 10)) : 300
    console.log(`status server fuzz: seed ${seed}, ${numRuns} requests; replay with KUBEVOL_FC_SEED=${seed} npx vitest run --project agent src/http/status-surface.test.ts`)
    const { url, port, calls } = await start({ token: TOKEN })
    const method = fc.oneof(fc.constantFrom('GET', 'HEAD', 'POST', 'DELETE', 'get', 'G\u0000T', ''), fc.string({ maxLength: 8 }))
    const path = fc.oneof(
      fc.constantFrom(...ENDPOINTS, '/v1/pods/', '/v1/pods/%', '/v1/events?limit=', '/v1/events?pod=%zz', '*', '//x', 'http://x/y'),
      fc.webPath(),
      fc.string({ unit: 'binary', maxLength: 60 }).map((s) => `/${s}`),
      fc.tuple(fc.constantFrom(...ENDPOINTS), fc.webQueryParameters()).map(([p, q]) => `${p}${p.includes('?') ? '&' : '?'}${q}`),
    )
    const header = fc.oneof(
      fc.constant(`Authorization: Bearer ${TOKEN}`),
      fc.constant('Authorization: Bearer wrong'),
      fc.tuple(fc.string({ maxLength: 20 }), fc.string({ unit: 'binary', maxLength: 200 })).map(([k, v]) => `${k}: ${v}`),
      fc.string({ unit: 'binary', maxLength: 100 }),
    )
    const version = fc.constantFrom('HTTP/1.1', 'HTTP/1.0', 'HTTP/2.0', 'HTTP/1.1 ', '')
    const request = fc.oneof(
      { weight: 4, arbitrary: fc.tuple(method, path, version, fc.array(header, { maxLength: 5 })).map(([m, p, v, hs]) => `${m} ${p} ${v}\r\nHost: x\r\n${hs.join('\r\n')}${hs.length ? '\r\n' : ''}Connection: close\r\n\r\n`) },
      { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 300 }) },
      { weight: 1, arbitrary: fc.uint8Array({ maxLength: 300 }) },
    )
    await fc.assert(
      fc.asyncProperty(request, async (bytes) => {
        const answer = await raw(port, bytes)
        const status = statusOf(answer)
        // No answer at all is fine for bytes that never make a request (e.g. an empty one). 503 is
        // the readiness answer of this fixture (a stuck operation), never an error of the server.
        const target = typeof bytes === 'string' ? (bytes.split('\r\n')[0]?.split(' ')[1] ?? '') : ''
        const readiness = target.startsWith('/readyz')
        if (status !== 0 && !(status === 503 && readiness)) expect(status).toBeLessThan(500)
        expect(status === 0 || status === 200 || status === 503 || (status >= 400 && status < 500)).toBe(true)
      }),
      { seed, numRuns },
    )
    expect((await get(`${url}/livez`, TOKEN)).status).toBe(200)
    // Requests without the token never reached a route.
    expect(calls.filter((c) => c !== 'state' && c !== 'events' && !c.startsWith('pod '))).toEqual([])
  }, 120_000)
})
