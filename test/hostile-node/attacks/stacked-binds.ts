/**
 * Item 1: binds stacked over a pod's subPath bind (`volume-subpaths/<vol>/<container>/0`), once,
 * twice, and twice with an agent restart in between; then the pod is deleted. Promise: cleaning
 * subPaths never deletes through a mount: the hostPath's `data/` and the stacked directory keep
 * every file, and the pod's teardown still completes with nothing left mounted.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { expect, it } from 'vitest'
import { podYaml } from '../harness/fixtures.js'
import type { Attack } from './common.js'

const files = (dir: string, names: string[]): string[] => {
  mkdirSync(dir, { recursive: true })
  return names.map((n) => {
    writeFileSync(join(dir, n), `${n} in ${dir.slice(dir.lastIndexOf('/') + 1)}\n`)
    return join(dir, n)
  })
}

export const stackedBinds: Attack = (node) => {
  const cases = [
    { label: 'once', stack: 1, restart: false },
    { label: 'twice', stack: 2, restart: false },
    { label: 'twice, with an agent restart in between', stack: 2, restart: true },
  ]
  for (const c of cases) {
    it(`item 1: a bind stacked ${c.label} over a subPath bind, then the pod deleted: nothing deleted through it`, async () => {
      const n = node()
      const hostDir = join(n.outside, 'host')
      const kept = [...files(join(hostDir, 'data'), ['a', 'b']), ...files(join(n.outside, 'other'), ['x', 'y']), ...files(join(n.outside, 'other2'), ['z'])]
      n.write(
        'sub.yaml',
        podYaml({
          name: 'sub',
          uid: 'sub',
          volumes: [{ name: 'host', hostPath: { path: hostDir, type: 'Directory' } }],
          mounts: [{ name: 'host', mountPath: '/data', subPath: 'data' }],
        }),
      )
      await n.start()
      await n.waitMounted('sub', 1)
      const bind = join(n.root, 'pods/sub/volume-subpaths/host/main/0')
      expect(n.mountsUnder(join(n.root, 'pods/sub'))).toEqual([bind])
      const remembered = n.remember(kept)

      // What a process on the node (or a container with mount rights) stacks over the bind.
      execFileSync('mount', ['--bind', join(n.outside, 'other'), bind])
      if (c.stack === 2 && !c.restart) execFileSync('mount', ['--bind', join(n.outside, 'other2'), bind])
      if (c.restart) {
        await n.stop()
        execFileSync('mount', ['--bind', join(n.outside, 'other2'), bind])
        await n.start()
        await n.waitMounted('sub', 1)
      }
      n.remove('sub.yaml')
      let gone: Error | undefined
      await n.waitGone('sub', 20_000).catch((err: Error) => (gone = err))
      expect(n.lostSince(remembered).lost, 'files deleted through the stacked bind').toEqual([])
      expect(gone?.message, 'the pod teardown completes').toBeUndefined()
      expect(n.mountsUnder(join(n.root, 'pods')), 'mounts left under pods/').toEqual([])
    }, 90_000)
  }
}
