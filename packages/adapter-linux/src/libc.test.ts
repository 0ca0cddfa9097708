import { describe, expect, it } from 'vitest'
import { maxAsyncCalls } from './libc.js'

describe('koffi calls in flight', () => {
  it('stay within koffi resident call memory on the default pool, and leave room for stuck calls on a bigger one', () => {
    expect(maxAsyncCalls(4)).toBe(8)
    expect(maxAsyncCalls(1)).toBe(8)
    // The host refuses calls once threads - 1 are stuck: more places than that, and some to spare.
    expect(maxAsyncCalls(64)).toBe(68)
    expect(maxAsyncCalls(1024)).toBe(256)
  })
})
