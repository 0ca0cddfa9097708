/**
 * Mount references of a directory that is not itself a mount point (mount-utils GetMountRefs,
 * SPEC §8.3): a local PV on a plain directory is bound into each pod, and the kubelet's local plugin
 * looks up those binds to warn when a second pod asks for another fsGroup (SPEC §7.5).
 */
import type { Volume } from '@kubevol/core'
import { createBuiltinPlugins } from '@kubevol/core/plugins'
import { buildClaim, buildPod } from '@kubevol/core/testing'
import { afterEach, expect, it } from 'vitest'
import { scenario } from './setup.js'

let current: ReturnType<typeof scenario> | undefined
afterEach(async () => {
  await current?.stop()
  current?.host.assertNoViolations()
  current = undefined
})

it('a second pod with another fsGroup on a local directory already bound into a pod gets AlreadyMountedVolume', async () => {
  const h = scenario({ plugins: createBuiltinPlugins() })
  current = h
  h.start()
  await h.host.mkdir('/mnt/disks/ssd0', { recursive: true })
  const { pvc, pv } = buildClaim({ claim: 'local', pv: 'pv-dir', pvSource: { local: { path: '/mnt/disks/ssd0' } } })
  h.objects.put('PersistentVolumeClaim', pvc)
  h.objects.put('PersistentVolume', pv)
  const volumes: Volume[] = [{ name: 'data', persistentVolumeClaim: { claimName: 'local' } }]
  await h.addPodAndWait(buildPod({ uid: 'a', fsGroup: 1000, volumes }))
  expect(await h.host.mountReferences('/mnt/disks/ssd0')).toHaveLength(1)
  expect(h.events.filter((e) => e.reason === 'AlreadyMountedVolume')).toEqual([])
  await h.addPodAndWait(buildPod({ uid: 'b', fsGroup: 2000, volumes }))
  const warnings = h.events.filter((e) => e.reason === 'AlreadyMountedVolume')
  expect(warnings).toHaveLength(1)
  expect(warnings[0]).toMatchObject({ type: 'Warning', message: expect.stringContaining('The requested fsGroup is 2000') })
  expect(warnings[0]?.message).toContain('has GID 1000. The volume may not be shareable.')
})
