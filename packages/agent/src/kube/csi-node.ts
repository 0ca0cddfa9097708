/**
 * The node's CSI drivers in the API, as the kubelet's nodeinfomanager keeps them (SPEC §7.7): when a
 * driver registers, its entry in this node's `storage.k8s.io/v1` CSINode (name, nodeID from
 * NodeGetInfo, topology keys, `allocatable.count` from max_volumes_per_node), its node ID in the
 * Node's `csi.volume.kubernetes.io/nodeid` annotation (a JSON map driver → node ID) and its topology
 * segments as Node labels; when it unregisters, the entry and the annotation key go (labels stay, as
 * in the kubelet).
 *
 * Level-based: the updater keeps what each driver should look like and brings both objects there in
 * one pass, again after any failure (with backoff) and after any change meanwhile. The CSINode is
 * created on first need, owned by the Node so it goes with it.
 */
import type { Logger } from '@kubevol/core'
import type { CsiDriverRegistry } from '@kubevol/core/plugins'
import { errorMessage } from '@kubevol/core'
import { type KubeClients, MERGE_PATCH, apiErrorMessage, statusCodeOf, toPlain } from './kube-client.js'

/** The annotation the kubelet keeps: `{"<driver>":"<node id>",...}`. */
export const CSI_NODE_ID_ANNOTATION = 'csi.volume.kubernetes.io/nodeid'

/** What NodeGetInfo said of a driver. */
export interface CsiNodeDriverInfo {
  readonly name: string
  readonly nodeId: string
  /** 0: no limit (no `allocatable`). */
  readonly maxVolumesPerNode: number
  readonly accessibleTopology?: Readonly<Record<string, string>>
}

/** One `spec.drivers[]` entry of a CSINode. */
export interface CsiNodeDriverEntry {
  readonly name: string
  readonly nodeID: string
  readonly topologyKeys: readonly string[] | null
  readonly allocatable?: { readonly count: number }
}

export interface CsiNodeUpdaterOptions {
  readonly clients: KubeClients
  readonly nodeName: string
  readonly logger: Logger
  /** The first delay after a failed pass, doubling up to 30 s. @default 1_000 */
  readonly retryMs?: number
}

export interface CsiNodeUpdater {
  /** Puts (or updates) the driver's entry; idempotent. */
  addDriver(info: CsiNodeDriverInfo): void
  /** Removes the driver's entry and node ID; unknown drivers are fine. */
  removeDriver(name: string): void
  /** Resolves when no pass is running or due (tests, shutdown). */
  idle(): Promise<void>
  /** The last pass's error, if it failed. */
  readonly lastError: string | undefined
  stop(): void
}

/** The entry the kubelet writes for a driver. */
export function csiNodeDriverEntry(info: CsiNodeDriverInfo): CsiNodeDriverEntry {
  const keys = Object.keys(info.accessibleTopology ?? {}).sort()
  return {
    name: info.name,
    nodeID: info.nodeId,
    topologyKeys: keys.length > 0 ? keys : null,
    ...(info.maxVolumesPerNode > 0 ? { allocatable: { count: info.maxVolumesPerNode } } : {}),
  }
}

interface CsiNodeObject {
  metadata: { name?: string; resourceVersion?: string; ownerReferences?: unknown[] }
  spec?: { drivers?: CsiNodeDriverEntry[] | null }
}

interface NodeObject {
  metadata: { uid?: string; annotations?: Record<string, string>; labels?: Record<string, string> }
}

const same = (a: CsiNodeDriverEntry | undefined, b: CsiNodeDriverEntry): boolean =>
  a !== undefined &&
  a.nodeID === b.nodeID &&
  JSON.stringify(a.topologyKeys ?? []) === JSON.stringify(b.topologyKeys ?? []) &&
  (a.allocatable?.count ?? 0) === (b.allocatable?.count ?? 0)

