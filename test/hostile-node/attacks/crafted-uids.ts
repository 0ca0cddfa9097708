/**
 * Item 2: pod UIDs written by people (static mode). A UID is a path component of
 * `R/pods/<uid>`: traversal (`../../../x`, an absolute path), separators (`a/b`), `.`/`..`, the empty
 * string, control characters and an overlong one must each fail their own pod, with an error, while
 * a good pod beside them is mounted. UIDs that alias a running pod's directory (`victim/../victim`,
 * `./victim`, `victim/`) must not touch it: the victim's emptyDir data survives their deletion and
 * the victim stays mounted.
 */
import { readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { expect, it } from 'vitest'
import { goodPod, podYaml } from '../harness/fixtures.js'
import { type Attack, never, pause, problemsOf } from './common.js'

/** A pod with every kind of volume that writes under the pod directory: disk, tmpfs, configMap files. */
const wide = (name: string, uid: string): string =>
  podYaml({
    name,
    uid,
    volumes: [{ name: 'cache', emptyDir: {} }, { name: 'shm', emptyDir: { medium: 'Memory', sizeLimit: '4Mi' } }, { name: 'cfg', configMap: { name: 'cfg' } }],
    mounts: [
      { name: 'cache', mountPath: '/cache' },
      { name: 'shm', mountPath: '/shm' },
      { name: 'cfg', mountPath: '/cfg' },
    ],
  })
const CONFIG = `${JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'cfg', namespace: 'default' }, data: { k: 'planted' } })}\n`

export const craftedUIDs: Attack = (node) => {
  it('item 2: crafted pod UIDs fail their own pod; a good pod beside them is mounted; nothing lands outside R', async () => {
    const n = node()
    const bad = [
      '../../../x',
      '../../../../../outside/uid-escape',
      `${'../'.repeat(30)}${n.sentinel.slice(1)}/uid`,
      n.sentinel,
      'a/b',
      '..',
      '.',
      '',
      'x'.repeat(300),
      'ctl\nchar',
      'tab\tuid',
      'nul\u0000uid',
    ]
    n.write('cfg.yaml', CONFIG)
    n.write('good.yaml', goodPod('good'))
    for (const [i, uid] of bad.entries()) n.write(`bad-${i}.yaml`, wide(`bad-${i}`, uid))
    await n.start()
    await n.waitMounted('good', 2)
    // Give every bad pod a few sync rounds to do harm.
    await pause(2_000)
    const reported: string[] = []
    for (const [i, uid] of bad.entries()) {
      const problems = await problemsOf(n, uid, `bad-${i}.yaml`)
      if (problems.length === 0) reported.push(`${JSON.stringify(uid)}: no error reported`)
    }
    const mounts = n.mountsUnder(n.base).filter((m) => !m.startsWith(join(n.root, 'pods/good/')))
    expect(mounts, 'mounts of the bad pods').toEqual([])
    expect(readdirSync(join(n.root, 'pods')), 'pod directories').toEqual(['good'])
    expect(reported, 'each bad pod reports its own error').toEqual([])
  }, 90_000)

  it('item 2: UIDs aliasing a running pod (victim/../victim, ./victim, victim/): deleting them leaves the victim and its data alone', async () => {
    const n = node()
    n.write('cfg.yaml', CONFIG)
    n.write('victim.yaml', wide('victim', 'victim'))
    await n.start()
    await n.waitMounted('victim', 3)
    const volumes = join(n.root, 'pods/victim/volumes')
    const data = [join(volumes, 'kubernetes.io~empty-dir/cache/data'), join(volumes, 'kubernetes.io~empty-dir/shm/data')]
    for (const file of data) writeFileSync(file, `the victim's own data in ${file.slice(volumes.length)}\n`)
    const mountsBefore = n.mountsUnder(join(n.root, 'pods/victim')).sort()
    const remembered = n.remember(data)

    const aliases = ['victim/../victim', './victim', 'victim/', 'victim/.', '../pods/victim']
    for (const [i, uid] of aliases.entries()) n.write(`alias-${i}.yaml`, wide(`alias-${i}`, uid))
    await pause(2_000)
    for (const [i] of aliases.entries()) n.remove(`alias-${i}.yaml`)
    // Teardowns of the aliases, if any, run now: the victim must stay whole all along.
    await never(
      "the victim's mounts changed",
      () => JSON.stringify(n.mountsUnder(join(n.root, 'pods/victim')).sort()) !== JSON.stringify(mountsBefore),
      3_000,
    )
    expect(n.lostSince(remembered).lost, "the victim's data").toEqual([])
    const view = await n.pod('victim')
    expect(view?.volumes.map((v) => v.phase)).toEqual(['mounted', 'mounted', 'mounted'])
    expect(readFileSync(join(volumes, 'kubernetes.io~configmap/cfg/k'), 'utf8')).toBe('planted')
  }, 90_000)
}
