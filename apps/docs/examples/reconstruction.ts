// Reconstruction: the manager crashes with volumes mounted; a new one on the same node rebuilds its
// actual state from the journal and the pods directory before its first pass, so nothing is
// mounted twice and nothing a pod still uses is torn down.
import { createMemoryHost } from '@kubevol/adapter-mock'
import { createBuiltinPlugins } from '@kubevol/core/plugins'
import { buildPod, createFakeClock, createHarness, fakeVolume } from '@kubevol/core/testing'

export async function run() {
  const host = createMemoryHost() // the node: its file tree and mount table survive the crash
  const clock = createFakeClock()
  const lines: string[] = []
  const keep = buildPod({ name: 'keep', uid: 'uid-keep', volumes: [fakeVolume('data'), { name: 'cache', emptyDir: {} }] })
  const gone = buildPod({ name: 'gone', uid: 'uid-gone', volumes: [fakeVolume('old')] })

  const before = createHarness({ host, clock, plugins: createBuiltinPlugins() })
  before.start()
  await before.addPodAndWait(keep)
  await before.addPodAndWait(gone)
  lines.push(`before the crash: ${host.mountTargets().length} mounts, journal ${before.manager.snapshot().journal?.records ?? 0} records`)
  await before.stop() // the process is gone: nothing was unmounted on the way out

  // The new process: pod "gone" was deleted while no manager ran.
  const after = createHarness({ host, clock, plugins: createBuiltinPlugins() })
  after.pods.setPod(keep)
  // Catch the actual state as reconstruction left it: when the first operation starts.
  let rebuilt: string[] | undefined
  const off = after.manager.subscribe((e) => {
    if (e.type !== 'operation' || rebuilt) return
    rebuilt = after.manager.snapshot().mounted.map((m) => `${m.podUID}/${m.innerVolumeSpecName}: ${m.mountState}${m.reconstructed ? ', reconstructed' : ''}`)
  })
  after.start()
  await after.advanceUntil(() => after.manager.snapshot().statesSynced)
  off()
  lines.push('after the restart, rebuilt from disk:', ...(rebuilt ?? []).sort().map((r) => `  ${r}`))
  await after.advanceUntil(() => after.manager.snapshot().mounted.every((m) => m.podUID === 'uid-keep' && m.mountState === 'mounted'))
  await after.manager.waitForIdle()
  const remounts = after.operations.filter((op) => op.name === 'volume_mount' && op.endedAt !== undefined).length
  const unmounts = after.operations.filter((op) => op.name === 'volume_unmount' && op.endedAt !== undefined).map((op) => op.podName)
  lines.push(`then: ${remounts} mount operations confirmed pod keep's volumes; unmounted: [${unmounts.join(', ')}]`)
  lines.push(`mounts left under pods/: ${host.mountTargets().filter((t) => t.includes('/pods/')).length}`)
  await after.stop()
  host.assertNoViolations()
  return { lines, unmounts, mountsLeft: host.mountTargets().filter((t) => t.includes('/pods/')) }
}
