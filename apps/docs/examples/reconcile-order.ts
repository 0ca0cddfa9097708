// Why the pass is ordered: pod A leaves and pod B arrives in one step; B wants disk-1, which A had.
// Each pass unmounts what no pod wants first, then mounts what pods want, and only then unmounts
// devices and detaches what no pod holds any more.
import { createMemoryHost } from '@kubevol/adapter-mock'
import { buildPod, createHarness, fakeVolume } from '@kubevol/core/testing'

export async function run() {
  // Attachable fake disks; the manager is driven pass by pass (not started) to show each pass.
  const { manager, pods, plugin } = createHarness({ host: createMemoryHost(), fake: { attachable: true } })
  const started: string[] = []
  manager.subscribe((e) => {
    if (e.type !== 'operation' || e.operation.endedAt !== undefined) return
    const pod = e.operation.podName ? e.operation.podName.split('/').pop() : 'node'
    started.push(`${e.operation.name}(${pod}, ${e.operation.volumeName.split('/').pop()})`)
  })
  const passes: string[][] = []
  const converge = async (): Promise<void> => {
    await manager.populateOnce()
    for (;;) {
      started.length = 0
      manager.reconcileOnce()
      if (started.length === 0) return
      passes.push([...started])
      await manager.waitForIdle()
    }
  }

  pods.setPod(buildPod({ name: 'a', uid: 'pod-a', volumes: [fakeVolume('data', 'disk-1'), fakeVolume('old', 'disk-2')] }))
  await converge()
  passes.length = 0

  // In the same turn: pod A goes, pod B arrives wanting disk-1 (and not disk-2).
  pods.deletePod('pod-a')
  pods.setPod(buildPod({ name: 'b', uid: 'pod-b', volumes: [fakeVolume('data', 'disk-1')] }))
  await converge()

  const lines = passes.map((ops, i) => `pass ${i + 1}: ${ops.join(', ')}`)
  lines.push(`still attached: [${[...plugin.attached.keys()].join(', ')}]`)
  return { lines, passes, attached: [...plugin.attached.keys()] }
}
