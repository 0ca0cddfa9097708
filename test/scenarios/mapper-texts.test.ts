/**
 * Block volumes of a plugin that cannot map them: the kubelet's generation error, "... to find
 * BlockVolumeMapper plugin. Volume plugin is nil." as part of the prefix (SPEC §6.1).
 */
import { createBuiltinPlugins } from '@kubevol/core/plugins'
import { buildClaim, buildPod } from '@kubevol/core/testing'
import { afterEach, expect, it } from 'vitest'
import { scenario } from './setup.js'

let current: ReturnType<typeof scenario> | undefined
afterEach(async () => {
  await current?.stop()
  current = undefined
})

it('a raw block claim on a plugin without a block mapper is refused with the kubelet text', async () => {
  const errors: string[] = []
  const logger = { debug() {}, info() {}, warn() {}, error: (message: string) => errors.push(message) }
  const h = (current = scenario({ plugins: createBuiltinPlugins(), manager: { logger } }))
  h.start()
  await h.host.mkdir('/srv/raw', { recursive: true })
  const { pvc, pv } = buildClaim({ claim: 'raw', pv: 'pv-raw', volumeMode: 'Block', pvSource: { hostPath: { path: '/srv/raw' } } })
  h.objects.put('PersistentVolumeClaim', pvc)
  h.objects.put('PersistentVolume', pv)
  h.pods.setPod(buildPod({ uid: 'a', volumes: [{ name: 'raw', persistentVolumeClaim: { claimName: 'raw' } }], devices: ['raw'] }))
  await h.advanceUntil(() => errors.some((e) => e.startsWith('MapVolume.')))
  expect(errors.find((e) => e.startsWith('MapVolume.'))).toBe(
    'MapVolume.FindMapperPluginBySpec failed to find BlockVolumeMapper plugin. Volume plugin is nil. for volume "pv-raw" (UniqueName: "kubernetes.io/host-path/a-pv-raw") pod "pod-1" (UID: "a")',
  )
})
