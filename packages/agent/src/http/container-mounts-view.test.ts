import { type MemoryHost, createMemoryHost } from '@kubevol/adapter-mock'
import { afterEach, describe, expect, it } from 'vitest'
import { get, tempDir, until } from '../../test/helpers.js'
import { type Agent, startAgent } from '../agent.js'

const ROOT = '/var/lib/kubevol'

const CONFIG = `apiVersion: v1
kind: ConfigMap
metadata: { name: settings }
data: { app.conf: fast }
`

const POD = `apiVersion: v1
kind: Pod
metadata: { name: web, uid: web-uid }
spec:
  initContainers:
    - { name: init, volumeMounts: [{ name: scratch, mountPath: /scratch }] }
  containers:
    - name: main
      securityContext: { privileged: true }
      volumeMounts:
        - { name: scratch, mountPath: /scratch, mountPropagation: Bidirectional }
        - { name: config, mountPath: /etc/app.conf, subPath: app.conf }
        - { name: config, mountPath: /etc/config, readOnly: true, recursiveReadOnly: IfPossible }
  volumes:
    - { name: scratch, emptyDir: {} }
    - { name: config, configMap: { name: settings } }
`

const agents: Agent[] = []
const dirs: { cleanup(): void }[] = []
afterEach(async () => {
  for (const agent of agents.splice(0)) await agent.stop()
  for (const d of dirs.splice(0)) d.cleanup()
})

async function start(files: Record<string, string>): Promise<{ agent: Agent; host: MemoryHost; write(name: string, text: string): void }> {
  const host = createMemoryHost()
  const manifests = tempDir()
  dirs.push(manifests)
  for (const [name, text] of Object.entries(files)) manifests.write(name, text)
  const agent = await startAgent(
    { nodeName: 'n1', mode: 'static', manifestDir: manifests.dir, port: 0, manifestRescanMs: 100, statsPeriodMs: 0, podSyncRetryMs: 50, shutdownGraceMs: 1_000 },
    { host, log: { silent: true }, manager: { backoff: { initialMs: 20, maxMs: 200 }, resyncPeriodMs: 500, housekeepingPeriodMs: 0 } as object },
  )
  agents.push(agent)
  await until('the pod read', () => agent.pods.getPodByUID('web-uid') !== undefined)
  return { agent, host, write: manifests.write }
}

