/**
 * Item 10: a mount step that fails because its target is missing (a hostPath of type File, Directory
 * or Socket whose path was removed; a local PV whose directory was removed) is a plain failure: the
 * volume is never "uncertain", and deleting the pod tears down nothing (nothing was mounted). The
 * removed path's neighbours (canaries) are intact, and a good pod beside them is mounted.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { expect, it } from 'vitest'
import { goodPod, podYaml } from '../harness/fixtures.js'
import { type Attack, never, pause } from './common.js'

export const missingTarget: Attack = (node) => {
  it('item 10: a mount step failing on a missing target is not "uncertain" and leads to no tear-down', async () => {
    const n = node()
    const dir = join(n.outside, 'host')
    mkdirSync(join(dir, 'gone-dir'), { recursive: true })
    mkdirSync(join(dir, 'local-gone'), { recursive: true })
    writeFileSync(join(dir, 'gone-file'), 'soon removed\n')
    writeFileSync(join(dir, 'neighbour'), 'next to the removed file\n')
    const cases = [
      { uid: 'file', volume: { name: 'v', hostPath: { path: join(dir, 'gone-file'), type: 'File' } } },
      { uid: 'dir', volume: { name: 'v', hostPath: { path: join(dir, 'gone-dir'), type: 'Directory' } } },
      { uid: 'socket', volume: { name: 'v', hostPath: { path: join(dir, 'gone-socket'), type: 'Socket' } } },
      { uid: 'local', volume: { name: 'v', persistentVolumeClaim: { claimName: 'local' } } },
    ]
    n.write(
      'local.yaml',
      [
        {
          apiVersion: 'v1',
          kind: 'PersistentVolume',
          metadata: { name: 'pv-local' },
          spec: { capacity: { storage: '1Gi' }, accessModes: ['ReadWriteOnce'], local: { path: join(dir, 'local-gone') }, claimRef: { name: 'local', namespace: 'default' } },
        },
        {
          apiVersion: 'v1',
          kind: 'PersistentVolumeClaim',
          metadata: { name: 'local', namespace: 'default' },
          spec: { volumeName: 'pv-local', accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
          status: { phase: 'Bound', capacity: { storage: '1Gi' } },
        },
      ]
        .map((o) => JSON.stringify(o))
        .join('\n---\n'),
    )
    n.write('good.yaml', goodPod('good'))
    await n.start()
    await n.waitMounted('good', 2)
    // The targets go away, then the pods that name them come.
    rmSync(join(dir, 'gone-file'))
    rmSync(join(dir, 'gone-dir'), { recursive: true })
    rmSync(join(dir, 'local-gone'), { recursive: true })
    n.outsideChanged()
    for (const c of cases) n.write(`${c.uid}.yaml`, podYaml({ name: c.uid, uid: c.uid, volumes: [c.volume], mounts: [{ name: 'v', mountPath: '/v' }] }))
    const uncertain = async (): Promise<boolean> => {
      for (const c of cases) if ((await n.pod(c.uid))?.volumes.some((v) => v.phase === 'uncertain' || v.mountState === 'uncertain')) return true
      return false
    }
    await never('a volume whose target is missing became "uncertain"', uncertain, 2_500)
    for (const c of cases) expect((await n.pod(c.uid))?.volumes[0]?.phase, c.uid).not.toBe('mounted')
    for (const c of cases) n.remove(`${c.uid}.yaml`)
    for (const c of cases) await n.waitGone(c.uid, 10_000)
    await pause(500)
    const tornDown = n
      .agent!.output()
      .split('\n')
      .filter((l) => /UnmountVolume|TearDown|UnmountDevice/.test(l) && cases.some((c) => l.includes(`(UID: \\"${c.uid}\\")`) || l.includes(`"podUID":"${c.uid}"`)))
    expect(tornDown, 'tear-downs of volumes that were never mounted').toEqual([])
    expect((await n.pod('good'))?.volumes.map((v) => v.phase)).toEqual(['mounted', 'mounted'])
  }, 90_000)
}
