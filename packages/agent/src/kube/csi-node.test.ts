import { type CsiDriver, createCsiDriverRegistry } from '@kubevol/core/plugins'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { until } from '../../test/helpers.js'
import { type FakeApiServer, startFakeApiServer } from '../testing/index.js'
import { CSI_NODE_ID_ANNOTATION, type CsiNodeUpdater, createCsiNodeUpdater, csiNodeDriverEntry, syncCsiNodeWithRegistry } from './csi-node.js'
import { createKubeClients } from './kube-client.js'

const NODE = 'n1'
const silent = { debug() {}, info() {}, warn() {}, error() {} }

let api: FakeApiServer
let updater: CsiNodeUpdater | undefined
beforeEach(async () => {
  api = await startFakeApiServer()
  api.create('Node', { metadata: { name: NODE, labels: { 'kubernetes.io/hostname': NODE } } })
})
afterEach(async () => {
  updater?.stop()
  updater = undefined
  await api.close()
})

/** The updater as the node itself (the Node authorizer applies). */
function start(): CsiNodeUpdater {
  updater = createCsiNodeUpdater({ clients: createKubeClients(api.kubeConfig(api.nodeToken(NODE))), nodeName: NODE, logger: silent, retryMs: 20 })
  return updater
}
const csiNode = () => api.get('CSINode', undefined, NODE) as { metadata: { ownerReferences?: unknown[] }; spec: { drivers: unknown[] } } | undefined
const node = () => api.get('Node', undefined, NODE) as { metadata: { uid: string; annotations?: Record<string, string>; labels?: Record<string, string> } }

/** A driver that answers NodeGetInfo only; `fail` makes it fail that many times first. */
function fakeDriver(info: { nodeId: string; maxVolumesPerNode: number; accessibleTopology?: Record<string, string> }, fail = 0): CsiDriver {
  const unused = () => Promise.reject(new Error('not used'))
  return {
    getPluginInfo: unused,
    nodeGetInfo: async () => {
      if (fail-- > 0) throw new Error('connection refused')
      return info
    },
    nodeGetCapabilities: unused,
    nodeStageVolume: unused,
    nodeUnstageVolume: unused,
    nodePublishVolume: unused,
    nodeUnpublishVolume: unused,
    nodeExpandVolume: unused,
    nodeGetVolumeStats: unused,
  }
}

describe('the CSINode entry of a driver', () => {
  it.each([
    { name: 'no limit, no topology', info: { name: 'a.csi', nodeId: 'x', maxVolumesPerNode: 0 }, entry: { name: 'a.csi', nodeID: 'x', topologyKeys: null } },
    {
      name: 'a limit and topology (keys sorted)',
      info: { name: 'b.csi', nodeId: 'y', maxVolumesPerNode: 16, accessibleTopology: { zone: 'z1', rack: 'r7' } },
      entry: { name: 'b.csi', nodeID: 'y', topologyKeys: ['rack', 'zone'], allocatable: { count: 16 } },
    },
  ])('is the kubelet\'s: $name', ({ info, entry }) => {
    expect(csiNodeDriverEntry(info)).toEqual(entry)
  })
})

