import { describe, expect, it } from 'vitest'
import { sha256Hex } from './sha256.js'

describe('sha256Hex', () => {
  it.each([
    { name: 'empty', input: '', hex: 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' },
    { name: 'abc', input: 'abc', hex: 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad' },
    {
      name: 'two blocks',
      input: 'abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq',
      hex: '248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1',
    },
    { name: 'one million a', input: 'a'.repeat(1_000_000), hex: 'cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0' },
  ])('$name', ({ input, hex }) => {
    expect(sha256Hex(input)).toBe(hex)
  })
})
