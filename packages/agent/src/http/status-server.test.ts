import { once } from 'node:events'
import { connect } from 'node:net'
import { silentLogger } from '@kubevol/core'
import { afterEach, describe, expect, it } from 'vitest'
import { get } from '../../test/helpers.js'
import { HEADERS_TIMEOUT_MS, type HealthCheck, type StatusServer, startStatusServer } from './status-server.js'

let server: StatusServer | undefined
afterEach(async () => {
  await server?.close()
  server = undefined
})

async function start(token?: string, checks: HealthCheck[] = [{ name: 'sources-synced', ok: true }]) {
  server = await startStatusServer({
    port: 0,
    logger: silentLogger,
    ...(token ? { token } : {}),
    routes: {
      livez: () => [{ name: 'manager-loop', ok: true }],
      readyz: async () => checks,
      metrics: async () => ({ contentType: 'text/plain; version=0.0.4; charset=utf-8', body: 'x 1\n' }),
      state: () => ({ ok: true }),
      pod: (uid) => (uid === 'known' ? { uid } : undefined),
      events: (filter) => [filter],
    },
  })
  return server
}

describe('the status endpoints', () => {
  it('bind to 127.0.0.1 and answer each path', async () => {
    const { url } = await start()
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
    expect((await get(`${url}/livez`)).text).toBe('ok\n')
    expect((await get(`${url}/metrics`)).text).toBe('x 1\n')
    expect((await get(`${url}/v1/state`)).json()).toEqual({ ok: true })
    expect((await get(`${url}/v1/pods/known`)).json()).toEqual({ uid: 'known' })
    expect((await get(`${url}/v1/pods/unknown`)).status).toBe(404)
    expect((await get(`${url}/v1/events?pod=u1&limit=5`)).json()).toEqual([{ podUID: 'u1', limit: 5 }])
    expect((await get(`${url}/nope`)).status).toBe(404)
    expect((await fetch(`${url}/v1/state`, { method: 'POST' })).status).toBe(405)
  })

  it('lists the checks with ?verbose and fails readiness with the reason', async () => {
    const { url } = await start(undefined, [
      { name: 'sources-synced', ok: true },
      { name: 'reconciler', ok: false, message: 'states not synced yet' },
    ])
    const plain = await get(`${url}/readyz`)
    expect(plain.status).toBe(503)
    expect(plain.text).toBe('[-]reconciler failed: states not synced yet\nreadyz check failed\n')
    expect((await get(`${url}/readyz?verbose`)).text).toBe('[+]sources-synced ok\n[-]reconciler failed: states not synced yet\nreadyz check failed\n')
  })

  it('requires the bearer token on every endpoint, the health checks included', async () => {
    const { url } = await start('s3cret')
    expect((await get(`${url}/readyz`)).status).toBe(401)
    expect((await get(`${url}/readyz`, 's3cret')).status).toBe(200)
    expect((await get(`${url}/v1/state`)).status).toBe(401)
    expect((await get(`${url}/metrics`, 'wrong')).status).toBe(401)
    expect((await get(`${url}/metrics`, 's3cret')).status).toBe(200)
  })
})

describe('the HTTP edge', () => {
  it.each(['Bearer', 'bearer', 'BEARER', 'bEaReR'])('takes the scheme as written "%s" (case-insensitive, RFC 7235), and only with the right token', async (scheme) => {
    const { url } = await start('s3cret')
    const ask = (authorization: string) => fetch(`${url}/v1/state`, { headers: { authorization } }).then((r) => r.status)
    expect(await ask(`${scheme} s3cret`)).toBe(200)
    expect(await ask(`${scheme}  s3cret`)).toBe(200)
    expect(await ask(`${scheme} wrong`)).toBe(401)
    expect(await ask(`${scheme}s3cret`)).toBe(401)
    expect(await ask('Basic s3cret')).toBe(401)
  })

  it(
    'cuts off a client that sends its headers slowly at 10 s with 408, on a real socket',
    async () => {
      const { url } = await start()
      const { port } = new URL(url)
      const socket = connect(Number(port), '127.0.0.1')
      await once(socket, 'connect')
      const started = performance.now()
      let answer = ''
      socket.on('data', (chunk: Buffer) => {
        answer += chunk.toString('latin1')
      })
      socket.write('GET /v1/state HTTP/1.1\r\nHost: x\r\n')
      // One header line a second, never the blank line that ends them.
      const drip = setInterval(() => socket.writable && socket.write(`X-Slow-${Math.round(performance.now())}: 1\r\n`), 1_000)
      try {
        await once(socket, 'close')
      } finally {
        clearInterval(drip)
      }
      const elapsed = performance.now() - started
      expect(answer).toMatch(/^HTTP\/1\.1 408 /)
      expect(elapsed).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS - 100)
      expect(elapsed).toBeLessThan(HEADERS_TIMEOUT_MS + 2_000)
    },
    HEADERS_TIMEOUT_MS + 10_000,
  )
})
