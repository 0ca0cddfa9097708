import { describe, expect, it } from 'vitest'
import { type NameList, addName, deleteName, maxListLength, nameCount, nameListOf } from './name-list.js'

describe('name lists', () => {
  it.each([
    { name: 'a few names', count: 5 },
    { name: 'exactly as many as an array holds', count: maxListLength },
    { name: 'more than an array holds (a Set)', count: maxListLength + 10 },
  ])('behave as a Set through adds and deletes: $name', ({ count }) => {
    const names = Array.from({ length: count }, (_, i) => `v${i}`)
    const [first, ...rest] = names
    let list: NameList<string> = nameListOf(first as string)
    const set = new Set([first])
    // Each added twice, then every third deleted (and one that is not there), then one added back.
    for (const name of [...rest, ...rest]) {
      list = addName(list, name)
      set.add(name)
    }
    expect([...list]).toEqual([...set])
    for (const name of [...names.filter((_, i) => i % 3 === 0), 'absent']) {
      list = deleteName(list, name)
      set.delete(name)
      expect([...list]).toEqual([...set])
    }
    list = addName(list, 'v0')
    set.add('v0')
    expect([...list]).toEqual([...set])
    expect(nameCount(list)).toBe(set.size)
    expect(Array.isArray(list)).toBe(count <= maxListLength)
  })

  it('never changes an array a reader holds', () => {
    const before = addName(nameListOf('a'), 'b')
    const held = [...before]
    addName(before, 'c')
    deleteName(before, 'a')
    expect([...before]).toEqual(held)
  })
})
