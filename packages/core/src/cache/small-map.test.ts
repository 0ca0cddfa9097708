import { describe, expect, it } from 'vitest'
import { SmallMap } from './small-map.js'

describe('SmallMap', () => {
  it('behaves as a Map through one, two and back to no entries', () => {
    const small = new SmallMap<string, number>()
    const map = new Map<string, number>()
    const steps: [op: 'set' | 'delete', key: string, value?: number][] = [
      ['set', 'a', 1],
      ['set', 'a', 2],
      ['delete', 'b'],
      ['set', 'b', 3],
      ['set', 'c', 4],
      ['delete', 'a'],
      ['set', 'a', 5],
      ['delete', 'b'],
      ['delete', 'c'],
      ['delete', 'a'],
      ['set', 'z', 6],
    ]
    for (const [op, key, value] of steps) {
      const got = op === 'set' ? small.set(key, value as number) : small.delete(key)
      const want = op === 'set' ? map.set(key, value as number) : map.delete(key)
      if (op === 'delete') expect(got).toBe(want)
      expect([...small]).toEqual([...map])
      expect(small.size).toBe(map.size)
      for (const k of ['a', 'b', 'c', 'z']) {
        expect(small.has(k)).toBe(map.has(k))
        expect(small.get(k)).toBe(map.get(k))
      }
      expect([...small.keys()]).toEqual([...map.keys()])
      expect([...small.values()]).toEqual([...map.values()])
      expect([...small.entries()]).toEqual([...map.entries()])
      const seen: [string, number][] = []
      small.forEach((v, k) => {
        seen.push([k, v])
      })
      expect(seen).toEqual([...map])
    }
  })

  it('tells an undefined value from a missing key', () => {
    const small = new SmallMap<string, undefined>()
    small.set('a', undefined)
    expect(small.has('a')).toBe(true)
    expect(small.has('b')).toBe(false)
    expect(small.size).toBe(1)
  })
})
