import { describe, expect, it } from 'vitest'
import { flatString } from './flat-string.js'

describe('flatString', () => {
  it.each([
    { name: 'a built name', text: ['kubernetes.io/empty-dir', '/', 'uid-1', '-', 'scratch'].join('') },
    { name: 'empty', text: '' },
    { name: 'text not in NFC form', text: 'cafe\u0301' },
    { name: 'an unpaired surrogate', text: 'a\ud800b' },
  ])('keeps the text of $name', ({ text }) => {
    expect(flatString(text)).toBe(text)
  })
})
