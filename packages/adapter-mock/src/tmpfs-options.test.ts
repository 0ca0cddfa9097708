import { isHostError } from '@kubevol/core'
import { describe, expect, it } from 'vitest'
import { parseTmpfsOptions } from './tmpfs-options.js'

const GiB = 2 ** 30
const memory = 8 * GiB

describe('parseTmpfsOptions', () => {
  it.each([
    { case: 'no size: half of memory', options: [], capacityBytes: 4 * GiB },
    { case: 'plain bytes, rounded up to a page', options: ['size=1000'], capacityBytes: 4096 },
    { case: 'a k suffix', options: ['size=64k'], capacityBytes: 64 * 1024 },
    { case: 'an M suffix (any case)', options: ['size=64M'], capacityBytes: 64 * 2 ** 20 },
    { case: 'a g suffix', options: ['size=2g'], capacityBytes: 2 * GiB },
    { case: 'a share of memory', options: ['size=25%'], capacityBytes: 2 * GiB },
    { case: 'size=0, no limit', options: ['size=0'], capacityBytes: memory },
    { case: 'the last size wins', options: ['size=1m', 'size=2m'], capacityBytes: 2 * 2 ** 20 },
  ])('$case', ({ options, capacityBytes }) => {
    expect(parseTmpfsOptions(options, memory).capacityBytes).toBe(capacityBytes)
  })

  it('reads mode (octal), uid, gid and nr_inodes', () => {
    expect(parseTmpfsOptions(['mode=0755', 'uid=1000', 'gid=2000', 'nr_inodes=10k'], memory)).toMatchObject({
      mode: 0o755,
      uid: 1000,
      gid: 2000,
      inodeLimit: 10 * 1024,
    })
  })

  it.each(['size=lots', 'size=-1', 'mode=999', 'uid=root'])('refuses %s with EINVAL', (option) => {
    let error: unknown
    try {
      parseTmpfsOptions([option], memory)
    } catch (err) {
      error = err
    }
    expect(isHostError(error, 'EINVAL')).toBe(true)
  })
})
