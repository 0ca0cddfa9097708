import { posix } from 'node:path'
import { describe, expect, it } from 'vitest'
import { normalPath } from './normal-path.js'

describe('normalPath', () => {
  it('is posix.resolve for every path built from these parts, normal or not', () => {
    const parts = ['', '.', '..', 'a', '.a', 'a.', '..a', 'kubernetes.io~empty-dir', '...']
    const paths = new Set<string>(['/', '', '.', '..', '//', '///a', 'a/b', './a'])
    for (const x of parts) {
      for (const y of parts) {
        for (const z of parts) {
          for (const lead of ['/', '//', '']) {
            for (const tail of ['', '/', '/.', '//']) paths.add(`${lead}${x}/${y}/${z}${tail}`)
          }
        }
      }
    }
    let unchanged = 0
    for (const path of paths) {
      expect(normalPath(path), JSON.stringify(path)).toBe(posix.resolve(path))
      if (normalPath(path) === path) unchanged++
    }
    // The fast answer is taken, and the class has both kinds.
    expect(unchanged).toBeGreaterThan(10)
    expect(unchanged).toBeLessThan(paths.size)
  })

  it('returns a normal absolute path as it is, without resolving it', () => {
    const path = '/var/lib/kubevol/pods/uid-1/volumes/kubernetes.io~empty-dir/d0'
    expect(normalPath(path)).toBe(path)
  })
})
