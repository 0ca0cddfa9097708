/**
 * Item 3: container names and volume names are path components of a subPath bind
 * (`volume-subpaths/<volume>/<container>/<index>`). Names with traversal (aimed at R, at the node's
 * temporary directory and at an absolute path outside it), separators, `.` and `..`, in regular and
 * init containers, must each fail their own pod with an error; a good pod with a subPath beside
 * them is mounted; no bind lands anywhere, and after deletion nothing is left.
 */
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import { expect, it } from 'vitest'
import { type Attack, pause, problemsOf } from './common.js'

interface Crafted {
  readonly container?: string
  readonly initContainer?: string
  readonly volume?: string
}

function subPathPod(name: string, c: Crafted): string {
  const volume = c.volume ?? 'v'
  const mount = { name: volume, mountPath: '/m', subPath: 'sub' }
  const pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: 'default', uid: name },
    spec: {
      ...(c.initContainer !== undefined ? { initContainers: [{ name: c.initContainer, image: 'busybox', volumeMounts: [mount] }] } : {}),
      containers: [{ name: c.container ?? 'main', image: 'busybox', volumeMounts: [mount] }],
      volumes: [{ name: volume, emptyDir: {} }],
    },
  }
  return `${JSON.stringify(pod)}\n`
}

export const craftedNames: Attack = (node) => {
  it('item 3: crafted container and volume names with a subPath fail their own pod; no bind lands anywhere', async () => {
    const n = node()
    // From volume-subpaths/<volume>/, 4 levels up is R and 8 is the node's temporary directory.
    const crafted: Crafted[] = [
      { container: '../../../../tmp/x/target' },
      { container: `${'../'.repeat(8)}outside/container-escape` },
      { container: `${'../'.repeat(40)}${n.sentinel.slice(1)}/target` },
      { container: 'a/b' },
      { container: '..' },
      { container: '.' },
      { container: 'UPPER_and_underscore' },
      { initContainer: `${'../'.repeat(8)}outside/init-escape` },
      { volume: '..' },
      { volume: 'a/b' },
      { volume: `${'../'.repeat(3)}volume-escape` },
    ]
    for (const [i, c] of crafted.entries()) n.write(`bad-${i}.yaml`, subPathPod(`bad-${i}`, c))
    n.write('good.yaml', subPathPod('good', {}))
    await n.start()
    await n.waitMounted('good', 1)
    expect(n.mountsUnder(join(n.root, 'pods/good'))).toEqual([join(n.root, 'pods/good/volume-subpaths/v/main/0')])
    await pause(2_000)

    const silent: string[] = []
    for (const [i, c] of crafted.entries()) {
      const problems = await problemsOf(n, `bad-${i}`, `bad-${i}.yaml`)
      const view = await n.pod(`bad-${i}`)
      if (problems.length === 0) silent.push(`${JSON.stringify(c)}: no error reported (phases ${JSON.stringify(view?.volumes.map((v) => v.phase))})`)
    }
    const stray = n.mountsUnder(n.base).filter((m) => !m.startsWith(join(n.root, 'pods/good/')))
    expect(stray, 'binds of the crafted pods').toEqual([])
    expect(silent, 'each crafted pod reports its own error').toEqual([])

    for (const [i] of crafted.entries()) n.remove(`bad-${i}.yaml`)
    n.remove('good.yaml')
    await n.waitGone('good')
    expect(n.mountsUnder(n.base), 'mounts after every pod is deleted').toEqual([])
    expect(readdirSync(n.root).filter((e) => e === 'tmp'), 'R/tmp made by a container name').toEqual([])
  }, 90_000)
}
