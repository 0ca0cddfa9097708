import { describe, expect, it } from 'vitest'
import type { PersistentVolume, PersistentVolumeClaim } from '../api/kubernetes.js'
import { buildClaim, buildPod } from '../testing/builders.js'
import { createMemoryObjectReader } from '../testing/memory-sources.js'
import { resolveVolumeSpec } from './volume-spec-resolver.js'

type Edit = { pvc?: (pvc: PersistentVolumeClaim) => PersistentVolumeClaim | undefined; pv?: (pv: PersistentVolume) => PersistentVolume | undefined }

async function resolve(edit: Edit, usedAs = { mount: true, device: false }) {
  const objects = createMemoryObjectReader()
  const { pvc, pv } = buildClaim({ claim: 'data', pv: 'pv1' })
  const editedPvc = edit.pvc ? edit.pvc(pvc) : pvc
  const editedPv = edit.pv ? edit.pv(pv) : pv
  if (editedPvc) objects.put('PersistentVolumeClaim', editedPvc)
  if (editedPv) objects.put('PersistentVolume', editedPv)
  const pod = buildPod({ uid: 'u1', name: 'web', volumes: [{ name: 'v', persistentVolumeClaim: { claimName: 'data' } }] })
  return resolveVolumeSpec(objects, pod, { name: 'v', persistentVolumeClaim: { claimName: 'data' } }, usedAs)
}

describe('resolveVolumeSpec (SPEC §4.3)', () => {
  it('resolves a bound claim to its PV', async () => {
    const { spec, pvc } = await resolve({})
    expect(spec.name).toBe('pv1')
    expect(spec.persistentVolume?.metadata.name).toBe('pv1')
    expect(pvc?.metadata.name).toBe('data')
  })

  it.each<{ name: string; edit: Edit; error: string }>([
    { name: 'claim not found', edit: { pvc: () => undefined }, error: 'error processing PVC default/data: failed to fetch PVC from API server: persistentvolumeclaims "data" not found' },
    { name: 'claim being deleted', edit: { pvc: (c) => ({ ...c, metadata: { ...c.metadata, deletionTimestamp: '2026-01-01T00:00:00Z' } }) }, error: 'error processing PVC default/data: PVC is being deleted' },
    { name: 'claim not bound', edit: { pvc: (c) => ({ ...c, status: { phase: 'Pending' } }) }, error: 'error processing PVC default/data: PVC is not bound' },
    { name: 'claim without volume name', edit: { pvc: (c) => ({ ...c, spec: { ...c.spec, volumeName: '' } }) }, error: 'error processing PVC default/data: PVC has empty pvc.Spec.VolumeName' },
    { name: 'PV not found', edit: { pv: () => undefined }, error: 'error processing PVC default/data: failed to fetch PV pv1 from API server: persistentvolumes "pv1" not found' },
    { name: 'PV without claimRef', edit: { pv: (p) => ({ ...p, spec: { ...p.spec, claimRef: undefined } }) }, error: 'found PV object pv1 but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim' },
    { name: 'PV bound to another claim', edit: { pv: (p) => ({ ...p, spec: { ...p.spec, claimRef: { name: 'data', uid: 'other' } } }) }, error: 'found PV object pv1 but its pv.Spec.ClaimRef.UID other does not point to claim.UID uid-pvc-data' },
  ])('$name', async ({ edit, error }) => {
    await expect(resolve(edit)).rejects.toThrow(error)
  })

  it.each([
    { mode: 'Block' as const, usedAs: { mount: true, device: false }, error: 'volume v has volumeMode Block, but is specified in volumeMounts' },
    { mode: 'Filesystem' as const, usedAs: { mount: false, device: true }, error: 'volume v has volumeMode Filesystem, but is specified in volumeDevices' },
  ])('rejects a $mode PV used the other way', async ({ mode, usedAs, error }) => {
    await expect(resolve({ pv: (p) => ({ ...p, spec: { ...p.spec, volumeMode: mode } }) }, usedAs)).rejects.toThrow(error)
  })

  it('refuses an ephemeral claim the pod does not own', async () => {
    const objects = createMemoryObjectReader()
    const { pvc, pv } = buildClaim({ claim: 'web-scratch', pv: 'pv2' })
    objects.put('PersistentVolumeClaim', pvc)
    objects.put('PersistentVolume', pv)
    const volume = { name: 'scratch', ephemeral: { volumeClaimTemplate: {} } }
    const pod = buildPod({ uid: 'u1', name: 'web', volumes: [volume] })
    await expect(resolveVolumeSpec(objects, pod, volume, { mount: true, device: false })).rejects.toThrow(
      'PVC default/web-scratch was not created for pod default/web (pod is not owner)',
    )
    objects.put('PersistentVolumeClaim', { ...pvc, metadata: { ...pvc.metadata, ownerReferences: [{ kind: 'Pod', uid: 'u1', controller: true }] } })
    const { spec } = await resolveVolumeSpec(objects, pod, volume, { mount: true, device: false })
    expect(spec.name).toBe('pv2')
  })

  it('passes inline volumes through', async () => {
    const { spec, pvc } = await resolveVolumeSpec(createMemoryObjectReader(), buildPod(), { name: 'e', emptyDir: {} }, { mount: true, device: false })
    expect(spec).toEqual({ name: 'e', volume: { name: 'e', emptyDir: {} }, readOnly: false })
    expect(pvc).toBeUndefined()
  })
})
