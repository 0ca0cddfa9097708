// Uncertain states: a mount that timed out may or may not have happened. The manager records it as
// uncertain, mounts it again for a pod that wants it, and tears it down if no pod does.
import { createMemoryHost } from '@kubevol/adapter-mock'
import { uniquePodName } from '@kubevol/core'
import { buildPod, createHarness, fakeVolume } from '@kubevol/core/testing'

export async function run() {
  const h = createHarness({ host: createMemoryHost() })
  const lines: string[] = []
  const stateOf = (podUID: string) => h.manager.snapshot().mounted.find((m) => m.podUID === podUID)?.mountState ?? 'not mounted'

  // 1. The first setUp ends uncertain, the pod still wants the volume: it is mounted again.
  h.plugin.fail('setUp', { kind: 'uncertain', times: 1, message: 'injected: mount timed out' })
  h.start()
  const web = buildPod({ name: 'web', volumes: [fakeVolume('data')] })
  h.pods.setPod(web)
  await h.advanceUntil(() => stateOf(web.metadata.uid!) === 'uncertain')
  lines.push(`web/data after the timeout: ${stateOf(web.metadata.uid!)}`)
  await h.advanceUntil(() => stateOf(web.metadata.uid!) === 'mounted')
  lines.push(`web/data after the retry:   ${stateOf(web.metadata.uid!)}`)

  // 2. Uncertain, and the pod is deleted before any retry: it may be mounted, so it is torn down.
  h.plugin.fail('setUp', { kind: 'uncertain', times: 1, message: 'injected: mount timed out' })
  const job = buildPod({ name: 'job', volumes: [fakeVolume('scratch')] })
  h.pods.setPod(job)
  await h.advanceUntil(() => stateOf(job.metadata.uid!) === 'uncertain')
  lines.push(`job/scratch after the timeout: ${stateOf(job.metadata.uid!)}`)
  h.pods.deletePod(job.metadata.uid!)
  await h.advanceUntil(() => !h.manager.hasPossiblyMountedVolumesForPod(uniquePodName(job)))
  const tornDown = h.operations.some((op) => op.name === 'volume_unmount' && op.podName === uniquePodName(job) && op.endedAt !== undefined && !op.error)
  lines.push(`job deleted: unmount ran on the uncertain volume: ${tornDown}`)
  await h.stop()
  return { lines, tornDown }
}
