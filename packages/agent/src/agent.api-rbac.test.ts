/**
 * The agent as the bundle's ServiceAccount, without TLS bootstrapping: held by
 * deploy/serviceaccount-rbac.yaml's role on the fake API server (its RBAC authorizer): pods with ConfigMap, Secret, projected token and downward API volumes mount
 * with the default change detection strategy (a watch of each object on its own), and no request is
 * refused. The same check runs on a real API server in test/envtest/bundle.test.ts; this one runs
 * everywhere, so a role that lacks a verb the agent uses fails here first.
 */
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { createMemoryHost } from '@kubevol/adapter-mock'
import { parseAllDocuments } from 'yaml'
import { afterEach, expect, it } from 'vitest'
import { until } from '../test/helpers.js'
import { type Agent, startAgent } from './agent.js'
import { type FakeApiServer, startFakeApiServer } from './testing/index.js'

const rbac = parseAllDocuments(readFileSync(fileURLToPath(new URL('../../../deploy/serviceaccount-rbac.yaml', import.meta.url)), 'utf8')).map((d) => d.toJS() as Record<string, unknown>)
const SA = { user: 'system:serviceaccount:kube-system:kubevol', groups: ['system:serviceaccounts', 'system:serviceaccounts:kube-system', 'system:authenticated'] }

let api: FakeApiServer | undefined
let agent: Agent | undefined
afterEach(async () => {
  await agent?.stop()
  await api?.close()
})

it("mounts every object-backed volume with deploy/serviceaccount-rbac.yaml's ServiceAccount and is refused nothing", async () => {
  api = await startFakeApiServer({ rbac })
  api.addToken('kubevol-sa', SA)
  api.create('ConfigMap', { metadata: { name: 'cfg', namespace: 'default' }, data: { mode: 'fast' } })
  api.create('Secret', { metadata: { name: 'sec', namespace: 'default' }, data: { key: Buffer.from('v').toString('base64') } })
  agent = await startAgent(
    { nodeName: 'n1-kubevol', mode: 'api', port: 0, nodeStatusPeriodMs: 50, watchRetryMs: 20, podSyncRetryMs: 50, statsPeriodMs: 0, shutdownGraceMs: 1_000 },
    { host: createMemoryHost(), kubeConfig: api.kubeConfig('kubevol-sa'), log: { silent: true }, manager: { backoff: { initialMs: 20, maxMs: 200 } } as object },
  )
  const volumes = [
    { name: 'config', configMap: { name: 'cfg' } },
    { name: 'secret', secret: { secretName: 'sec' } },
    { name: 'all', projected: { sources: [{ serviceAccountToken: { path: 'token' } }, { configMap: { name: 'cfg' } }, { downwardAPI: { items: [{ path: 'n', fieldRef: { fieldPath: 'metadata.name' } }] } }] } },
  ]
  const pod = api.create('Pod', {
    metadata: { name: 'web', namespace: 'default' },
    spec: { nodeName: 'n1-kubevol', containers: [{ name: 'c', image: 'busybox', volumeMounts: volumes.map((v) => ({ name: v.name, mountPath: `/m/${v.name}` })) }], volumes },
  })
  const uid = pod.metadata.uid as string
  const a = agent
  await until('mounted', () => a.manager.getMountedVolumesForPod(uid).size === 3)
  await until('the ConfigMap and the Secret watched on their own', () => api?.openWatches('configmaps') === 1 && api?.openWatches('secrets') === 1)
  api.delete('Pod', 'default', 'web', { gracePeriodSeconds: 30 })
  await until('deleted by the agent', () => api?.get('Pod', 'default', 'web') === undefined)
  expect(api.requests.filter((r) => r.status === 403).map((r) => `${r.method} ${r.path}`)).toEqual([])
})
