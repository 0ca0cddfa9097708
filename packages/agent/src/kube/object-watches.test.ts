/**
 * The API object reader's watches of ConfigMaps and Secrets against the fake API server: served from
 * the watch, announced by name, refused as the kubelet reports it, and read by GET when no pod's
 * volume references the object.
 */
import { type ObjectReference, type Pod, silentLogger } from '@kubevol/core'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { until } from '../../test/helpers.js'
import { createPodStore } from '../sources/pod-store.js'
import { type FakeApiServer, startFakeApiServer } from '../testing/index.js'
import { type ApiObjectReader, createApiObjectReader } from './api-object-reader.js'
import { createKubeClients } from './kube-client.js'

const NODE = 'n1'
const USER = `system:node:${NODE}`

let api: FakeApiServer
let reader: ApiObjectReader
const pods = createPodStore()

const pod = (name: string, nodeName: string, volumes: Record<string, unknown>[]) => ({
  metadata: { name, namespace: 'default', uid: `uid-${name}` },
  spec: { nodeName, containers: [{ name: 'c', image: 'busybox' }], volumes },
})

beforeEach(async () => {
  api = await startFakeApiServer()
  api.create('ConfigMap', { metadata: { name: 'mine', namespace: 'default' }, data: { a: '1' } })
  api.create('ConfigMap', { metadata: { name: 'theirs', namespace: 'default' }, data: { a: 'x' } })
  api.create('Secret', { metadata: { name: 'driver-secret', namespace: 'default' } })
  api.create('Pod', pod('theirs', 'n2', [{ name: 'c', configMap: { name: 'theirs' } }]))
  reader = createApiObjectReader({ clients: createKubeClients(api.kubeConfig(api.nodeToken(NODE))), nodeName: NODE, ttlMs: 0, pods, retryMs: 20, logger: silentLogger })
  reader.objectWatches.start()
})

afterEach(async () => {
  reader.objectWatches.stop()
  pods.replaceAll([])
  await api.close()
})

/** A pod of this node, in the server and in the reader's pod source. */
function addPod(name: string, volumes: Record<string, unknown>[]): void {
  const object = pod(name, NODE, volumes)
  api.create('Pod', object)
  pods.set(object as unknown as Pod)
}

describe('the API object reader with the Watch strategy', () => {
  it('serves a referenced ConfigMap from its watch and announces its changes by name', async () => {
    expect(reader.announcesChanges).toBe(true)
    const changes: (ObjectReference | undefined)[] = []
    reader.subscribe((changed) => changes.push(changed))
    addPod('web', [{ name: 'c', projected: { sources: [{ configMap: { name: 'mine' } }] } }])
    expect((await reader.getConfigMap('default', 'mine')).data).toEqual({ a: '1' })
    await until('watching', () => api.openWatches('configmaps') === 1)

    api.patch('ConfigMap', 'default', 'mine', { data: { a: '2' } })
    await until('announced', () => changes.length === 1)
    expect(changes).toEqual([{ kind: 'ConfigMap', namespace: 'default', name: 'mine' }])
    expect((await reader.getConfigMap('default', 'mine')).data).toEqual({ a: '2' })
    api.delete('ConfigMap', 'default', 'mine')
    await until('the deletion announced', () => changes.length === 2)
    await expect(reader.getConfigMap('default', 'mine')).rejects.toThrow('configmaps "mine" not found')
    expect(api.countRequests({ verb: 'get', resource: 'configmaps', user: USER })).toBe(0)
  })

  it('fails as the kubelet does when the Node authorizer refuses the watch, with the refusal as the cause', async () => {
    // The reader's pod source says this node runs a pod that reads `theirs`; the server's graph does not.
    pods.set(pod('stale', NODE, [{ name: 'c', configMap: { name: 'theirs' } }]) as unknown as Pod)
    const err = await reader.getConfigMap('default', 'theirs').then(
      () => undefined,
      (e: unknown) => e as Error,
    )
    expect(err?.message).toBe('failed to sync configmap cache: timed out waiting for the condition')
    expect(String((err?.cause as { body?: unknown } | undefined)?.body)).toContain("no relationship found between node 'n1' and this object")
    expect(api.countRequests({ verb: 'list', resource: 'configmaps', user: USER })).toBeGreaterThan(0)
  })

  it('lists again after failed lists and serves the object once a list succeeds', async () => {
    api.failNext({ method: 'GET', path: '/api/v1/namespaces/default/configmaps', status: 500, message: 'etcd is down', times: 2 })
    addPod('web', [{ name: 'c', configMap: { name: 'mine' } }])
    expect((await reader.getConfigMap('default', 'mine')).data).toEqual({ a: '1' })
    // Two failed lists (not counted: refused before authorization), then the one that succeeded.
    expect(api.requests.filter((r) => r.path === '/api/v1/namespaces/default/configmaps' && !r.watch).map((r) => r.status)).toEqual([500, 500, 200])
    await until('watching', () => api.openWatches('configmaps') === 1)
  })

  it('does not watch an immutable object once it has read it, as the kubelet', async () => {
    api.create('Secret', { metadata: { name: 'fixed', namespace: 'default' }, immutable: true, data: { k: 'dg==' } })
    addPod('web', [{ name: 's', secret: { secretName: 'fixed' } }])
    expect((await reader.getSecret('default', 'fixed')).data).toEqual({ k: 'dg==' })
    expect(api.countRequests({ verb: 'list', resource: 'secrets', user: USER })).toBe(1)
    expect(api.countRequests({ verb: 'watch', resource: 'secrets', user: USER })).toBe(0)
  })

  it('reads an object no pod volume references (a CSI driver secret) by GET, and watches nothing for it', async () => {
    addPod('csi', [{ name: 'v', csi: { driver: 'd', nodePublishSecretRef: { name: 'driver-secret' } } }])
    expect((await reader.getSecret('default', 'driver-secret')).metadata.name).toBe('driver-secret')
    expect(api.countRequests({ verb: 'get', resource: 'secrets', user: USER })).toBe(1)
    expect(api.openWatches('secrets')).toBe(0)
    expect(reader.objectWatches.size).toBe(0)
  })
})
