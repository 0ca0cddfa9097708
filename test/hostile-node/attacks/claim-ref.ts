/**
 * Item 8: in static mode claims and volumes have no UIDs, so the PV's `claimRef` must be compared by
 * namespace and name. A claim naming a PV bound to another claim (another name; the same name in
 * another namespace), or a PV with no `claimRef` at all, is refused with an error, as the kubelet
 * refuses it; the PV's rightful claim is mounted, and the PV's data is untouched.
 */
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { expect, it } from 'vitest'
import { podYaml } from '../harness/fixtures.js'
import { type Attack, pause, problemsOf } from './common.js'

const doc = (o: unknown): string => `${JSON.stringify(o)}\n---\n`

function pv(name: string, path: string, claimRef?: { name: string; namespace: string }): string {
  return doc({
    apiVersion: 'v1',
    kind: 'PersistentVolume',
    metadata: { name },
    spec: { capacity: { storage: '1Gi' }, accessModes: ['ReadWriteOnce'], hostPath: { path, type: 'Directory' }, ...(claimRef ? { claimRef } : {}) },
  })
}

function pvc(name: string, volumeName: string, namespace = 'default'): string {
  return doc({
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name, namespace },
    spec: { volumeName, accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
    status: { phase: 'Bound', capacity: { storage: '1Gi' } },
  })
}

/** A pod using `claim` with a subPath, so that a mount it gets is a real bind the kernel shows. */
const claimPod = (uid: string, claim: string): string =>
  podYaml({ name: uid, uid, volumes: [{ name: 'data', persistentVolumeClaim: { claimName: claim } }], mounts: [{ name: 'data', mountPath: '/data', subPath: 'sub' }] })

export const claimRef: Attack = (node) => {
  it('item 8: a claim naming a PV bound to another claim (static mode, no UIDs) is refused with an error', async () => {
    const n = node()
    const data = join(n.outside, 'pv-data')
    mkdirSync(join(data, 'sub'), { recursive: true })
    writeFileSync(join(data, 'sub/owned'), "the owner's data\n")
    n.write(
      'objects.yaml',
      pv('pv-owned', data, { name: 'owner', namespace: 'default' }) +
        pvc('owner', 'pv-owned') +
        pvc('thief', 'pv-owned') +
        pv('pv-other-ns', data, { name: 'shared-name', namespace: 'elsewhere' }) +
        pvc('shared-name', 'pv-other-ns') +
        pv('pv-unbound', data) +
        pvc('squatter', 'pv-unbound'),
    )
    n.write('owner.yaml', claimPod('owner', 'owner'))
    n.write('thief.yaml', claimPod('thief', 'thief'))
    n.write('other-ns.yaml', claimPod('other-ns', 'shared-name'))
    n.write('squatter.yaml', claimPod('squatter', 'squatter'))
    await n.start()
    await n.waitMounted('owner', 1)
    await pause(1_500)
    const wrong: string[] = []
    for (const uid of ['thief', 'other-ns', 'squatter']) {
      const mounted = n.mountsUnder(join(n.root, 'pods', uid))
      const problems = await problemsOf(n, uid)
      if (mounted.length > 0) wrong.push(`${uid}: mounted at ${mounted.join(', ')}`)
      else if (!problems.some((p) => /claim/i.test(p))) wrong.push(`${uid}: no claim error (${JSON.stringify(problems)})`)
    }
    expect(wrong, 'claims not bound to the PV are refused').toEqual([])
  }, 90_000)
}
