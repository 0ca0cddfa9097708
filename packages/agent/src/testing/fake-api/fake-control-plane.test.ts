/**
 * The fake API server against what a real v1.32 control plane does that node registration and
 * controller attach/detach depend on (KUBE-API.md): a missing Node is a 404 Status; a node creates
 * only its own Node, with only the labels a kubelet may set; the attach/detach controller ignores a
 * Node until it carries the annotation (and a patch's resourceVersion is a precondition), creates VolumeAttachments unless the CSIDriver object says
 * `attachRequired: false`, reports attached volumes under the CSI unique name, and detaches what the
 * node no longer uses.
 */
import { createHash } from 'node:crypto'
import { afterEach, describe, expect, it } from 'vitest'
import { until } from '../../../test/helpers.js'
import { CONTROLLER_MANAGED_ATTACH_DETACH } from './attach-detach-controller.js'
import { type FakeApiServer, startFakeApiServer } from './fake-api-server.js'

let api: FakeApiServer | undefined
afterEach(async () => {
  await api?.close()
  api = undefined
})

async function call(server: FakeApiServer, path: string, init: { method?: string; token?: string; body?: unknown; contentType?: string } = {}) {
  const res = await fetch(`${server.url}${path}`, {
    method: init.method ?? 'GET',
    headers: {
      authorization: `Bearer ${init.token ?? server.adminToken}`,
      ...(init.body !== undefined ? { 'content-type': init.contentType ?? 'application/json' } : {}),
    },
    ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
  })
  const text = await res.text()
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : undefined }
}

describe('a missing Node and registration', () => {
  it('answers GET and PATCH of a missing Node with a 404 Status naming it', async () => {
    api = await startFakeApiServer()
    const token = api.nodeToken('n1')
    const expected = {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: 'nodes "n1" not found',
      reason: 'NotFound',
      details: { name: 'n1', kind: 'nodes' },
      code: 404,
    }
    expect(await call(api, '/api/v1/nodes/n1', { token })).toEqual({ status: 404, body: expected })
    const patch = await call(api, '/api/v1/nodes/n1/status', { token, method: 'PATCH', body: { status: { volumesInUse: [] } }, contentType: 'application/merge-patch+json' })
    expect(patch).toEqual({ status: 404, body: expected })
  })

  it('lets a node create only its own Node, with only the labels a kubelet may set', async () => {
    api = await startFakeApiServer()
    const token = api.nodeToken('n1')
    const other = await call(api, '/api/v1/nodes', { token, method: 'POST', body: { metadata: { name: 'n2' } } })
    expect(other.status).toBe(403)
    expect(other.body).toMatchObject({ reason: 'Forbidden', message: 'nodes "n2" is forbidden: node "n1" is not allowed to modify node "n2"' })
    const badLabels = await call(api, '/api/v1/nodes', {
      token,
      method: 'POST',
      body: { metadata: { name: 'n1', labels: { 'node-restriction.kubernetes.io/pool': 'a', 'kubernetes.io/role': 'x', 'node.kubernetes.io/pool': 'ok' } } },
    })
    expect(badLabels.status).toBe(403)
    expect(badLabels.body?.message).toBe('nodes "n1" is forbidden: node "n1" is not allowed to set the following labels: kubernetes.io/role, node-restriction.kubernetes.io/pool')
    const own = await call(api, '/api/v1/nodes', {
      token,
      method: 'POST',
      body: { metadata: { name: 'n1', labels: { 'kubernetes.io/hostname': 'n1', 'node.kubernetes.io/pool': 'ok', 'example.com/x': 'y' } } },
    })
    expect(own.status).toBe(201)
    expect(api.get('Node', undefined, 'n1')?.metadata.labels).toEqual({ 'kubernetes.io/hostname': 'n1', 'node.kubernetes.io/pool': 'ok', 'example.com/x': 'y' })
    // A second create is 409 AlreadyExists, as on the real server.
    expect((await call(api, '/api/v1/nodes', { token, method: 'POST', body: { metadata: { name: 'n1' } } })).body).toMatchObject({ code: 409, reason: 'AlreadyExists' })
  })
})

describe('a patch carrying a resourceVersion', () => {
  it('is a precondition: a stale one is 409 Conflict and changes nothing', async () => {
    api = await startFakeApiServer()
    const created = api.create('Node', { metadata: { name: 'n1' } })
    api.patch('Node', undefined, 'n1', { status: { volumesInUse: ['theirs'] } }, { subresource: 'status' })
    const patch = (rv: string | undefined) =>
      call(api as FakeApiServer, '/api/v1/nodes/n1/status', { method: 'PATCH', body: { metadata: { resourceVersion: rv }, status: { volumesInUse: ['mine'] } }, contentType: 'application/merge-patch+json' })
    const stale = await patch(created.metadata.resourceVersion)
    expect(stale).toMatchObject({ status: 409, body: { reason: 'Conflict', message: 'Operation cannot be fulfilled on nodes "n1": the object has been modified; please apply your changes to the latest version and try again' } })
    expect(api.get('Node', undefined, 'n1')?.status).toEqual({ volumesInUse: ['theirs'] })
    expect((await patch(api.get('Node', undefined, 'n1')?.metadata.resourceVersion)).status).toBe(200)
    expect(api.get('Node', undefined, 'n1')?.status).toEqual({ volumesInUse: ['mine'] })
  })
})

