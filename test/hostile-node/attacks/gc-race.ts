/**
 * Item 9: `kubevol gc` against the root of a running agent: without `--pod-manifest-path` (it knows no
 * pods, so every pod looks orphaned) and with a manifest directory that does not have the pod. It
 * must refuse while an agent holds the root, and the live pod keeps its data and its mounts. Once
 * the agent has stopped (its mounts left in place, as a stop does), `kubevol gc` without
 * `--pod-manifest-path` still must not remove what the journal says is set up; a restarted agent finds the
 * pod's data where it was.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { expect, it } from 'vitest'
import { type Snapshot, compareSnapshots, mountTable, snapshot } from '../harness/audit.js'
import { podYaml } from '../harness/fixtures.js'
import type { HostileNode } from '../harness/node.js'
import type { Attack } from './common.js'

/** Pods with disk-backed volumes (nothing mounted under their directories), and one with a tmpfs. */
const LIVE =
  podYaml({
    name: 'live',
    uid: 'live',
    volumes: [{ name: 'cache', emptyDir: {} }, { name: 'empty', emptyDir: {} }, { name: 'cfg', configMap: { name: 'cfg' } }],
    mounts: [
      { name: 'cache', mountPath: '/cache' },
      { name: 'empty', mountPath: '/empty' },
      { name: 'cfg', mountPath: '/cfg' },
    ],
  }) +
  '---\n' +
  podYaml({ name: 'live-mem', uid: 'live-mem', volumes: [{ name: 'shm', emptyDir: { medium: 'Memory', sizeLimit: '4Mi' } }], mounts: [{ name: 'shm', mountPath: '/shm' }] }) +
  '---\n' +
  // A fresh pod: its only volume is still empty, so nothing would stop a removal but the rules.
  podYaml({ name: 'live-empty', uid: 'live-empty', volumes: [{ name: 'fresh', emptyDir: {} }], mounts: [{ name: 'fresh', mountPath: '/fresh' }] }) +
  '---\n' +
  `${JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'cfg', namespace: 'default' }, data: { k: 'v' } })}\n`

const podsTree = (n: HostileNode): Snapshot => snapshot(join(n.root, 'pods'), new Set(), new Set(mountTable().map((m) => m.target)))
const changes = (before: Snapshot, after: Snapshot): { added: string[]; lost: string[] } => {
  const { added, lost } = compareSnapshots(before, after)
  return { added, lost }
}

export const gcRace: Attack = (node) => {
  it('item 9: kubevol gc against a running agent is refused; the live pod keeps its data and mounts', async () => {
    const n = node()
    n.write('live.yaml', LIVE)
    await n.start()
    await n.waitMounted('live', 3)
    await n.waitMounted('live-mem', 1)
    await n.waitMounted('live-empty', 1)
    const data = [join(n.root, 'pods/live/volumes/kubernetes.io~empty-dir/cache/data'), join(n.root, 'pods/live-mem/volumes/kubernetes.io~empty-dir/shm/data')]
    for (const f of data) writeFileSync(f, `live data in ${f.slice(n.root.length)}\n`)
    const remembered = n.remember([...data, join(n.root, 'pods/live/volumes/kubernetes.io~configmap/cfg/k')])
    const mounts = n.mountsUnder(join(n.root, 'pods')).sort()
    // Every directory and file of the live pods, empty volume directories and plugin markers included.
    const tree = podsTree(n)

    const bare = await n.kubevol('gc', '-o', 'json')
    const emptyManifests = join(n.outside, 'no-pods')
    mkdirSync(emptyManifests)
    n.outsideChanged(emptyManifests)
    const other = await n.kubevol('gc', '--pod-manifest-path', emptyManifests, '-o', 'json')

    expect(n.lostSince(remembered).lost, "the live pod's data").toEqual([])
    expect(changes(tree, podsTree(n)), "the live pods' directories").toEqual({ added: [], lost: [] })
    expect(n.mountsUnder(join(n.root, 'pods')).sort(), "the live pods' mounts").toEqual(mounts)
    expect((await n.pod('live'))?.volumes.map((v) => v.phase)).toEqual(['mounted', 'mounted', 'mounted'])
    expect((await n.pod('live-mem'))?.volumes.map((v) => v.phase)).toEqual(['mounted'])
    for (const [what, r] of [
      ['gc without --pod-manifest-path', bare],
      ['gc with a manifest directory without the pod', other],
    ] as const) {
      expect({ what, refused: r.code !== 0 }, `${what}: exit ${r.code}\n${r.stdout}${r.stderr}`).toEqual({ what, refused: true })
    }
  }, 90_000)

  it('item 9: kubevol gc without --pod-manifest-path after the agent stopped keeps what the journal says is set up', async () => {
    const n = node()
    n.write('live.yaml', LIVE)
    await n.start()
    await n.waitMounted('live', 3)
    await n.waitMounted('live-mem', 1)
    await n.waitMounted('live-empty', 1)
    const cache = join(n.root, 'pods/live/volumes/kubernetes.io~empty-dir/cache/data')
    writeFileSync(cache, 'live data on disk\n')
    writeFileSync(join(n.root, 'pods/live-mem/volumes/kubernetes.io~empty-dir/shm/data'), 'live data in memory\n')
    const remembered = n.remember([cache, join(n.root, 'pods/live-mem/volumes/kubernetes.io~empty-dir/shm/data')])
    await n.stop()
    const tree = podsTree(n)

    const gc = await n.kubevol('gc', '-o', 'json')
    expect(n.lostSince(remembered).lost, `the stopped pod's data after gc (exit ${gc.code}: ${gc.stdout}${gc.stderr})`).toEqual([])
    expect(changes(tree, podsTree(n)), `the stopped pods' directories after gc (exit ${gc.code}: ${gc.stdout}${gc.stderr})`).toEqual({ added: [], lost: [] })
    await n.start()
    await n.waitMounted('live', 3)
    expect(readFileSync(cache, 'utf8')).toBe('live data on disk\n')
  }, 90_000)
}
