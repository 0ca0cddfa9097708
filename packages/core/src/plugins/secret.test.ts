import { describe, expect, it } from 'vitest'
import type { Secret } from '../api/kubernetes.js'
import { decodeUtf8 } from '../text.js'
import type { Payload } from './payload.js'
import { makeSecretPayload } from './secret.js'

const secret: Secret = { metadata: { name: 'db' }, data: { user: 'YWRtaW4=', password: 'czNjcjN0' }, stringData: { password: 'override', extra: 'x' } }
const show = (payload: Payload) => Object.fromEntries([...payload].map(([k, v]) => [k, `${decodeUtf8(v.data as Uint8Array)} ${v.mode.toString(8)}`]))

describe('makeSecretPayload', () => {
  it.each([
    { name: 'every key, data decoded, stringData winning', items: undefined, optional: false, expected: { user: 'admin 400', password: 'override 400', extra: 'x 400' } },
    { name: 'listed items', items: [{ key: 'user', path: 'creds/user', mode: 0o440 }], optional: false, expected: { 'creds/user': 'admin 440' } },
    { name: 'a missing key of an optional volume, skipped', items: [{ key: 'nope', path: 'n' }], optional: true, expected: {} },
  ])('projects $name', ({ items, optional, expected }) => {
    expect(show(makeSecretPayload(secret, items, 0o400, optional))).toEqual(expected)
  })

  it.each([
    { name: 'a missing key', s: secret, error: 'references non-existent secret key: nope' },
    { name: 'data that is not base64', s: { ...secret, data: { bad: 'ab$d' } }, error: 'secret "db" data key bad: illegal base64 data at input byte 2' },
  ])('fails on $name', ({ s, error }) => {
    expect(() => makeSecretPayload(s, [{ key: 'nope', path: 'n' }], 0o644, false)).toThrow(error)
  })

  it('projects nothing for a missing optional Secret', () => {
    expect(makeSecretPayload(undefined, undefined, 0o644, true).size).toBe(0)
  })
})