describe('GET /v1/pods/<uid>/containers/<name>/mounts', () => {
  it('waits for the pod volumes and answers with the container mounts in the CRI shape', async () => {
    const { agent } = await start({ 'config.yaml': CONFIG, 'web.yaml': POD })
    const res = await get(`${agent.url}/v1/pods/web-uid/containers/main/mounts?wait=10s&recursiveReadOnly=true`)
    expect(res.status, res.text).toBe(200)
    expect(res.json()).toEqual({
      pod: { namespace: 'default', name: 'web', uid: 'web-uid' },
      container: 'main',
      mounts: [
        {
          name: 'scratch',
          containerPath: '/scratch',
          hostPath: `${ROOT}/pods/web-uid/volumes/kubernetes.io~empty-dir/scratch`,
          readonly: false,
          selinuxRelabel: true,
          propagation: 'PROPAGATION_BIDIRECTIONAL',
          recursiveReadOnly: false,
        },
        {
          name: 'config',
          containerPath: '/etc/app.conf',
          hostPath: `${ROOT}/pods/web-uid/volume-subpaths/config/main/1`,
          readonly: true,
          selinuxRelabel: true,
          propagation: 'PROPAGATION_PRIVATE',
          recursiveReadOnly: false,
        },
        {
          name: 'config',
          containerPath: '/etc/config',
          hostPath: `${ROOT}/pods/web-uid/volumes/kubernetes.io~configmap/config`,
          readonly: true,
          selinuxRelabel: true,
          propagation: 'PROPAGATION_PRIVATE',
          recursiveReadOnly: true,
        },
      ],
      devices: [],
    })
    // Without the runtime saying it can, IfPossible is a plain read-only mount.
    const plain = (await get(`${agent.url}/v1/pods/web-uid/containers/main/mounts`)).json() as { mounts: { recursiveReadOnly: boolean }[] }
    expect(plain.mounts.map((m) => m.recursiveReadOnly)).toEqual([false, false, false])
    expect(((await get(`${agent.url}/v1/pods/web-uid/containers/init/mounts`)).json() as { mounts: unknown[] }).mounts).toHaveLength(1)
  })

  it('answers with the kubelet texts while a volume is not mounted: at once, or when the wait runs out', async () => {
    const { agent } = await start({ 'web.yaml': POD })
    await until('scratch mounted', () => agent.manager.getMountedVolumesForPod('web-uid').has('scratch'))
    const now = await get(`${agent.url}/v1/pods/web-uid/containers/main/mounts`)
    expect(now.status).toBe(409)
    expect(now.json()).toEqual({ error: 'cannot find volume "config" to mount into container "main"' })
    const waited = await get(`${agent.url}/v1/pods/web-uid/containers/main/mounts?wait=300ms`)
    expect(waited.status).toBe(504)
    expect((waited.json() as { error: string }).error).toMatch(/^Unable to attach or mount volumes: unmounted volumes=\[config\], unattached volumes=\[\], failed to process volumes=\[\]: .*context deadline exceeded$/)
  })

  it('/v1/pods/<uid>/mounts: every container, each with its mounts or the reason it has none', async () => {
    const { agent } = await start({ 'web.yaml': POD })
    await until('scratch mounted', () => agent.manager.getMountedVolumesForPod('web-uid').has('scratch'))
    const res = await get(`${agent.url}/v1/pods/web-uid/mounts`)
    expect(res.status).toBe(200)
    const body = res.json() as { pod: unknown; containers: { container: string; mounts?: { containerPath: string }[]; error?: string }[] }
    expect(body.pod).toEqual({ namespace: 'default', name: 'web', uid: 'web-uid' })
    expect(body.containers.map((c) => [c.container, c.mounts?.map((m) => m.containerPath) ?? c.error])).toEqual([
      ['init', ['/scratch']],
      ['main', 'cannot find volume "config" to mount into container "main"'],
    ])
  })

  it('answers once the volumes are mounted when they come during the wait', async () => {
    const { agent, write } = await start({ 'web.yaml': POD })
    const answer = get(`${agent.url}/v1/pods/web-uid/containers/main/mounts?wait=20s`)
    await new Promise((resolve) => setTimeout(resolve, 200))
    write('config.yaml', CONFIG)
    const res = await answer
    expect(res.status, res.text).toBe(200)
  })

  it.each([
    { path: '/v1/pods/nope/containers/main/mounts', status: 404, error: 'pod "nope" is not known on this node' },
    { path: '/v1/pods/web-uid/containers/nope/mounts', status: 404, error: 'container nope not found in pod default/web' },
    { path: '/v1/pods/web-uid/containers/main/mounts?wait=30', status: 400, error: 'wait must be a duration such as 30s or 2m, at most 10m, not "30"' },
    { path: '/v1/pods/web-uid/containers/main/mounts?wait=1h', status: 400, error: 'wait must be a duration such as 30s or 2m, at most 10m, not "1h"' },
    { path: '/v1/pods/web-uid/containers/main/mounts?recursiveReadOnly=yes', status: 400, error: 'recursiveReadOnly must be true or false, not "yes"' },
  ])('$status for $path', async ({ path, status, error }) => {
    const { agent } = await start({ 'config.yaml': CONFIG, 'web.yaml': POD })
    const res = await get(`${agent.url}${path}`)
    expect(res.status).toBe(status)
    expect(res.json()).toEqual({ error })
  })
})
