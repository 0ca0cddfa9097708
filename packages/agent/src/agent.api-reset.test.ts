/**
 * Connections reset under the agent (ECONNRESET, "socket hang up", as node-fetch reports a TCP reset
 * or a proxy that goes away): every list, watch, node status update, event post and TokenRequest whose
 * connection the fake API server resets becomes a failure the agent logs and retries; nothing
 * escapes as an unhandled rejection or an uncaught exception (either would end the agent's process).
 */
import { KubeConfig } from '@kubernetes/client-node'
import { type MemoryHost, createMemoryHost } from '@kubevol/adapter-mock'
import { afterEach, beforeEach, expect, it } from 'vitest'
import { until } from '../test/helpers.js'
import { type Agent, startAgent } from './agent.js'
import { type FakeApiServer, startFakeApiServer } from './testing/index.js'

const NODE = 'n1'

let api: FakeApiServer
let host: MemoryHost
let agent: Agent | undefined
const escaped: unknown[] = []
const onEscape = (err: unknown): void => {
  escaped.push(err)
}
/** The agent's log, as JSON records. */
const lines: Record<string, unknown>[] = []

beforeEach(async () => {
  escaped.length = 0
  lines.length = 0
  process.on('unhandledRejection', onEscape)
  process.on('uncaughtException', onEscape)
  api = await startFakeApiServer()
  host = createMemoryHost()
  api.create('ConfigMap', { metadata: { name: 'settings', namespace: 'default' }, data: { mode: 'fast' } })
})

afterEach(async () => {
  await agent?.stop()
  agent = undefined
  await api.close()
  process.off('unhandledRejection', onEscape)
  process.off('uncaughtException', onEscape)
})

async function start(): Promise<Agent> {
  agent = await startAgent(
    { nodeName: NODE, mode: 'api', port: 0, nodeStatusPeriodMs: 50, watchRetryMs: 20, podSyncRetryMs: 50, statsPeriodMs: 0, shutdownGraceMs: 1_000, objectCacheTtlMs: 0 },
    {
      host,
      kubeConfig: api.kubeConfig(api.nodeToken(NODE)),
      log: { destination: { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) } },
      manager: { backoff: { initialMs: 20, maxMs: 200 }, resyncPeriodMs: 200, housekeepingPeriodMs: 0 } as object,
    },
  )
  return agent
}

/** The agent's warnings and errors, as `message: error` lines. */
const failures = (): string[] => lines.filter((l) => l.level === 'warn' || l.level === 'error').map((l) => `${String(l.msg)}: ${String(l.err ?? '')}`)