/** The Node's side: the node ID annotation, and the topology labels the Node does not have yet. */
async function syncNode({ clients, nodeName, logger }: CsiNodeUpdaterOptions, changes: ReadonlyMap<string, CsiNodeDriverInfo | null>): Promise<void> {
  const node = toPlain<NodeObject>(await clients.core.readNode({ name: nodeName }))
  const ids: Record<string, string> = JSON.parse(node.metadata.annotations?.[CSI_NODE_ID_ANNOTATION] ?? '{}')
  const labels: Record<string, string> = {}
  for (const [name, info] of changes) {
    if (info === null) delete ids[name]
    else {
      ids[name] = info.nodeId
      for (const [key, value] of Object.entries(info.accessibleTopology ?? {})) {
        const existing = node.metadata.labels?.[key]
        if (existing !== undefined && existing !== value) {
          logger.warn('CSI topology label collides with the node\'s, keeping the node\'s', { driver: name, label: key, node: existing, driverValue: value })
        } else if (existing === undefined) labels[key] = value
      }
    }
  }
  const current = node.metadata.annotations?.[CSI_NODE_ID_ANNOTATION]
  const next = Object.keys(ids).length > 0 ? JSON.stringify(ids) : undefined
  if (current === next && Object.keys(labels).length === 0) return
  await clients.core.patchNode(
    { name: nodeName, body: { metadata: { annotations: { [CSI_NODE_ID_ANNOTATION]: next ?? null }, ...(Object.keys(labels).length > 0 ? { labels } : {}) } } },
    MERGE_PATCH,
  )
}

/** The CSINode's side: its driver entries, the object created (owned by the Node) on first need. */
async function syncCsiNode({ clients, nodeName }: CsiNodeUpdaterOptions, changes: ReadonlyMap<string, CsiNodeDriverInfo | null>): Promise<void> {
  let existing: CsiNodeObject | undefined
  try {
    existing = toPlain<CsiNodeObject>(await clients.storage.readCSINode({ name: nodeName }))
  } catch (err) {
    if (statusCodeOf(err) !== 404) throw err
  }
  const drivers = [...(existing?.spec?.drivers ?? [])]
  let changed = false
  for (const [name, info] of changes) {
    const i = drivers.findIndex((d) => d.name === name)
    if (info === null) {
      if (i >= 0) {
        drivers.splice(i, 1)
        changed = true
      }
      continue
    }
    const entry = csiNodeDriverEntry(info)
    if (same(drivers[i], entry)) continue
    if (i >= 0) drivers[i] = entry
    else drivers.push(entry)
    changed = true
  }
  if (existing && !changed) return
  if (!existing) {
    // Owned by the Node, as the kubelet does it: deleting the Node deletes its CSINode.
    const node = toPlain<NodeObject>(await clients.core.readNode({ name: nodeName }))
    await clients.storage.createCSINode({
      body: {
        apiVersion: 'storage.k8s.io/v1',
        kind: 'CSINode',
        metadata: { name: nodeName, ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: nodeName, uid: node.metadata.uid ?? '' }] },
        spec: { drivers: drivers as never },
      },
    })
    return
  }
  // A replace with the resourceVersion read: a concurrent writer makes it fail with 409 and the pass runs again.
  await clients.storage.replaceCSINode({ name: nodeName, body: { ...existing, spec: { ...existing.spec, drivers: drivers as never } } as never })
}

/** One pass: brings the Node and the CSINode to what `wanted` holds. */
async function pass(options: CsiNodeUpdaterOptions, wanted: Map<string, { readonly info: CsiNodeDriverInfo | null }>): Promise<void> {
  const applying = new Map(wanted)
  const changes = new Map([...applying].map(([name, box]) => [name, box.info]))
  // The kubelet writes the node ID annotation first, then the CSINode.
  await syncNode(options, changes)
  await syncCsiNode(options, changes)
  // A removal is done once applied, unless the driver changed again meanwhile.
  for (const [name, box] of applying) if (box.info === null && wanted.get(name) === box) wanted.delete(name)
}

