import { describe, expect, it } from 'vitest'
import type { FileInfo, Host } from '../host/host.js'
import { createPaths } from '../paths.js'
import { assertTearDownChain, findChainProblem } from './pod-dir-chain.js'

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

describe('assertTearDownChain', () => {
  function countingHost(answers: Readonly<Record<string, Answer>> = {}) {
    const asked: string[] = []
    const host = {
      async lstat(path: string): Promise<FileInfo | null> {
        asked.push(path)
        const answer = answers[path] ?? 'directory'
        return answer === 'missing' ? null : info(answer as FileInfo['type'])
      },
    } as unknown as Host
    return { host, asked }
  }
  const volume = (name: string) => ({ ...ref, volumeName: name })

  it('shares one check among the volumes of a pod and plugin asked together', async () => {
    const { host, asked } = countingHost()
    await Promise.all(['a', 'b', 'c'].map((name) => assertTearDownChain(host, paths, volume(name))))
    expect(asked).toEqual(LEVELS)
    // Another plugin, another pod or the block layout: levels of their own.
    await Promise.all([
      assertTearDownChain(host, paths, volume('d')),
      assertTearDownChain(host, paths, { ...volume('e'), pluginName: 'kubernetes.io/host-path' }),
      assertTearDownChain(host, paths, { ...volume('f'), podUID: 'uid-2' }),
      assertTearDownChain(host, paths, { ...volume('g'), block: true }),
    ])
    expect(asked.length).toBe(LEVELS.length * 5)
  })

  it('checks anew in a later run of microtasks', async () => {
    const { host, asked } = countingHost()
    await assertTearDownChain(host, paths, volume('a'))
    await assertTearDownChain(host, paths, volume('b'))
    expect(asked.length).toBe(2 * LEVELS.length)
  })

  it('names each volume in the refusal of a shared check', async () => {
    const { host } = countingHost({ [LEVELS[1] as string]: 'symlink' })
    const results = await Promise.allSettled(['a', 'b'].map((name) => assertTearDownChain(host, paths, volume(name))))
    expect(results.map((r) => (r.status === 'rejected' ? (r.reason as Error).message : 'ok'))).toEqual([
      `refusing to tear down volume "a" of pod "uid-1": ${LEVELS[1]} is a symlink, not a directory; nothing was removed`,
      `refusing to tear down volume "b" of pod "uid-1": ${LEVELS[1]} is a symlink, not a directory; nothing was removed`,
    ])
  })

  it('says whether the pod has no volume-subpaths directory (missing itself, or under a missing pod directory)', async () => {
    const subPaths = LEVELS[6] as string
    expect(await assertTearDownChain(countingHost().host, paths, volume('a'))).toEqual({ subPathsMissing: false })
    expect(await assertTearDownChain(countingHost({ [subPaths]: 'missing' }).host, paths, volume('a'))).toEqual({ subPathsMissing: true })
    expect(await assertTearDownChain(countingHost({ [LEVELS[1] as string]: 'missing' }).host, paths, volume('a'))).toEqual({ subPathsMissing: true })
    // Another level missing says nothing about it.
    expect(await assertTearDownChain(countingHost({ [LEVELS[2] as string]: 'missing', [LEVELS[5] as string]: 'missing' }).host, paths, volume('a'))).toEqual({ subPathsMissing: false })
  })

  it('does not share between two hosts', async () => {
    const one = countingHost()
    const two = countingHost({ [LEVELS[2] as string]: 'file' })
    const results = await Promise.allSettled([assertTearDownChain(one.host, paths, volume('a')), assertTearDownChain(two.host, paths, volume('a'))])
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected'])
  })
})
