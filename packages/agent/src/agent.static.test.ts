import { unlinkSync } from 'node:fs'
import { join } from 'node:path'
import { type MemoryHost, createMemoryHost } from '@kubevol/adapter-mock'
import { afterEach, describe, expect, it } from 'vitest'
import { get, podMounts, tempDir, until } from '../test/helpers.js'
import { type Agent, startAgent } from './agent.js'
import type { StoredEvent } from './events/event-store.js'

const IMAGE = '/var/lib/images/disk.img'

const OBJECTS = `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  mode: fast
---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: pv-disk
spec:
  capacity: { storage: 32Mi }
  accessModes: [ReadWriteOnce]
  csi: { driver: filedisk.kubevol.io, volumeHandle: ${IMAGE}, fsType: ext4 }
  claimRef: { name: disk, namespace: default }
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: disk
spec:
  volumeName: pv-disk
  accessModes: [ReadWriteOnce]
status:
  phase: Bound
  capacity: { storage: 32Mi }
`

const POD = `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
    - name: main
      image: busybox
      volumeMounts:
        - { name: scratch, mountPath: /scratch }
        - { name: config, mountPath: /config }
        - { name: data, mountPath: /data }
  volumes:
    - { name: scratch, emptyDir: {} }
    - { name: config, configMap: { name: settings } }
    - { name: data, persistentVolumeClaim: { claimName: disk } }
`

const OTHER_NODE = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"elsewhere"},"spec":{"nodeName":"n2","containers":[{"name":"c","volumeMounts":[{"name":"s","mountPath":"/s"}]}],"volumes":[{"name":"s","emptyDir":{}}]}}`

const BROKEN = `apiVersion: v1
kind: Pod
metadata:
  name: broken