describe('CSINode and the node ID annotation', () => {
  it('creates the CSINode owned by the Node, adds and removes drivers, and keeps the annotation in step', async () => {
    const u = start()
    u.addDriver({ name: 'hostpath.csi.kubevol.io', nodeId: 'node-a', maxVolumesPerNode: 8, accessibleTopology: { 'topology.hostpath.csi/node': 'n1' } })
    await u.idle()
    expect(csiNode()?.metadata.ownerReferences).toEqual([{ apiVersion: 'v1', kind: 'Node', name: NODE, uid: node().metadata.uid }])
    expect(csiNode()?.spec.drivers).toEqual([{ name: 'hostpath.csi.kubevol.io', nodeID: 'node-a', topologyKeys: ['topology.hostpath.csi/node'], allocatable: { count: 8 } }])
    expect(JSON.parse(node().metadata.annotations?.[CSI_NODE_ID_ANNOTATION] ?? '')).toEqual({ 'hostpath.csi.kubevol.io': 'node-a' })
    expect(node().metadata.labels).toEqual({ 'kubernetes.io/hostname': NODE, 'topology.hostpath.csi/node': 'n1' })

    u.addDriver({ name: 'other.csi', nodeId: 'o-1', maxVolumesPerNode: 0 })
    await u.idle()
    expect(csiNode()?.spec.drivers).toHaveLength(2)
    expect(JSON.parse(node().metadata.annotations?.[CSI_NODE_ID_ANNOTATION] ?? '')).toEqual({ 'hostpath.csi.kubevol.io': 'node-a', 'other.csi': 'o-1' })

    u.removeDriver('hostpath.csi.kubevol.io')
    await u.idle()
    expect(csiNode()?.spec.drivers).toEqual([{ name: 'other.csi', nodeID: 'o-1', topologyKeys: null }])
    expect(JSON.parse(node().metadata.annotations?.[CSI_NODE_ID_ANNOTATION] ?? '')).toEqual({ 'other.csi': 'o-1' })
    u.removeDriver('other.csi')
    await u.idle()
    expect(csiNode()?.spec.drivers).toEqual([])
    expect(node().metadata.annotations?.[CSI_NODE_ID_ANNOTATION]).toBeUndefined()
    // The topology label stays, as in the kubelet.
    expect(node().metadata.labels?.['topology.hostpath.csi/node']).toBe('n1')
  })

  it('writes nothing when a driver registers again unchanged, and keeps entries of drivers it does not know', async () => {
    api.create('CSINode', { metadata: { name: NODE }, spec: { drivers: [{ name: 'kept.csi', nodeID: 'k', topologyKeys: null }] } })
    const u = start()
    u.addDriver({ name: 'a.csi', nodeId: 'x', maxVolumesPerNode: 0 })
    await u.idle()
    const writes = () => api.requests.filter((r) => r.method !== 'GET' && r.path.includes('csinodes')).length
    const before = writes()
    u.addDriver({ name: 'a.csi', nodeId: 'x', maxVolumesPerNode: 0 })
    await u.idle()
    expect(writes()).toBe(before)
    expect(csiNode()?.spec.drivers).toEqual([
      { name: 'kept.csi', nodeID: 'k', topologyKeys: null },
      { name: 'a.csi', nodeID: 'x', topologyKeys: null },
    ])
  })

  it('tries again after the API server fails, and after a conflict', async () => {
    api.failNext({ method: 'PATCH', path: `/api/v1/nodes/${NODE}`, status: 500, times: 2 })
    const u = start()
    u.addDriver({ name: 'a.csi', nodeId: 'x', maxVolumesPerNode: 0 })
    await until('the CSINode', () => csiNode() !== undefined)
    await u.idle()
    expect(csiNode()?.spec.drivers).toEqual([{ name: 'a.csi', nodeID: 'x', topologyKeys: null }])
    expect(u.lastError).toBeUndefined()
  })
})

describe('following the driver registry', () => {
  it('puts a registered driver in once NodeGetInfo answers, and takes it out when it unregisters', async () => {
    const u = start()
    const registry = createCsiDriverRegistry()
    const stop = syncCsiNodeWithRegistry({ registry, updater: u, logger: silent, retryMs: 10 })
    // A static driver whose socket is not up yet: NodeGetInfo fails twice first.
    registry.register({ name: 'late.csi', driver: fakeDriver({ nodeId: 'l-1', maxVolumesPerNode: 4 }, 2) })
    await until('the driver entry', () => (csiNode()?.spec.drivers.length ?? 0) === 1)
    expect(csiNode()?.spec.drivers).toEqual([{ name: 'late.csi', nodeID: 'l-1', topologyKeys: null, allocatable: { count: 4 } }])
    registry.unregister('late.csi')
    await until('no driver entry', () => csiNode()?.spec.drivers.length === 0)
    expect(node().metadata.annotations?.[CSI_NODE_ID_ANNOTATION]).toBeUndefined()
    stop()
  })
})