it('retries lists, requests and watches whose connections are reset, logs each, and nothing escapes', async () => {
  // Before any answer: the first node reads and registration, the first pod lists.
  api.resetNext({ method: 'GET', path: `/api/v1/nodes/${NODE}`, times: 2 })
  api.resetNext({ method: 'POST', path: '/api/v1/nodes' })
  api.resetNext({ method: 'GET', path: '/api/v1/pods', times: 3 })
  const a = await start()
  await until('the Node registered', () => api.get('Node', undefined, NODE) !== undefined)
  // The pod's ConfigMap list, its TokenRequest and the event that failure posts.
  api.resetNext({ method: 'GET', path: '/api/v1/namespaces/default/configmaps', times: 2 })
  api.resetNext({ method: 'POST', path: /\/token$/, times: 2 })
  api.resetNext({ method: 'POST', path: '/api/v1/namespaces/default/events' })
  const volumes = [
    { name: 'config', configMap: { name: 'settings' } },
    { name: 'token', projected: { sources: [{ serviceAccountToken: { path: 't' } }] } },
  ]
  const pod = api.create('Pod', {
    metadata: { name: 'web', namespace: 'default' },
    spec: { nodeName: NODE, containers: [{ name: 'c', image: 'busybox', volumeMounts: volumes.map((v) => ({ name: v.name, mountPath: `/m/${v.name}` })) }], volumes },
  })
  const uid = pod.metadata.uid as string
  await until('mounted', () => a.manager.getMountedVolumesForPod(uid).size === 2)
  // The node status updater's reads of the Node (before each volumesInUse patch).
  api.resetNext({ method: 'GET', path: `/api/v1/nodes/${NODE}`, times: 2 })
  // Mid-stream: every open watch reset, five times over.
  for (let i = 0; i < 5; i++) {
    await until('watching again', () => api.openWatches('pods') === 1 && api.openWatches('configmaps') === 1 && api.openWatches('nodes') === 1)
    api.resetWatches()
  }
  await until('watching after the resets', () => api.openWatches('pods') === 1 && api.openWatches('configmaps') === 1)
  api.patch('ConfigMap', 'default', 'settings', { data: { mode: 'slow' } })
  const dir = `/var/lib/kubevol/pods/${uid}/volumes/kubernetes.io~configmap/config`
  const mode = async () => Buffer.from(await host.readFile(`${dir}/${await host.readlink(`${dir}/..data`)}/mode`)).toString('utf8')
  await until('the change on disk', async () => (await mode()) === 'slow')
  // Every reset asked for was made (the request log records status 0 for each).
  await until('every reset made', () => api.requests.filter((r) => r.status === 0).length === 13)

  // Each reset was a failure with its line, then a retry.
  const said = failures()
  const reset = /ECONNRESET|socket hang up|Premature close/
  for (const line of [
    /^Registering the node failed/,
    /^List\/watch of pods failed; restarting: request to .*\/api\/v1\/pods\?fieldSelector=spec\.nodeName%3Dn1 failed/,
    /^List\/watch of configmaps default\/settings failed; restarting: request to /,
    /^MountVolume\.SetUp failed for volume "token" .*requesting a token for service account default\/default/,
    /^Could not post event; retrying/,
    /^Updating node volumesInUse failed/,
    /^List\/watch of nodes failed; restarting: /,
  ]) {
    expect(said.filter((l) => line.test(l) && reset.test(l)), String(line)).not.toEqual([])
  }
  expect(escaped).toEqual([])
})

it('retries a watch whose request cannot even be made (its credential fails), and nothing escapes', async () => {
  // A credential that can fail before a request is sent, as the node credentials' wait for a
  // certificate or an exec plugin can.
  let broken = false
  const kc = new KubeConfig()
  kc.loadFromOptions({
    clusters: [{ name: 'fake', server: api.url, skipTLSVerify: true }],
    users: [{ name: 'node' }],
    contexts: [{ name: 'fake', cluster: 'fake', user: 'node' }],
    currentContext: 'fake',
  })
  const token = api.nodeToken(NODE)
  kc.addAuthenticator({
    isAuthProvider: (user) => user.name === 'node',
    applyAuthentication: async (_user, opts) => {
      if (broken) throw new Error('no credential for now')
      opts.headers = { ...opts.headers, Authorization: `Bearer ${token}` }
    },
  })
  agent = await startAgent(
    { nodeName: NODE, mode: 'api', port: 0, nodeStatusPeriodMs: 50, watchRetryMs: 20, podSyncRetryMs: 50, statsPeriodMs: 0, shutdownGraceMs: 1_000 },
    { host, kubeConfig: kc, log: { destination: { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) } } },
  )
  await until('watching pods', () => api.openWatches('pods') === 1)
  // The server ends the watch (its timeout); the next one cannot be made.
  broken = true
  api.closeWatches('pods')
  await until('the failure logged', () => lines.some((l) => l.msg === 'List/watch of pods failed; restarting' && String(l.err).includes('no credential for now'))).catch((err: Error) => {
    throw new Error(`${err.message}; escaped: ${escaped.map(String).join(', ')}`)
  })
  expect(escaped).toEqual([])
  broken = false
  await until('watching pods again', () => api.openWatches('pods') === 1)
  expect(escaped).toEqual([])
})