spec:
  containers: [{ name: c, volumeMounts: [{ name: s, mountPath: /s }] }
  volumes: [{ name: s, emptyDir: {} }]
---
apiVersion: v1
kind: Pod
metadata:
  name: NotADnsName
spec:
  containers: [{ name: c }]
`

const agents: Agent[] = []
const dirs: { cleanup(): void }[] = []
afterEach(async () => {
  for (const agent of agents.splice(0)) await agent.stop()
  for (const d of dirs.splice(0)) d.cleanup()
})

async function start(host: MemoryHost, dir: string): Promise<Agent> {
  const agent = await startAgent(
    { nodeName: 'n1', mode: 'static', manifestDir: dir, port: 0, manifestRescanMs: 200, statsPeriodMs: 0, podSyncRetryMs: 50, shutdownGraceMs: 1_000 },
    { host, log: { silent: true }, manager: { backoff: { initialMs: 20, maxMs: 200 }, resyncPeriodMs: 500, housekeepingPeriodMs: 0 } as object },
  )
  agents.push(agent)
  return agent
}

function setup() {
  const host = createMemoryHost()
  host.allocateFile(IMAGE, 32 << 20)
  const manifests = tempDir()
  dirs.push(manifests)
  manifests.write('objects.yaml', OBJECTS)
  return { host, manifests }
}

const webUID = (agent: Agent) => agent.pods.getPods().find((p) => p.metadata.name === 'web')?.metadata.uid as string

describe('the agent in static mode', () => {
  it('mounts a manifest pod, reports it, and unmounts everything when its file is removed', async () => {
    const { host, manifests } = setup()
    manifests.write('web.yaml', POD)
    manifests.write('other-node.json', OTHER_NODE)
    const agent = await start(host, manifests.dir)
    expect(agent.config.controllerAttachDetach).toBe(false)
    await until('web mounted', () => webUID(agent) !== undefined && agent.manager.getMountedVolumesForPod(webUID(agent)).size === 3)
    const uid = webUID(agent)
    expect(agent.pods.getPods().map((p) => p.metadata.name)).toEqual(['web'])
    expect(await host.loopDevices?.find(IMAGE)).toHaveLength(1)

    const ready = await get(`${agent.url}/readyz?verbose`)
    expect(ready.status).toBe(200)
    expect(ready.text).toContain('[+]sources-synced ok')
    const pod = (await get(`${agent.url}/v1/pods/${uid}`)).json() as { worker: { phase: string }; volumes: { name: string; phase: string }[] }
    expect(pod.worker.phase).toBe('mounted')
    expect(pod.volumes.map((v) => [v.name, v.phase])).toEqual([
      ['config', 'mounted'],
      ['data', 'mounted'],
      ['scratch', 'mounted'],
    ])
    const state = (await get(`${agent.url}/v1/state`)).json() as { volumesInUse: string[]; actual: { attached: { pluginName: string }[] } }
    expect(state.volumesInUse).toEqual([expect.stringContaining(IMAGE)])
    const events = (await get(`${agent.url}/v1/events?pod=${uid}`)).json() as StoredEvent[]
    expect(events.map((e) => e.reason)).toContain('SuccessfulAttachVolume')

    unlinkSync(join(manifests.dir, 'web.yaml'))
    await until('everything unmounted', async () => podMounts(host).length === 0 && ((await host.loopDevices?.find(IMAGE)) ?? []).length === 0)
    expect(agent.manager.getVolumesInUse()).toEqual([])
    expect(agent.pod(uid)).toMatchObject({ inSource: false, worker: { phase: 'unmounted' } })
  })

  it('fails only the objects of a broken manifest, with the file, line and reason', async () => {
    const { host, manifests } = setup()
    manifests.write('web.yaml', POD)
    manifests.write('broken.yaml', BROKEN)
    const agent = await start(host, manifests.dir)
    await until('web mounted', () => webUID(agent) !== undefined && agent.manager.getMountedVolumesForPod(webUID(agent)).size === 3)
    const state = agent.state() as { manifests: { errors: { file: string; line: number; reason: string }[] } }
    const file = join(manifests.dir, 'broken.yaml')
    expect(state.manifests.errors).toEqual([
      { file, line: expect.any(Number), reason: expect.stringMatching(/^invalid YAML/) },
      { file, line: 12, reason: expect.stringContaining('metadata.name: must be a lowercase RFC 1123 subdomain') },
    ])
    expect(state.manifests.errors[0]?.line).toBeGreaterThanOrEqual(6)
    expect(agent.pods.getPods().map((p) => p.metadata.name)).toEqual(['web'])

    // Fixed: its pod comes. Broken again: the pod of its last clean read stays.
    manifests.write('broken.yaml', BROKEN.replace('volumeMounts: [{ name: s, mountPath: /s }] }', 'volumeMounts: [{ name: s, mountPath: /s }] }]').replace('NotADnsName', 'fine'))
    await until('fixed pods listed', () => agent.pods.getPods().length === 3)
    manifests.write('broken.yaml', 'kind: [')
    await until('the error seen', () => (agent.state() as { manifests: { errors: unknown[] } }).manifests.errors.length === 1)
    expect(agent.pods.getPods().map((p) => p.metadata.name).sort()).toEqual(['broken', 'fine', 'web'])
  })

  it('stops leaving mounts in place, and a restart on the same host keeps them', async () => {
    const { host, manifests } = setup()
    manifests.write('web.yaml', POD)
    const first = await start(host, manifests.dir)
    await until('web mounted', () => webUID(first) !== undefined && first.manager.getMountedVolumesForPod(webUID(first)).size === 3)
    const uid = webUID(first)
    const scratch = `/var/lib/kubevol/pods/${uid}/volumes/kubernetes.io~empty-dir/scratch`
    await host.writeFile(`${scratch}/kept`, 'yes')
    const before = podMounts(host)
    await first.stop()
    expect((await get(`${first.url}/livez`).catch(() => ({ status: 0 }))).status).toBe(0)
    expect(podMounts(host)).toEqual(before)

    const second = await start(host, manifests.dir)
    await until('web mounted again', () => second.manager.getMountedVolumesForPod(uid).size === 3)
    expect(podMounts(host)).toEqual(before)
    expect(new TextDecoder().decode(await host.readFile(`${scratch}/kept`))).toBe('yes')
    expect(second.events.list().map((e) => e.reason)).not.toContain('FailedMount')
  })

  it('words a missing ConfigMap or Secret as kubelet 1.32 does: singular kind', async () => {
    const { host, manifests } = setup()
    manifests.write(
      'missing.yaml',
      POD.replace('name: web', 'name: missing')
        .replace('- { name: data, mountPath: /data }', '- { name: creds, mountPath: /creds }')
        .replace('{ name: config, configMap: { name: settings } }', '{ name: config, configMap: { name: absent } }')
        .replace('{ name: data, persistentVolumeClaim: { claimName: disk } }', '{ name: creds, secret: { secretName: hidden } }'),
    )
    const agent = await start(host, manifests.dir)
    const messages = () => agent.events.list().flatMap((e) => (e.reason === 'FailedMount' ? [e.message] : []))
    await until('both set-up failures recorded', () => messages().length >= 2)
    expect(new Set(messages())).toEqual(
      new Set(['MountVolume.SetUp failed for volume "config" : configmap "absent" not found', 'MountVolume.SetUp failed for volume "creds" : secret "hidden" not found']),
    )
  })
})
