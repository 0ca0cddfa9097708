/**
 * Item 7: a fileDisk volume's `volumeHandle` names a disk image; what is not a regular file must be
 * refused: a block device in use (a loop device with ext4 mounted elsewhere), a symlink to it, a
 * directory. Promise: each pod fails with an error, no loop device is stacked on the device, nothing
 * of it is mounted under R, and `e2fsck -fn` finds the file system clean after the owner wrote more.
 * A pod with a regular image beside them is mounted (and its loop device detached after deletion,
 * which the audit checks). Same class: an image file that is attached and mounted elsewhere.
 */
import { execFileSync } from 'node:child_process'
import { appendFileSync, mkdirSync, symlinkSync } from 'node:fs'
import { join } from 'node:path'
import { expect, it } from 'vitest'
import { loopsBackedBy, mountTable } from '../harness/audit.js'
import { fsck, podYaml, startInUseDevice } from '../harness/fixtures.js'
import type { HostileNode } from '../harness/node.js'
import { type Attack, pause, problemsOf } from './common.js'

/** A PV of `handle`, its bound claim and a pod using it, as one manifest. */
function diskPod(name: string, handle: string): string {
  const pv = {
    apiVersion: 'v1',
    kind: 'PersistentVolume',
    metadata: { name: `pv-${name}` },
    spec: {
      capacity: { storage: '64Mi' },
      accessModes: ['ReadWriteOnce'],
      csi: { driver: 'filedisk.kubevol.io', volumeHandle: handle, fsType: 'ext4' },
      claimRef: { name: `claim-${name}`, namespace: 'default' },
    },
  }
  const pvc = {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name: `claim-${name}`, namespace: 'default' },
    spec: { volumeName: `pv-${name}`, accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '64Mi' } } },
    status: { phase: 'Bound', capacity: { storage: '64Mi' } },
  }
  const pod = podYaml({ name, uid: name, volumes: [{ name: 'disk', persistentVolumeClaim: { claimName: `claim-${name}` } }], mounts: [{ name: 'disk', mountPath: '/disk' }] })
  return `${JSON.stringify(pv)}\n---\n${JSON.stringify(pvc)}\n---\n${pod}`
}

/** Mounts of `device` (or of a loop device stacked on it) anywhere but `except`. */
const mountsOf = (device: string, except: string): string[] => {
  const stacked = loopsBackedBy([], [device]).map((l) => l.slice(0, l.indexOf(' ')))
  return mountTable()
    .filter((m) => (m.source === device || stacked.includes(m.source)) && m.target !== except)
    .map((m) => `${m.source} at ${m.target}`)
}

async function expectRefused(n: HostileNode, pods: string[]): Promise<void> {
  const silent: string[] = []
  for (const uid of pods) {
    const view = await n.pod(uid)
    if (view?.volumes.some((v) => v.phase === 'mounted')) silent.push(`${uid}: mounted`)
    else if ((await problemsOf(n, uid)).length === 0) silent.push(`${uid}: no error reported`)
  }
  expect(silent, 'each pod is refused with an error').toEqual([])
}

export const inUseDevice: Attack = (node) => {
  it('item 7: a block device in use (and a symlink to it, a directory) as a fileDisk volumeHandle is refused; e2fsck -fn clean', async () => {
    const n = node()
    const owner = startInUseDevice(n, 'owned')
    const link = join(n.outside, 'disk-link')
    symlinkSync(owner.device, link)
    mkdirSync(join(n.outside, 'not-an-image'))
    execFileSync('truncate', ['-s', '64M', join(n.outside, 'good.img')])
    n.write('dev.yaml', diskPod('dev', owner.device))
    n.write('link.yaml', diskPod('link', link))
    n.write('dir.yaml', diskPod('dir', join(n.outside, 'not-an-image')))
    n.write('good.yaml', diskPod('good', join(n.outside, 'good.img')))
    n.exclude(join(n.outside, 'good.img'))
    await n.start()
    await n.waitMounted('good', 1, 30_000)
    await pause(2_000)
    await expectRefused(n, ['dev', 'link', 'dir'])
    expect(loopsBackedBy([], [owner.device]), 'loop devices stacked on the device').toEqual([])
    expect(mountsOf(owner.device, owner.mountPoint), 'mounts of the device besides its owner').toEqual([])

    appendFileSync(join(owner.mountPoint, 'owner-data'), 'more, after kubevol saw the device\n')
    for (const uid of ['dev', 'link', 'dir', 'good']) n.remove(`${uid}.yaml`)
    await n.waitGone('good', 20_000)
    execFileSync('umount', [owner.mountPoint])
    const check = fsck(owner.device)
    expect(check.code, `e2fsck -fn ${owner.device}:\n${check.output}`).toBe(0)
  }, 120_000)

  it('item 7 (same class): an image file attached and mounted elsewhere is refused; e2fsck -fn clean', async () => {
    const n = node()
    const owner = startInUseDevice(n, 'owned')
    n.write('busy.yaml', diskPod('busy', owner.image))
    await n.start()
    await pause(3_000)
    await expectRefused(n, ['busy'])
    expect(mountsOf(owner.device, owner.mountPoint), 'mounts of the image besides its owner').toEqual([])
    appendFileSync(join(owner.mountPoint, 'owner-data'), 'more, after kubevol saw the image\n')
    n.remove('busy.yaml')
    await n.waitGone('busy', 20_000)
    execFileSync('umount', [owner.mountPoint])
    const check = fsck(owner.device)
    expect(check.code, `e2fsck -fn ${owner.device}:\n${check.output}`).toBe(0)
  }, 120_000)
}
