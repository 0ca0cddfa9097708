/**
 * Item 11: broken mounts under a pod's volumes, where every lookup fails with ENOTCONN (a FUSE
 * daemon killed with SIGKILL): a subPath bind of a hostPath on FUSE, and a FUSE mount stacked over
 * a Memory emptyDir's mount point. Promise: the kubelet's "corrupted mount" handling: the pod's
 * tear-down completes (unmounting without the checks that fail), and nothing is left mounted.
 */
import { join } from 'node:path'
import { expect, it } from 'vitest'
import { podYaml, startFuse } from '../harness/fixtures.js'
import type { Attack } from './common.js'

export const brokenMounts: Attack = (node) => {
  it('item 11: a subPath bind of a FUSE mount whose daemon was killed (ENOTCONN): the tear-down completes, mount gone', async () => {
    const n = node()
    const fuse = startFuse(n, 'dead', { 'sub/file': 'on fuse\n' })
    n.write(
      'dead.yaml',
      podYaml({ name: 'dead', uid: 'dead', volumes: [{ name: 'fuse', hostPath: { path: fuse.mountPoint } }], mounts: [{ name: 'fuse', mountPath: '/f', subPath: 'sub' }] }),
    )
    await n.start()
    await n.waitMounted('dead', 1)
    expect(n.mountsUnder(join(n.root, 'pods/dead')).length).toBe(1)
    fuse.kill()
    n.remove('dead.yaml')
    await n.waitGone('dead', 20_000)
    expect(n.mountsUnder(join(n.root, 'pods/dead'))).toEqual([])
  }, 90_000)

  it("item 11: a FUSE mount killed over a Memory emptyDir's mount point (ENOTCONN): the tear-down completes, mounts gone", async () => {
    const n = node()
    n.write(
      'over.yaml',
      podYaml({ name: 'over', uid: 'over', volumes: [{ name: 'shm', emptyDir: { medium: 'Memory', sizeLimit: '4Mi' } }], mounts: [{ name: 'shm', mountPath: '/shm' }] }),
    )
    await n.start()
    await n.waitMounted('over', 1)
    const shm = join(n.root, 'pods/over/volumes/kubernetes.io~empty-dir/shm')
    const fuse = startFuse(n, 'over', { file: 'on fuse\n' }, shm)
    expect(n.mountsUnder(shm).length).toBe(2)
    fuse.kill()
    n.remove('over.yaml')
    await n.waitGone('over', 20_000)
    expect(n.mountsUnder(join(n.root, 'pods/over'))).toEqual([])
  }, 90_000)
}
