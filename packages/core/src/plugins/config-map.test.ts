import { describe, expect, it } from 'vitest'
import type { ConfigMap } from '../api/kubernetes.js'
import { decodeUtf8 } from '../text.js'
import { makeConfigMapPayload } from './config-map.js'
import type { Payload } from './payload.js'

const configMap: ConfigMap = { metadata: { name: 'app' }, data: { 'app.yaml': 'port: 80', 'log.level': 'debug' }, binaryData: { 'logo.bin': 'AAEC' } }
const show = (payload: Payload) =>
  Object.fromEntries([...payload].map(([k, v]) => [k, `${typeof v.data === 'string' ? v.data : `bytes:${[...v.data].join(',')}`} ${v.mode.toString(8)}`]))

describe('makeConfigMapPayload', () => {
  it.each([
    { name: 'every key, binary ones decoded', items: undefined, optional: false, expected: { 'app.yaml': 'port: 80 644', 'log.level': 'debug 644', 'logo.bin': 'bytes:0,1,2 644' } },
    {
      name: 'listed items with paths and modes',
      items: [
        { key: 'app.yaml', path: 'conf/app.yaml', mode: 0o400 },
        { key: 'logo.bin', path: 'logo' },
      ],
      optional: false,
      expected: { 'conf/app.yaml': 'port: 80 400', logo: 'bytes:0,1,2 644' },
    },
    { name: 'a missing key of an optional volume, skipped', items: [{ key: 'nope', path: 'nope' }], optional: true, expected: {} },
  ])('projects $name', ({ items, optional, expected }) => {
    expect(show(makeConfigMapPayload(configMap, items, 0o644, optional))).toEqual(expected)
  })

  it('projects nothing for a missing optional ConfigMap', () => {
    expect(makeConfigMapPayload(undefined, [{ key: 'a', path: 'a' }], 0o644, true).size).toBe(0)
  })

  it.each([
    { name: 'a missing key', cm: configMap, error: 'configmap references non-existent config key: nope' },
    { name: 'binaryData that is not base64', cm: { ...configMap, binaryData: { bad: '%' } }, error: 'configmap "app" binaryData key bad: illegal base64 data' },
  ])('fails on $name', ({ cm, error }) => {
    expect(() => makeConfigMapPayload(cm, [{ key: 'nope', path: 'nope' }], 0o644, false)).toThrow(error)
  })

  it('keeps UTF-8 text as text', () => {
    const payload = makeConfigMapPayload({ metadata: {}, binaryData: { t: 'w7w=' } }, undefined, 0o644, false)
    expect(decodeUtf8(payload.get('t')?.data as Uint8Array)).toBe('ü')
  })
})
