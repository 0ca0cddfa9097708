// Desired and actual state, one pass at a time: the populator fills the desired state, each reconcile
// pass starts what the difference calls for, and the outcomes land in the actual state.
import { createMemoryHost } from '@kubevol/adapter-mock'
import { type VolumeManager, uniquePodName } from '@kubevol/core'
import { buildPod, createHarness, fakeVolume } from '@kubevol/core/testing'

function describe(manager: VolumeManager): string {
  const s = manager.snapshot()
  const attached = s.attached.map((a) => a.volumeName.split('-').pop())
  const mounted = s.mounted.filter((m) => m.mountState === 'mounted').map((m) => m.outerVolumeSpecName)
  return `desired [${s.desired.map((d) => d.outerVolumeSpecNames[0]).join(', ')}]  attached [${attached.join(', ')}]  mounted [${mounted.join(', ')}]`
}

export async function run() {
  // The harness wires a manager on a fake clock with in-memory sources and a fake plugin.
  // It is not started: this example calls the passes by hand (the loop only schedules them).
  const { manager, pods } = createHarness({ host: createMemoryHost() })
  const lines: string[] = []
  const started: string[] = []
  manager.subscribe((e) => {
    if (e.type === 'operation' && e.operation.endedAt === undefined) started.push(e.operation.name)
  })
  // Runs passes until one starts nothing, printing what each one started and the states after it.
  const converge = async (): Promise<void> => {
    for (let pass = 1; ; pass++) {
      started.length = 0
      manager.reconcileOnce()
      if (started.length === 0) return
      await manager.waitForIdle()
      lines.push(`  pass ${pass} started [${started.join(', ')}] → ${describe(manager)}`)
    }
  }

  const pod = buildPod({ name: 'db', volumes: [fakeVolume('data'), fakeVolume('logs')] })
  pods.setPod(pod)
  lines.push(`pod db added:        ${describe(manager)}`)
  await manager.populateOnce()
  lines.push(`populateOnce():      ${describe(manager)}`)
  await converge()

  pods.deletePod(pod.metadata.uid!)
  await manager.populateOnce()
  lines.push(`pod deleted, populateOnce(): ${describe(manager)}`)
  await converge()
  const stillMounted = manager.hasPossiblyMountedVolumesForPod(uniquePodName(pod))
  lines.push(`anything of db possibly mounted: ${stillMounted}`)
  return { lines, stillMounted }
}
