import { describe, expect, it } from 'vitest'
import type { PersistentVolume, PersistentVolumeClaim } from '../api/kubernetes.js'
import { buildClaim, buildPod } from '../testing/builders.js'
import { createMemoryObjectReader } from './memory-sources.js'
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

  // Static mode: manifests rarely carry UIDs, and two missing UIDs are no match (a PV bound to
  // `owner` must not be mounted for `thief` because neither object has a UID).
  const noUID = (c: PersistentVolumeClaim): PersistentVolumeClaim => ({ ...c, metadata: { name: c.metadata.name, namespace: c.metadata.namespace } })
  const ref = (claimRef: Record<string, string>) => (p: PersistentVolume): PersistentVolume => ({ ...p, spec: { ...p.spec, claimRef } })

  it.each<{ name: string; edit: Edit; error: string }>([
    {
      name: 'a PV bound to another claim, no UIDs',
      edit: { pvc: noUID, pv: ref({ name: 'owner', namespace: 'default' }) },
      error: 'error processing PVC default/data: found PV object pv1 but its pv.Spec.ClaimRef default/owner does not point to claim default/data',
    },
    {
      name: 'a PV bound to another claim, no namespace in the claimRef',
      edit: { pvc: noUID, pv: ref({ name: 'owner' }) },
      error: 'found PV object pv1 but its pv.Spec.ClaimRef default/owner does not point to claim default/data',
    },
    {
      name: 'a PV bound to the same name in another namespace',
      edit: { pvc: noUID, pv: ref({ name: 'data', namespace: 'other' }) },
      error: 'found PV object pv1 but its pv.Spec.ClaimRef other/data does not point to claim default/data',
    },
    { name: 'a claimRef naming no claim, no UIDs', edit: { pvc: noUID, pv: ref({}) }, error: 'found PV object pv1 but its pv.Spec.ClaimRef default/ does not point to claim default/data' },
    {
      name: 'a claimRef with the UID of the claim but the name of another',
      edit: { pv: ref({ name: 'owner', namespace: 'default', uid: 'uid-pvc-data' }) },
      error: 'found PV object pv1 but its pv.Spec.ClaimRef default/owner does not point to claim default/data',
    },
    { name: 'a claimRef with a UID the claim lacks, naming another', edit: { pvc: noUID, pv: ref({ name: 'owner', uid: 'x' }) }, error: 'ClaimRef default/owner does not point to claim default/data' },
  ])('refuses $name', async ({ edit, error }) => {
    await expect(resolve(edit)).rejects.toThrow(error)
  })

  it.each<{ name: string; edit: Edit }>([
    { name: 'by namespace/name, no UIDs', edit: { pvc: noUID, pv: ref({ name: 'data', namespace: 'default' }) } },
    { name: 'by name, no namespace in the claimRef', edit: { pvc: noUID, pv: ref({ name: 'data' }) } },
    { name: 'by UID, no name in the claimRef', edit: { pv: ref({ uid: 'uid-pvc-data' }) } },
    { name: 'by name, a UID on one side only', edit: { pv: ref({ name: 'data', namespace: 'default' }) } },
  ])('accepts a PV bound to the claim $name', async ({ edit }) => {
    expect((await resolve(edit)).spec.name).toBe('pv1')
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
