/**
 * A host call that never returns leaves only its own volume stuck: the other pod is mounted,
 * `/livez` stays healthy, and `/readyz?verbose`, `/v1/state`, `/v1/pods/<uid>`, the metrics and a
 * Warning event name the stuck volume. When the call returns, everything converges.
 */
import { createMemoryHost } from '@kubevol/adapter-mock'
import { afterEach, describe, expect, it } from 'vitest'
import { get, tempDir, until } from '../test/helpers.js'
import { type Agent, startAgent } from './agent.js'
import type { StoredEvent } from './events/event-store.js'

const pod = (name: string, volume: string) => `apiVersion: v1
kind: Pod
metadata:
  name: ${name}
spec:
  containers:
    - name: main
      image: busybox
      volumeMounts:
        - { name: ${volume}, mountPath: /data }
        - { name: config, mountPath: /config }
  volumes:
    - { name: ${volume}, emptyDir: { medium: Memory } }
    - { name: config, configMap: { name: settings } }
---
`
const SETTINGS = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: fast\n'
const TOKEN = 'stuck-test-token'

const agents: Agent[] = []
const dirs: { cleanup(): void }[] = []
afterEach(async () => {
  for (const agent of agents.splice(0)) await agent.stop()
  for (const d of dirs.splice(0)) d.cleanup()
})

const uidOf = (agent: Agent, name: string) => agent.pods.getPods().find((p) => p.metadata.name === name)?.metadata.uid as string

describe('a hung host call', () => {
  it('leaves only its volume stuck, reported as such, while the rest converges', async () => {
    const host = createMemoryHost()
    const hang = host.faults.hangOn((call) => call.method === 'mount' && /\/volumes\/kubernetes\.io~empty-dir\/hung$/.test(call.path ?? ''))
    const manifests = tempDir()
    dirs.push(manifests)
    manifests.write('settings.yaml', SETTINGS)
    manifests.write('pods.yaml', pod('stuck', 'hung') + pod('web', 'fine'))
    const agent = await startAgent(
      { nodeName: 'n1', mode: 'static', manifestDir: manifests.dir, port: 0, manifestRescanMs: 200, statsPeriodMs: 0, podSyncRetryMs: 50, shutdownGraceMs: 100, stuckOperationMs: 300 },
      { host, authToken: TOKEN, log: { silent: true }, manager: { backoff: { initialMs: 20, maxMs: 200 }, resyncPeriodMs: 500, housekeepingPeriodMs: 0 } as object },
    )
    agents.push(agent)
    await hang.reached()
    await until('web mounted', () => uidOf(agent, 'web') !== undefined && agent.manager.getMountedVolumesForPod(uidOf(agent, 'web')).size === 2)
    const stuckUID = uidOf(agent, 'stuck')
    const volume = `kubernetes.io/empty-dir/${stuckUID}-hung`
    // The stuck pod's other volume is mounted too: only the hung volume waits.
    await until('config of the stuck pod mounted', () => agent.manager.getMountedVolumesForPod(stuckUID).has('config'))

    await until('readyz names the stuck volume', async () => (await get(`${agent.url}/readyz?verbose`, TOKEN)).text.includes(volume))
    const ready = await get(`${agent.url}/readyz?verbose`, TOKEN)
    expect(ready.status).toBe(503)
    expect(ready.text).toMatch(new RegExp(`\\[-\\]operations failed: stuck: volume_mount of ${volume.replace(/[/.]/g, '\\$&')} \\(pod ${stuckUID}\\) running for \\d+s`))
    expect(ready.text).toContain('[+]sources-synced ok')
    const live = await get(`${agent.url}/livez?verbose`, TOKEN)
    expect(live.status).toBe(200)

    const state = (await get(`${agent.url}/v1/state`, TOKEN)).json() as { stuckOperations: { operation: string; volumeName: string; podUID: string }[] }
    expect(state.stuckOperations).toEqual([expect.objectContaining({ operation: 'volume_mount', volumeName: volume, podUID: stuckUID })])
    const view = (await get(`${agent.url}/v1/pods/${stuckUID}`, TOKEN)).json() as { volumes: { name: string; phase: string }[] }
    expect(view.volumes.map((v) => [v.name, v.phase])).toEqual([
      ['config', 'mounted'],
      ['hung', 'stuck in volume_mount'],
    ])
    const metrics = (await get(`${agent.url}/metrics`, TOKEN)).text
    expect(metrics).toMatch(new RegExp(`kubevol_volume_operations_stuck_seconds\\{operation="volume_mount",volume_name="${volume}",pod_uid="${stuckUID}"\\} \\d`))
    // The watch's timer records the event (reading the endpoints never does).
    const stuckEventsNow = async () =>
      ((await get(`${agent.url}/v1/events?pod=${stuckUID}`, TOKEN)).json() as StoredEvent[]).filter((e) => e.reason === 'VolumeOperationStuck')
    await until('the stuck event', async () => (await stuckEventsNow()).length > 0)
    const stuckEvents = await stuckEventsNow()
    expect(stuckEvents).toHaveLength(1)
    expect(stuckEvents[0]?.type).toBe('Warning')
    expect(stuckEvents[0]?.message).toContain(volume)

    // The call returns: the volume is mounted, nothing is stuck, the agent is ready again.
    hang.release()
    await until('stuck volume mounted', () => agent.manager.getMountedVolumesForPod(stuckUID).size === 2)
    await until('ready again', async () => (await get(`${agent.url}/readyz`, TOKEN)).status === 200)
    expect((await get(`${agent.url}/v1/state`, TOKEN)).json()).toMatchObject({ stuckOperations: [] })
    expect((await get(`${agent.url}/metrics`, TOKEN)).text).not.toContain('kubevol_volume_operations_stuck_seconds{')
  })
})
