import { describe, expect, it } from 'vitest'
import type { FileInfo, Host } from '../host/host.js'
import { createPaths } from '../paths.js'
import { findChainProblem } from './pod-dir-chain.js'

const paths = createPaths('/var/lib/kubevol')
const ref = { podUID: 'uid-1', pluginName: 'kubernetes.io/empty-dir', block: false }
const LEVELS = [
  '/var/lib/kubevol/pods',
  '/var/lib/kubevol/pods/uid-1',
  '/var/lib/kubevol/pods/uid-1/volumes',
  '/var/lib/kubevol/pods/uid-1/volumes/kubernetes.io~empty-dir',
  '/var/lib/kubevol/pods/uid-1/plugins',
  '/var/lib/kubevol/pods/uid-1/plugins/kubernetes.io~empty-dir',
  '/var/lib/kubevol/pods/uid-1/volume-subpaths',
]
const info = (type: FileInfo['type']): FileInfo => ({ type, mode: 0o755, uid: 0, gid: 0, size: 0, dev: 1, ino: 1, mtimeMs: 0 })
type Answer = FileInfo['type'] | 'missing' | 'error'

/** findChainProblem over a table of answers by path (a directory where none is given). */
function check(answers: Readonly<Record<string, Answer>>, asked: string[] = []): Promise<unknown> {
  const lstat = async (path: string): Promise<FileInfo | null> => {
    asked.push(path)
    const answer = answers[path] ?? 'directory'
    if (answer === 'error') throw new Error(`EACCES: ${path}`)
    return answer === 'missing' ? null : info(answer)
  }
  return findChainProblem({} as Host, paths, ref, lstat)
}

describe('findChainProblem', () => {
  it('asks every level at once and finds nothing when all are directories', async () => {
    const asked: string[] = []
    expect(await check({}, asked)).toBeNull()
    expect(asked).toEqual(LEVELS)
  })

  it('reports the first level that is not a directory, for each level and each kind of entry', async () => {
    for (const [i, level] of LEVELS.entries()) {
      for (const type of ['symlink', 'file', 'socket'] as const) {
        // A symlink at this level and at every level after it: the first is named.
        const answers = Object.fromEntries(LEVELS.slice(i).map((l) => [l, type]))
        expect(await check(answers)).toEqual({ path: level, found: type })
      }
    }
  })

  it('passes a level below a missing one, whatever its own answer', async () => {
    // The pod's directory missing: nothing below it is looked at.
    const below = Object.fromEntries(LEVELS.slice(2).map((l) => [l, 'symlink' as const]))
    expect(await check({ ...below, [LEVELS[1] as string]: 'missing' })).toBeNull()
    // `volumes` missing hides its plugin directory only; `plugins/...` is still checked.
    expect(await check({ [LEVELS[2] as string]: 'missing', [LEVELS[3] as string]: 'symlink', [LEVELS[5] as string]: 'symlink' })).toEqual({
      path: LEVELS[5],
      found: 'symlink',
    })
    // `plugins` missing hides `plugins/<plugin>`, not `volume-subpaths`.
    expect(await check({ [LEVELS[4] as string]: 'missing', [LEVELS[5] as string]: 'error', [LEVELS[6] as string]: 'fifo' })).toEqual({
      path: LEVELS[6],
      found: 'fifo',
    })
  })

  it('names a level whose check failed as unreadable, unless a level before it is the problem', async () => {
    expect(await check({ [LEVELS[3] as string]: 'error' })).toEqual({ path: LEVELS[3], found: 'unreadable', error: `EACCES: ${LEVELS[3]}` })
    expect(await check({ [LEVELS[1] as string]: 'symlink', [LEVELS[3] as string]: 'error' })).toEqual({ path: LEVELS[1], found: 'symlink' })
  })
})
