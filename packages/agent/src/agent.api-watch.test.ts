/**
 * API mode's ConfigMaps and Secrets, watched (the kubelet's default change detection strategy),
 * against the fake API server: a change reaches the pod's files at once, a pod that goes takes its
 * watches with it, a watch that expires recovers, and an idle node reads none of these objects.
 */
import { type MemoryHost, createMemoryHost } from '@kubevol/adapter-mock'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { until } from '../test/helpers.js'
import { type Agent, startAgent } from './agent.js'
import type { AgentConfigInput } from './config/options.js'
import { type FakeApiServer, startFakeApiServer } from './testing/index.js'

const NODE = 'n1'
const USER = `system:node:${NODE}`

let api: FakeApiServer
let host: MemoryHost
const agents: Agent[] = []

beforeEach(async () => {
  api = await startFakeApiServer()
  host = createMemoryHost()
  api.create('Node', { metadata: { name: NODE } })
  api.create('ConfigMap', { metadata: { name: 'settings', namespace: 'default' }, data: { mode: 'fast' } })
  api.create('Secret', { metadata: { name: 'creds', namespace: 'default' }, data: { password: Buffer.from('one').toString('base64') } })
})

afterEach(async () => {
  for (const agent of agents.splice(0)) await agent.stop()
  await api.close()
})

/** The agent in API mode; the pod sync (remount) period is short, so a strategy that finds changes by reading shows itself. */
async function start(config: Partial<AgentConfigInput> = {}): Promise<Agent> {
  const agent = await startAgent(
    { nodeName: NODE, mode: 'api', port: 0, nodeStatusPeriodMs: 50, watchRetryMs: 20, podSyncRetryMs: 50, statsPeriodMs: 0, shutdownGraceMs: 1_000, objectCacheTtlMs: 0, ...config },
    {
      host,
      kubeConfig: api.kubeConfig(api.nodeToken(NODE)),
      log: { silent: true },
      manager: { backoff: { initialMs: 20, maxMs: 200 }, resyncPeriodMs: 200, remountPeriodMs: 300, housekeepingPeriodMs: 0 } as object,
    },
  )
  agents.push(agent)
  return agent
}

const VOLUMES = [
  { name: 'config', configMap: { name: 'settings' } },
  { name: 'creds', secret: { secretName: 'creds' } },
]

function createPod(name: string, volumes: Record<string, unknown>[] = VOLUMES): string {
  const pod = api.create('Pod', {
    metadata: { name, namespace: 'default' },
    spec: {
      nodeName: NODE,
      containers: [{ name: 'main', image: 'busybox', volumeMounts: volumes.map((v) => ({ name: v.name, mountPath: `/mnt/${String(v.name)}` })) }],
      volumes,
    },
  })
  return pod.metadata.uid as string
}

/**
 * A file of a pod's volume as a container would read it, through the `..data` link: the host never
 * follows a link beneath its locked root, so the link is read and the version directory named.
 */
async function podFile(uid: string, plugin: string, volume: string, file: string): Promise<string | undefined> {
  const dir = `/var/lib/kubevol/pods/${uid}/volumes/${plugin}/${volume}`
  try {
    const version = await host.readlink(`${dir}/..data`)
    return Buffer.from(await host.readFile(`${dir}/${version}/${file}`)).toString('utf8')
  } catch {
    return undefined
  }
}
const configFile = (uid: string) => podFile(uid, 'kubernetes.io~configmap', 'config', 'mode')
const secretFile = (uid: string) => podFile(uid, 'kubernetes.io~secret', 'creds', 'password')

describe('ConfigMaps and Secrets watched (configMapAndSecretChangeDetectionStrategy: Watch)', () => {
  it('puts a change into the pod files within 2 s', async () => {
    await start()
    const uid = createPod('web')
    await until('the files written', async () => (await configFile(uid)) === 'fast' && (await secretFile(uid)) === 'one')
    await until('both watched', () => api.openWatches('configmaps') === 1 && api.openWatches('secrets') === 1)

    api.patch('ConfigMap', 'default', 'settings', { data: { mode: 'slow' } })
    api.patch('Secret', 'default', 'creds', { data: { password: Buffer.from('two').toString('base64') } })
    await until('the files changed', async () => (await configFile(uid)) === 'slow' && (await secretFile(uid)) === 'two', 2_000)
  })

  it('stops watching the objects of a pod that is gone, and keeps those another pod still reads', async () => {
    await start()
    const a = createPod('a')
    const b = createPod('b', [{ name: 'config', configMap: { name: 'settings' } }])
    await until('both pods set up', async () => (await secretFile(a)) === 'one' && (await configFile(b)) === 'fast')
    await until('both watched once', () => api.openWatches('configmaps') === 1 && api.openWatches('secrets') === 1)

    api.delete('Pod', 'default', 'a', { gracePeriodSeconds: 0 })
    await until('the secret no longer watched', () => api.openWatches('secrets') === 0)
    expect(api.openWatches('configmaps')).toBe(1)
    api.delete('Pod', 'default', 'b', { gracePeriodSeconds: 0 })
    await until('nothing watched', () => api.openWatches('configmaps') === 0)
  })

  it('recovers from a watch that expired (410) after its history was compacted', async () => {
    await start()
    const uid = createPod('web')
    await until('the files written', async () => (await configFile(uid)) === 'fast')
    const lists = () => api.countRequests({ verb: 'list', resource: 'configmaps', user: USER })
    expect(lists()).toBe(1)
    api.create('ConfigMap', { metadata: { name: 'noise', namespace: 'default' } })
    api.compact()
    api.expireWatches('configmaps')
    await until('listed again and watching', () => lists() === 2 && api.openWatches('configmaps') === 1)
    api.patch('ConfigMap', 'default', 'settings', { data: { mode: 'slow' } })
    await until('the files changed', async () => (await configFile(uid)) === 'slow', 2_000)
  })

  // A measurement over a short real window: with a pod sync every 300 ms, a strategy that reads
  // would read several times in it.
  it.each([
    ['Watch', (reads: number) => expect(reads).toBe(0)],
    ['Cache', (reads: number) => expect(reads).toBeGreaterThan(0)],
  ] as const)('an idle node with the %s strategy reads its ConfigMaps and Secrets accordingly', async (strategy, check) => {
    await start({ configMapAndSecretChangeDetectionStrategy: strategy })
    const uid = createPod('web')
    await until('the files written', async () => (await configFile(uid)) === 'fast' && (await secretFile(uid)) === 'one')
    if (strategy === 'Watch') await until('both watched', () => api.openWatches('configmaps') === 1 && api.openWatches('secrets') === 1)
    api.resetRequestCounts()
    await new Promise((resolve) => setTimeout(resolve, 1_000))
    const reads = ['configmaps', 'secrets'].reduce((sum, resource) => sum + api.countRequests({ resource, user: USER }), 0)
    check(reads)
    expect(await configFile(uid)).toBe('fast')
  })
})
