import { describe, expect, it } from 'vitest'
import { buildPod } from '../testing/builders.js'
import { createFakeClock } from '../testing/fake-clock.js'
import { MAX_TOKEN_TTL_MS, ServiceAccountTokenCache, tokenRotationTime } from './service-account-tokens.js'
import type { ServiceAccountToken, TokenRequest, TokenSource } from './token-source.js'

const HOUR = 3_600_000

describe('tokenRotationTime', () => {
  it.each([
    { name: 'one hour', issuedAt: 0, expiresAt: HOUR, rotation: 0.8 * HOUR },
    { name: 'ten minutes issued later', issuedAt: 5_000, expiresAt: 5_000 + 600_000, rotation: 5_000 + 480_000 },
    { name: 'a week (capped at 24 h)', issuedAt: 0, expiresAt: 7 * 24 * HOUR, rotation: MAX_TOKEN_TTL_MS },
  ])('$name → 80% of the lifetime', ({ issuedAt, expiresAt, rotation }) => {
    expect(tokenRotationTime({ token: 't', issuedAt, expiresAt })).toBe(rotation)
  })
})

/** A token source issuing numbered tokens on the fake clock; `failing` makes it reject. */
function tokenSource(clock: { now(): number }) {
  let issued = 0
  const state = { failing: false, requests: [] as TokenRequest[] }
  const source: TokenSource = {
    async getToken(request): Promise<ServiceAccountToken> {
      if (state.failing) throw new Error('token request failed: 503')
      state.requests.push(request)
      const now = clock.now()
      return { token: `token-${++issued}`, issuedAt: now, expiresAt: now + request.expirationSeconds * 1000 }
    },
  }
  return Object.assign(state, { source })
}

describe('ServiceAccountTokenCache', () => {
  const pod = buildPod({ uid: 'p1' })
  const request = { pod, serviceAccountName: 'default', audience: 'api', expirationSeconds: 3600, path: 'token' }

  function setUp() {
    const clock = createFakeClock(0)
    const tokens = tokenSource(clock)
    const cache = new ServiceAccountTokenCache({ source: tokens.source, clock })
    return { clock, tokens, cache }
  }

  it.each([
    { name: 'just before 80% reuses the token', elapsed: 0.8 * HOUR - 1, token: 'token-1' },
    { name: 'at 80% fetches a new one', elapsed: 0.8 * HOUR, token: 'token-2' },
    { name: 'after expiry fetches a new one', elapsed: 2 * HOUR, token: 'token-2' },
  ])('$name', async ({ elapsed, token }) => {
    const { clock, cache } = setUp()
    expect((await cache.get(request)).token).toBe('token-1')
    await clock.advance(elapsed)
    expect((await cache.get(request)).token).toBe(token)
  })

  it('keys tokens by pod, audience and path', async () => {
    const { cache } = setUp()
    await cache.get(request)
    const other = await Promise.all([
      cache.get({ ...request, path: 'other' }),
      cache.get({ ...request, audience: 'vault' }),
      cache.get({ ...request, pod: buildPod({ uid: 'p2' }) }),
    ])
    expect(other.map((t) => t.token).sort()).toEqual(['token-2', 'token-3', 'token-4'])
    expect((await cache.get(request)).token).toBe('token-1')
  })

  it('passes the request on without the path', async () => {
    const { tokens, cache } = setUp()
    await cache.get(request)
    expect(tokens.requests).toEqual([{ pod, serviceAccountName: 'default', audience: 'api', expirationSeconds: 3600 }])
  })

  it('keeps a token whose rotation failed until it expires, then fails', async () => {
    const { clock, tokens, cache } = setUp()
    await cache.get(request)
    tokens.failing = true
    await clock.advance(0.9 * HOUR)
    expect((await cache.get(request)).token).toBe('token-1')
    await clock.advance(0.1 * HOUR)
    await expect(cache.get(request)).rejects.toThrow('token request failed: 503')
  })

  it('tells the next rotation per pod and forgets a pod', async () => {
    const { clock, cache } = setUp()
    expect(cache.nextRotation()).toBeUndefined()
    await cache.get(request)
    await clock.advance(60_000)
    await cache.get({ ...request, pod: buildPod({ uid: 'p2' }), expirationSeconds: 600 })
    expect(cache.nextRotation('p1')).toBe(0.8 * HOUR)
    expect(cache.nextRotation('p2')).toBe(60_000 + 480_000)
    expect(cache.nextRotation()).toBe(60_000 + 480_000)
    cache.forgetPod('p2')
    expect(cache.nextRotation()).toBe(0.8 * HOUR)
  })
})
