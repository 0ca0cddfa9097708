/**
 * Item 4: symlinks put in place of directories kubevol owns, at every level of
 * `R/pods/<uid>/volumes/<plugin>/<volume>`, pointing at directories elsewhere that look like pod
 * directories (the canary tree has `volumes/kubernetes.io~empty-dir/cache/data` and
 * `pods/od/volumes/...`). Then `kubevol gc`, an agent start-up (reconstruction), its orphan
 * cleanup, and the same for a pod that was really mounted and whose directory was swapped while the
 * agent was down. Promise: kubevol never follows them; every target keeps its data.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, renameSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { expect, it } from 'vitest'
import { podYaml } from '../harness/fixtures.js'
import { type Attack, pause } from './common.js'

const EMPTY_DIR = 'volumes/kubernetes.io~empty-dir'

/** Symlinks at each level of a pod directory, into the canary tree (`base/canary`). */
function plantSymlinks(pods: string, canary: string): void {
  mkdirSync(pods, { recursive: true })
  symlinkSync(join(canary, 'pods/od'), join(pods, 'od'))
  symlinkSync(canary, join(pods, 'od2'))
  mkdirSync(join(pods, 'deep1'))
  symlinkSync(join(canary, 'volumes'), join(pods, 'deep1/volumes'))
  mkdirSync(join(pods, 'deep2/volumes'), { recursive: true })
  symlinkSync(join(canary, EMPTY_DIR), join(pods, 'deep2', EMPTY_DIR))
  mkdirSync(join(pods, 'deep3', EMPTY_DIR), { recursive: true })
  symlinkSync(join(canary, EMPTY_DIR, 'cache'), join(pods, 'deep3', EMPTY_DIR, 'cache'))
  // The symlinked pod directory next to a real volume-subpaths directory.
  mkdirSync(join(pods, 'deep4/volume-subpaths/cache/main'), { recursive: true })
  symlinkSync(join(canary, 'nested'), join(pods, 'deep4/volume-subpaths/cache/main/0'))
}

export const symlinkSwaps: Attack = (node) => {
  it('item 4: symlinks at every level of a pod directory survive kubevol gc, a start-up and an orphan cleanup, targets intact', async () => {
    const n = node()
    plantSymlinks(join(n.root, 'pods'), join(n.base, 'canary'))
    const canaries = n.remember(n.canaries)
    const gc = await n.kubevol('gc', '--pod-manifest-path', n.manifests, '-o', 'json')
    // Refusing to remove them is fine; deleting through them is not (the audit checks the canaries).
    expect(gc.stderr).not.toMatch(/TypeError|RangeError|at .*\.js:\d+/)
    await n.start()
    // Reconstruction runs at start-up; the orphan cleanup on the agent's 10 s housekeeping timer.
    await pause(11_000)
    await n.stop()
    await n.start()
    await pause(1_000)
    expect(n.lostSince(canaries).lost, 'files deleted through a symlink').toEqual([])
  }, 90_000)

  it('item 4: a mounted pod whose directories are swapped for symlinks while the agent is down is torn down without following them', async () => {
    const n = node()
    const canary = join(n.base, 'canary')
    const canaries = n.remember(n.canaries)
    n.write('swap.yaml', podYaml({ name: 'swap', uid: 'swap', volumes: [{ name: 'cache', emptyDir: {} }], mounts: [{ name: 'cache', mountPath: '/c', subPath: 'logs' }] }))
    n.write('swap2.yaml', podYaml({ name: 'swap2', uid: 'swap2', volumes: [{ name: 'cache', emptyDir: {} }], mounts: [{ name: 'cache', mountPath: '/c' }] }))
    await n.start()
    await n.waitMounted('swap', 1)
    await n.waitMounted('swap2', 1)
    await n.stop()
    // The subPath bind's directory and a whole pod directory replaced by symlinks into the canaries.
    const subpaths = join(n.root, 'pods/swap/volume-subpaths/cache/main')
    const dir2 = join(n.root, 'pods/swap2')
    execFileSync('umount', [join(subpaths, '0')])
    renameSync(join(subpaths, '0'), join(subpaths, '0-moved'))
    symlinkSync(join(canary, 'nested'), join(subpaths, '0'))
    renameSync(dir2, `${dir2}-moved`)
    symlinkSync(join(canary, 'pods/od'), dir2)
    writeFileSync(join(n.root, 'pods/swap', EMPTY_DIR, 'cache/own'), 'the pod may lose this\n')
    n.remove('swap.yaml')
    n.remove('swap2.yaml')
    // Start-up reconstructs both pods' volumes from the disk and tears them down at once.
    await n.start()
    await pause(3_000)
    await n.stop()
    const gc = await n.kubevol('gc', '--pod-manifest-path', n.manifests)
    expect(gc.stderr).not.toMatch(/TypeError|RangeError|at .*\.js:\d+/)
    expect(n.lostSince(canaries).lost, 'files deleted through a symlink').toEqual([])
  }, 90_000)
}
