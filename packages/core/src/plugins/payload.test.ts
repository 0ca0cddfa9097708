import { describe, expect, it } from 'vitest'
import { decodeUtf8, encodeUtf8 } from '../text.js'
import {
  type FileProjection,
  aggregateErrors,
  cleanPayload,
  decodeBase64,
  decodeBase64Values,
  keyToPathPayload,
  mergePayloads,
  validatePayloadPath,
} from './payload.js'

const file = (data: string, mode = 0o644): FileProjection => ({ data, mode })

describe('validatePayloadPath', () => {
  it.each([
    { name: 'a plain name', path: 'config.yaml' },
    { name: 'a nested path', path: 'a/b/c' },
    { name: 'a dot file', path: '.hidden' },
    { name: 'a name starting with two dots deeper down', path: 'a/..b' },
    { name: 'exactly 255 bytes in one element', path: 'x'.repeat(255) },
  ])('accepts $name', ({ path }) => {
    expect(() => validatePayloadPath(path)).not.toThrow()
  })

  it.each([
    { name: 'an empty path', path: '', error: 'invalid path: must not be empty: ""' },
    { name: 'an absolute path', path: '/etc/passwd', error: 'invalid path: must be relative path: /etc/passwd' },
    { name: 'a .. element', path: 'a/../b', error: "invalid path: must not contain '..': a/../b" },
    { name: 'a leading ..', path: '../b', error: "invalid path: must not contain '..': ../b" },
    { name: 'the reserved ..data', path: '..data', error: "invalid path: must not start with '..': ..data" },
    { name: 'a reserved prefix', path: '..2026_01_01/x', error: "invalid path: must not start with '..': ..2026_01_01/x" },
    { name: 'an element over 255 bytes', path: `a/${'é'.repeat(128)}`, error: 'invalid path: filenames must be less than or equal to 255 characters' },
    { name: 'a path over 4096 bytes', path: Array.from({ length: 20 }, () => 'x'.repeat(250)).join('/'), error: 'invalid path: must be less than or equal to 4096 characters' },
  ])('rejects $name, naming it', ({ path, error }) => {
    expect(() => validatePayloadPath(path)).toThrow(error)
  })
})

describe('cleanPayload', () => {
  it('cleans paths, keeps modes and encodes text as UTF-8', () => {
    const clean = cleanPayload(new Map([['./a//b/', { data: 'ü', mode: 0o400, fsUser: 1000 }]]))
    expect([...clean.keys()]).toEqual(['a/b'])
    expect(clean.get('a/b')).toEqual({ bytes: encodeUtf8('ü'), mode: 0o400, fsUser: 1000 })
  })

  it.each([
    { name: 'two paths that clean to one', paths: ['a', './a'], error: 'invalid path: duplicate path after cleaning: ./a' },
    { name: 'a file that is also a directory', paths: ['a/b', 'a'], error: 'invalid path: a is both a file and a directory' },
    { name: 'a path naming no file', paths: ['./'], error: 'invalid path: must name a file: ./' },
  ])('rejects $name', ({ paths, error }) => {
    expect(() => cleanPayload(new Map(paths.map((p) => [p, file('x')])))).toThrow(error)
  })
})

describe('decodeBase64', () => {
  it.each([
    { text: '', decoded: '' },
    { text: 'YQ==', decoded: 'a' },
    { text: 'YWI=', decoded: 'ab' },
    { text: 'YWJj', decoded: 'abc' },
    { text: 'YQ', decoded: 'a' },
    { text: 'w7w=', decoded: 'ü' },
  ])('decodes "$text"', ({ text, decoded }) => {
    expect(decodeUtf8(decodeBase64(text))).toBe(decoded)
  })

  it.each(['Y', 'YQ=', 'Y Q==', 'YQ==YQ==', '!!!!'])('rejects "%s"', (text) => {
    expect(() => decodeBase64(text)).toThrow('illegal base64 data')
  })

  it('names the key of a value that is not base64', () => {
    expect(() => decodeBase64Values({ good: 'YQ==', bad: '%%' }, 'secret "s" data')).toThrow('secret "s" data key bad: illegal base64 data at input byte 0')
  })
})

describe('keyToPathPayload', () => {
  const entries = new Map<string, string>([
    ['a', 'A'],
    ['b', 'B'],
  ])
  const missingKey = (key: string) => `missing ${key}`

  it.each([
    { name: 'every key without items', items: undefined, optional: false, expected: { a: ['A', 0o644], b: ['B', 0o644] } },
    { name: 'listed items with their modes', items: [{ key: 'a', path: 'x/a', mode: 0o400 }], optional: false, expected: { 'x/a': ['A', 0o400] } },
    { name: 'a missing listed key when optional', items: [{ key: 'a', path: 'a' }, { key: 'zz', path: 'zz' }], optional: true, expected: { a: ['A', 0o644] } },
  ])('projects $name', ({ items, optional, expected }) => {
    const payload = keyToPathPayload(entries, items, 0o644, optional, missingKey)
    expect(Object.fromEntries([...payload].map(([k, v]) => [k, [v.data, v.mode]]))).toEqual(expected)
  })

  it('fails on a missing listed key unless optional', () => {
    expect(() => keyToPathPayload(entries, [{ key: 'zz', path: 'zz' }], 0o644, false, missingKey)).toThrow('missing zz')
  })

  it('keeps a key named __proto__ as a file', () => {
    const payload = keyToPathPayload(new Map([['__proto__', 'p']]), undefined, 0o644, false, missingKey)
    expect([...payload.keys()]).toEqual(['__proto__'])
  })
})

describe('mergePayloads', () => {
  it('joins payloads and rejects a path two of them project', () => {
    expect([...mergePayloads([new Map([['a', file('1')]]), new Map([['b', file('2')]])]).keys()]).toEqual(['a', 'b'])
    expect(() => mergePayloads([new Map([['a/x', file('1')]]), new Map([['a//x', file('2')]])])).toThrow('conflicting duplicate paths: a/x')
  })
})

describe('aggregateErrors', () => {
  it.each([
    { name: 'none', errors: [], message: undefined },
    { name: 'one', errors: [new Error('a')], message: 'a' },
    { name: 'two', errors: [new Error('a'), new Error('b')], message: '[a, b]' },
    { name: 'a repeated one', errors: [new Error('a'), new Error('a')], message: 'a' },
  ])('folds $name', ({ errors, message }) => {
    expect(aggregateErrors(errors)?.message).toBe(message)
  })
})