export function createCsiNodeUpdater(options: CsiNodeUpdaterOptions): CsiNodeUpdater {
  const { nodeName, logger } = options
  const retryMs = options.retryMs ?? 1_000
  /** driver → its info, or null: remove it. A fresh box per change, so a pass knows what it applied. */
  const wanted = new Map<string, { readonly info: CsiNodeDriverInfo | null }>()
  let dirty = false
  let running: Promise<void> | undefined
  let timer: ReturnType<typeof setTimeout> | undefined
  let failures = 0
  let lastError: string | undefined
  let stopped = false
  const idleWaiters: (() => void)[] = []

  function schedule(): void {
    if (stopped) return
    dirty = true
    if (running || timer) return
    running = (async () => {
      while (dirty && !stopped) {
        dirty = false
        try {
          await pass(options, wanted)
          failures = 0
          lastError = undefined
        } catch (err) {
          failures++
          lastError = apiErrorMessage(err)
          const delay = Math.min(retryMs * 2 ** (failures - 1), 30_000)
          // A conflict is a race lost, not a failure worth a wait.
          if (statusCodeOf(err) === 409 && failures < 5) {
            dirty = true
            continue
          }
          logger.warn('Updating the CSINode object failed; trying again', { node: nodeName, err: lastError, retryInMs: delay })
          timer = setTimeout(() => {
            timer = undefined
            schedule()
          }, delay)
          timer.unref?.()
          break
        }
      }
    })().finally(() => {
      running = undefined
      if (dirty && !timer) schedule()
      else if (!timer) for (const resolve of idleWaiters.splice(0)) resolve()
    })
  }

  return {
    addDriver(info) {
      wanted.set(info.name, { info })
      schedule()
    },
    removeDriver(name) {
      wanted.set(name, { info: null })
      schedule()
    },
    idle() {
      if (!running && !timer && !dirty) return Promise.resolve()
      return new Promise((resolve) => idleWaiters.push(resolve))
    },
    get lastError() {
      return lastError
    },
    stop() {
      stopped = true
      if (timer) clearTimeout(timer)
      timer = undefined
      for (const resolve of idleWaiters.splice(0)) resolve()
    },
  }
}

export interface CsiNodeSyncOptions {
  readonly registry: CsiDriverRegistry
  readonly updater: CsiNodeUpdater
  readonly logger: Logger
  /** Deadline of each NodeGetInfo. @default 10_000 */
  readonly timeoutMs?: number
  /** The first delay before NodeGetInfo is tried again (a static driver may not listen yet), doubling up to 30 s. @default 1_000 */
  readonly retryMs?: number
}

/**
 * Follows the registry: a driver that registers is asked NodeGetInfo (again and again until it
 * answers, as long as it stays registered) and put into the CSINode; one that unregisters is taken
 * out. Drivers registered already are handled at once. Returns the stop function, which leaves the
 * API objects as they are (a restart registers the drivers again).
 */
export function syncCsiNodeWithRegistry(options: CsiNodeSyncOptions): () => void {
  const { registry, updater, logger } = options
  const timeoutMs = options.timeoutMs ?? 10_000
  const retryMs = options.retryMs ?? 1_000
  const timers = new Set<ReturnType<typeof setTimeout>>()
  let stopped = false

  const follow = (name: string, attempt = 0): void => {
    if (stopped) return
    const entry = registry.get(name)
    if (!entry) {
      updater.removeDriver(name)
      return
    }
    entry.driver.nodeGetInfo({ timeoutMs }).then(
      (info) => {
        if (stopped || registry.get(name)?.driver !== entry.driver) return
        updater.addDriver({ name, ...info })
      },
      (err: unknown) => {
        if (stopped || registry.get(name)?.driver !== entry.driver) return
        const delay = Math.min(retryMs * 2 ** attempt, 30_000)
        logger.warn('NodeGetInfo of a registered CSI driver failed; trying again', { driver: name, err: errorMessage(err), retryInMs: delay })
        const timer = setTimeout(() => {
          timers.delete(timer)
          follow(name, attempt + 1)
        }, delay)
        timer.unref?.()
        timers.add(timer)
      },
    )
  }
  const unsubscribe = registry.subscribe((name) => follow(name))
  for (const entry of registry.list()) follow(entry.name)
  return () => {
    stopped = true
    unsubscribe()
    for (const timer of timers) clearTimeout(timer)
    timers.clear()
  }
}
