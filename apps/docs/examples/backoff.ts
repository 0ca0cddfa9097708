// The operation executor's backoff: a step that keeps failing is retried after 0.5 s, 1 s, 2 s, 4 s …
// (doubling up to 2 min 2 s), and the pod's volume mounts as soon as a retry succeeds.
import { createMemoryHost } from '@kubevol/adapter-mock'
import { buildPod, createHarness, fakeVolume } from '@kubevol/core/testing'

export async function run() {
  const h = createHarness({ host: createMemoryHost() }) // a fake clock: the waits below take no real time
  h.plugin.fail('setUp', { times: 4, message: 'injected: device busy' })
  h.start()
  await h.addPodAndWait(buildPod({ name: 'web', volumes: [fakeVolume('data')] }))
  await h.stop()

  const lines: string[] = []
  const delays: number[] = []
  let lastFailure: number | undefined
  const t0 = h.operations[0]?.startedAt ?? 0
  const t = (ms: number) => `t=${String(ms - t0).padStart(5)} ms`
  for (const op of h.operations) {
    if (op.name !== 'volume_mount') continue
    if (op.endedAt === undefined) {
      const wait = lastFailure === undefined ? '' : ` (retry ${op.startedAt - lastFailure} ms after the failure)`
      if (lastFailure !== undefined) delays.push(op.startedAt - lastFailure)
      lines.push(`${t(op.startedAt)}  start ${op.name}${wait}`)
    } else if (op.error) {
      lastFailure = op.endedAt
      lines.push(`${t(op.endedAt)}  failed: ${op.error.split(' : ').pop()}`)
    } else lines.push(`${t(op.endedAt)}  mounted`)
  }
  return { lines, delays }
}