const HANDLE = '/var/lib/images/disk.img'
const DRIVER = 'filedisk.kubevol.io'
const UNIQUE = `kubernetes.io/csi/${DRIVER}^${HANDLE}`
const VA_NAME = `csi-${createHash('sha256').update(`${HANDLE}${DRIVER}n1`).digest('hex')}`

/** A node, a claim bound to a CSI PV of the fileDisk driver, and a pod of the node using it. */
function cluster(server: FakeApiServer, annotated: boolean) {
  server.create('Node', { metadata: { name: 'n1', ...(annotated ? { annotations: { [CONTROLLER_MANAGED_ATTACH_DETACH]: 'true' } } : {}) } })
  server.create('PersistentVolumeClaim', { metadata: { name: 'disk', namespace: 'default' }, spec: { volumeName: 'pv-disk' } })
  server.create('PersistentVolume', { metadata: { name: 'pv-disk' }, spec: { csi: { driver: DRIVER, volumeHandle: HANDLE }, claimRef: { name: 'disk', namespace: 'default' } } })
}
const podUsingDisk = { metadata: { name: 'web', namespace: 'default' }, spec: { nodeName: 'n1', containers: [{ name: 'c' }], volumes: [{ name: 'd', persistentVolumeClaim: { claimName: 'disk' } }] } }
const nodeStatus = (server: FakeApiServer) => (server.get('Node', undefined, 'n1')?.status ?? {}) as { volumesAttached?: { name: string; devicePath: string }[] }
/** Lets the controller run (it reacts on the next turn of the event loop) before looking for nothing. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 50))

describe('the attach/detach controller model', () => {
  it('ignores a Node without the controller-managed annotation', async () => {
    api = await startFakeApiServer({ attachDetachController: true })
    cluster(api, false)
    api.create('Pod', podUsingDisk)
    await settle()
    expect(api.list('VolumeAttachment')).toEqual([])
    // Annotated later (as a kubelet does when it starts), the node's volumes are attached.
    api.patch('Node', undefined, 'n1', { metadata: { annotations: { [CONTROLLER_MANAGED_ATTACH_DETACH]: 'true' } } })
    await until('a VolumeAttachment', () => api?.list('VolumeAttachment').length === 1)
  })

  it('creates the VolumeAttachment, reports the attached volume under its CSI name, and detaches once unused', async () => {
    api = await startFakeApiServer({ attachDetachController: true })
    cluster(api, true)
    api.create('Pod', podUsingDisk)
    await until('a VolumeAttachment', () => api?.list('VolumeAttachment').length === 1)
    const [va] = api.list('VolumeAttachment')
    expect(va).toMatchObject({ metadata: { name: VA_NAME }, spec: { attacher: DRIVER, nodeName: 'n1', source: { persistentVolumeName: 'pv-disk' } } })
    expect(nodeStatus(api).volumesAttached).toBeUndefined()

    // The node may read its VolumeAttachment by name, but neither list it nor set its status.
    const token = api.nodeToken('n1')
    expect((await call(api, `/apis/storage.k8s.io/v1/volumeattachments/${VA_NAME}`, { token })).status).toBe(200)
    expect((await call(api, '/apis/storage.k8s.io/v1/volumeattachments', { token })).status).toBe(403)
    const byNode = await call(api, `/apis/storage.k8s.io/v1/volumeattachments/${VA_NAME}/status`, {
      token,
      method: 'PATCH',
      body: { status: { attached: true } },
      contentType: 'application/merge-patch+json',
    })
    expect(byNode.status).toBe(403)

    // An external attacher (any client with the rights) marks it attached.
    api.patch('VolumeAttachment', undefined, VA_NAME, { status: { attached: true } }, { subresource: 'status' })
    await until('volumesAttached', () => nodeStatus(api as FakeApiServer).volumesAttached?.length === 1)
    expect(nodeStatus(api).volumesAttached).toEqual([{ name: UNIQUE, devicePath: '' }])

    // The node reports it in use; the pod goes: kept while in use, detached once the node lets go.
    api.patch('Node', undefined, 'n1', { status: { volumesInUse: [UNIQUE] } }, { subresource: 'status' })
    api.delete('Pod', 'default', 'web', { gracePeriodSeconds: 0 })
    await settle()
    expect(api.get('VolumeAttachment', undefined, VA_NAME)).toBeDefined()
    expect(nodeStatus(api).volumesAttached).toEqual([{ name: UNIQUE, devicePath: '' }])
    api.patch('Node', undefined, 'n1', { status: { volumesInUse: [] } }, { subresource: 'status' })
    await until('detached', () => api?.get('VolumeAttachment', undefined, VA_NAME) === undefined)
    expect(nodeStatus(api).volumesAttached).toEqual([])
  })

  it('attaches nothing for a driver whose CSIDriver object says attachRequired: false', async () => {
    api = await startFakeApiServer({ attachDetachController: true })
    api.create('CSIDriver', { metadata: { name: DRIVER }, spec: { attachRequired: false, podInfoOnMount: false } })
    cluster(api, true)
    api.create('Pod', podUsingDisk)
    await settle()
    expect(api.list('VolumeAttachment')).toEqual([])
    expect(nodeStatus(api).volumesAttached).toBeUndefined()
    // The node may read CSIDriver objects (get, list and watch).
    const token = api.nodeToken('n1')
    expect((await call(api, `/apis/storage.k8s.io/v1/csidrivers/${DRIVER}`, { token })).body).toMatchObject({ kind: 'CSIDriver', spec: { attachRequired: false } })
    expect((await call(api, '/apis/storage.k8s.io/v1/csidrivers', { token })).status).toBe(200)
  })
})
