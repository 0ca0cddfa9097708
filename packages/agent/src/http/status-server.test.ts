import { silentLogger } from '@kubevol/core'
import { afterEach, describe, expect, it } from 'vitest'
import { get } from '../../test/helpers.js'
import { type HealthCheck, type StatusServer, startStatusServer } from './status-server.js'

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
