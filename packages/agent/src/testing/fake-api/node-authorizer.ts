/**
 * The Node authorizer (plus the system:node role) as a node identity meets it: a node lists and
 * watches pods only with `spec.nodeName=<itself>`; reads only the secrets, configmaps, PVCs and PVs
 * its pods reference (a single object by name, or a list/watch with `metadata.name=<it>`); creates
 * and patches only its own Node, with only the labels a kubelet may set (NodeRestriction); only gets
 * volume attachments of its own; creates events; requests tokens only for its pods' service accounts, bound to
 * those pods; updates the status of the claims its pods use, changing only `capacity`, `conditions` and
 * `allocatedResourceStatuses` (NodeRestriction). Everything else is 403 with the API server's message shapes.
 */
import { forbiddenNodeLabels } from '../../kube/kubelet-labels.js'
import type { FieldRequirement } from './selectors.js'
import { StatusError, statusBody } from './status.js'
import { type FakeStore, type KubeObject, type ResourceInfo, resourceOf } from './store.js'

/** Who sends a request. */
export interface Identity {
  readonly user: string
  readonly groups: readonly string[]
}

export type Verb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete'

/** What the authorizer looks at. */
export interface AuthzRequest {
  readonly verb: Verb
  readonly resource: ResourceInfo
  readonly subresource?: string
  readonly namespace?: string
  readonly name?: string
  readonly fieldSelector: readonly FieldRequirement[]
  readonly body?: KubeObject
}

/** The node a node identity acts for, or undefined for any other user. */
export function nodeOf(identity: Identity): string | undefined {
  if (!identity.groups.includes('system:nodes')) return undefined
  const m = /^system:node:(.+)$/.exec(identity.user)
  return m ? m[1] : undefined
}

function forbidden(identity: Identity, req: AuthzRequest, reason: string): StatusError {
  const res = `${req.resource.plural}${req.subresource ? `/${req.subresource}` : ''}`
  // The API server names a resource of a named group with its group: `volumeattachments.storage.k8s.io`.
  const qualified = req.resource.group ? `${req.resource.plural}.${req.resource.group}` : req.resource.plural
  const subject = req.name ? `${qualified} "${req.name}"` : qualified
  const scope = req.namespace ? `in the namespace "${req.namespace}"` : 'at the cluster scope'
  const message = `${subject} is forbidden: User "${identity.user}" cannot ${req.verb} resource "${res}" in API group "${req.resource.group}" ${scope}: ${reason}`
  return new StatusError(statusBody(403, 'Forbidden', message, { ...(req.name ? { name: req.name } : {}), ...(req.resource.group ? { group: req.resource.group } : {}), kind: req.resource.plural }))
}

/** A refusal of an admission plugin (NodeRestriction): `nodes "n2" is forbidden: <reason>`. */
function admissionForbidden(req: AuthzRequest, name: string, reason: string): StatusError {
  const g = req.resource.group ? `.${req.resource.group}` : ''
  return new StatusError(statusBody(403, 'Forbidden', `${req.resource.plural}${g} "${name}" is forbidden: ${reason}`, { name, ...(req.resource.group ? { group: req.resource.group } : {}), kind: req.resource.plural }))
}

interface Related {
  readonly pods: Set<string>
  readonly configmaps: Set<string>
  readonly secrets: Set<string>
  readonly persistentvolumeclaims: Set<string>
  readonly persistentvolumes: Set<string>
  readonly serviceaccounts: Set<string>
}

type Volume = {
  name?: string
  ephemeral?: object
  configMap?: { name?: string }
  secret?: { secretName?: string }
  persistentVolumeClaim?: { claimName?: string }
  projected?: { sources?: { configMap?: { name?: string }; secret?: { name?: string } }[] }
  csi?: { nodePublishSecretRef?: { name?: string } }
}

/**
 * The graphs already built, per store and node. As the real authorizer keeps a graph it updates on
 * pod, claim and volume changes (rather than reading every pod on each request), a graph here is
 * kept until one of those changes: a fleet of nodes each asking for its objects stays cheap.
 */
const graphs = new WeakMap<FakeStore, Map<string, Related>>()
const GRAPH_RESOURCES = new Set(['pods', 'persistentvolumeclaims', 'persistentvolumes'])

function relatedTo(store: FakeStore, node: string): Related {
  let byNode = graphs.get(store)
  if (!byNode) {
    const built = new Map<string, Related>()
    store.subscribe((change) => {
      if (GRAPH_RESOURCES.has(change.resource.plural)) built.clear()
    })
    graphs.set(store, built)
    byNode = built
  }
  let related = byNode.get(node)
  if (!related) {
    related = buildGraph(store, node)
    byNode.set(node, related)
  }
  return related
}

/** The graph of objects related to a node, from the pods bound to it. */
function buildGraph(store: FakeStore, node: string): Related {
  const related: Related = {
    pods: new Set(),
    configmaps: new Set(),
    secrets: new Set(),
    persistentvolumeclaims: new Set(),
    persistentvolumes: new Set(),
    serviceaccounts: new Set(),
  }
  for (const pod of store.objects(resourceOf('pods'))) {
    const spec = pod.spec as { nodeName?: string; volumes?: Volume[]; serviceAccountName?: string } | undefined
    if (spec?.nodeName !== node) continue
    const ns = pod.metadata.namespace ?? 'default'
    related.pods.add(`${ns}/${pod.metadata.name}`)
    related.serviceaccounts.add(`${ns}/${spec.serviceAccountName ?? 'default'}`)
    for (const v of spec.volumes ?? []) {
      if (v.configMap?.name) related.configmaps.add(`${ns}/${v.configMap.name}`)
      if (v.secret?.secretName) related.secrets.add(`${ns}/${v.secret.secretName}`)
      if (v.csi?.nodePublishSecretRef?.name) related.secrets.add(`${ns}/${v.csi.nodePublishSecretRef.name}`)
      for (const s of v.projected?.sources ?? []) {
        if (s.configMap?.name) related.configmaps.add(`${ns}/${s.configMap.name}`)
        if (s.secret?.name) related.secrets.add(`${ns}/${s.secret.name}`)
      }
      // A generic ephemeral volume's claim is named `<pod>-<volume>`.
      const claim = v.persistentVolumeClaim?.claimName ?? (v.ephemeral ? `${pod.metadata.name}-${v.name ?? ''}` : undefined)
      if (!claim) continue
      related.persistentvolumeclaims.add(`${ns}/${claim}`)
      const pvc = store.get(resourceOf('persistentvolumeclaims'), ns, claim)
      const pvName = (pvc?.spec as { volumeName?: string } | undefined)?.volumeName
      if (!pvName) continue
      related.persistentvolumes.add(`/${pvName}`)
      const pv = store.get(resourceOf('persistentvolumes'), undefined, pvName)
      const csi = (pv?.spec as { csi?: Record<string, { name?: string; namespace?: string } | undefined> } | undefined)?.csi
      for (const ref of ['nodeStageSecretRef', 'nodePublishSecretRef', 'nodeExpandSecretRef']) {
        const r = csi?.[ref]
        if (r && typeof r === 'object' && r.name) related.secrets.add(`${r.namespace ?? ns}/${r.name}`)
      }
    }
  }
  return related
}

/** The single name a list or watch is restricted to by `metadata.name=<name>`, if any. */
function selectedName(fields: readonly FieldRequirement[]): string | undefined {
  return fields.find((f) => f.field === 'metadata.name' && f.op === '=')?.value
}

/** Undefined when allowed; the 403 to answer otherwise. Users other than nodes may do anything. */
export function authorize(store: FakeStore, identity: Identity, req: AuthzRequest): StatusError | undefined {
  const node = nodeOf(identity)
  if (node === undefined) return undefined
  const { verb, resource: r } = req
  const read = verb === 'get' || verb === 'list' || verb === 'watch'
  switch (r.plural) {
    case 'pods': {
      if (verb === 'list' || verb === 'watch') {
        const bound = req.fieldSelector.some((f) => f.field === 'spec.nodeName' && f.op === '=' && f.value === node)
        return bound ? undefined : forbidden(identity, req, 'can only list/watch pods with spec.nodeName field selector')
      }
      if (verb === 'create') return forbidden(identity, req, 'a node may only create mirror pods')
      const pod = req.name ? store.get(r, req.namespace, req.name) : undefined
      if (!pod) return undefined // 404 follows
      const boundTo = (pod.spec as { nodeName?: string } | undefined)?.nodeName
      if (boundTo !== node) return forbidden(identity, req, `no relationship found between node '${node}' and this object`)
      if ((verb === 'patch' || verb === 'update') && req.subresource !== 'status') return forbidden(identity, req, 'a node may only update the status of its pods')
      return undefined
    }
    case 'nodes': {
      if (read) return undefined
      // NodeRestriction: a node creates and changes only its own Node, and sets only the labels a kubelet may.
      const target = verb === 'create' ? req.body?.metadata?.name : req.name
      if (target !== node) return admissionForbidden(req, target ?? '', `node "${node}" is not allowed to modify node "${target ?? ''}"`)
      const labels = verb === 'create' ? forbiddenNodeLabels(Object.keys(req.body?.metadata?.labels ?? {})) : []
      if (labels.length > 0) return admissionForbidden(req, node, `node "${node}" is not allowed to set the following labels: ${labels.join(', ')}`)
      return undefined
    }
    case 'events':
      return verb === 'create' || verb === 'patch' || verb === 'update' ? undefined : forbidden(identity, req, 'a node may only create and patch events')
    case 'csidrivers':
      return read ? undefined : forbidden(identity, req, 'a node may only read CSI drivers')
    case 'csinodes':
      // Its own only (NodeRestriction checks the name of a created one).
      if (verb === 'create' || req.name === node) return undefined
      return forbidden(identity, req, `node "${node}" may only access its own CSINode`)
    case 'volumeattachments': {
      if (verb !== 'get' || !req.name) return forbidden(identity, req, 'can only get individual resources of this type')
      const va = store.get(r, undefined, req.name)
      if (va && (va.spec as { nodeName?: string } | undefined)?.nodeName !== node) return forbidden(identity, req, `no relationship found between node '${node}' and this object`)
      return undefined
    }
    case 'serviceaccounts': {
      const related = relatedTo(store, node)
      if (req.subresource !== 'token' || verb !== 'create') return forbidden(identity, req, 'a node may only request tokens')
      if (!related.serviceaccounts.has(`${req.namespace ?? 'default'}/${req.name ?? ''}`)) return forbidden(identity, req, `no relationship found between node '${node}' and this object`)
      const bound = (req.body?.spec as { boundObjectRef?: { kind?: string; name?: string } } | undefined)?.boundObjectRef
      if (bound?.kind !== 'Pod' || !related.pods.has(`${req.namespace ?? 'default'}/${bound.name ?? ''}`)) {
        return forbidden(identity, req, 'node requested token not bound to a pod scheduled on this node')
      }
      return undefined
    }
    case 'configmaps':
    case 'secrets':
    case 'persistentvolumeclaims':
    case 'persistentvolumes': {
      // A claim's status, as a node writes the progress of a node expansion (what it may change is
      // NodeRestriction's, in admitNodeUpdate).
      const claimStatus = r.plural === 'persistentvolumeclaims' && req.subresource === 'status' && (verb === 'patch' || verb === 'update')
      if (!read && !claimStatus) return forbidden(identity, req, `a node may only read ${r.plural}`)
      const name = verb === 'list' || verb === 'watch' ? selectedName(req.fieldSelector) : req.name
      if (!name) return forbidden(identity, req, `node "${node}" can only ${verb} individual ${r.plural} it has a relationship with (metadata.name field selector)`)
      const related = relatedTo(store, node)[r.plural]
      const key = `${r.namespaced ? (req.namespace ?? 'default') : ''}/${name}`
      return related.has(key) ? undefined : forbidden({ ...identity }, { ...req, name }, `no relationship found between node '${node}' and this object`)
    }
    default:
      return forbidden(identity, req, 'not allowed for nodes')
  }
}

/** The status fields of a claim a node may change (NodeRestriction with RecoverVolumeExpansionFailure). */
const NODE_PVC_STATUS_FIELDS = new Set(['capacity', 'conditions', 'allocatedResourceStatuses'])

/**
 * NodeRestriction on an update or patch a node sends, once the new object is known: of a claim, only
 * `status.capacity`, `status.conditions` and `status.allocatedResourceStatuses` may change. Undefined
 * when admitted (and for every other user and resource).
 */
export function admitNodeUpdate(identity: Identity, resource: ResourceInfo, current: KubeObject, next: KubeObject): StatusError | undefined {
  const node = nodeOf(identity)
  if (node === undefined || resource.plural !== 'persistentvolumeclaims') return undefined
  const rest = (o: KubeObject): unknown => {
    const { resourceVersion: _rv, managedFields: _mf, ...metadata } = o.metadata as Record<string, unknown>
    const status = Object.fromEntries(Object.entries((o.status ?? {}) as Record<string, unknown>).filter(([k]) => !NODE_PVC_STATUS_FIELDS.has(k)))
    return { ...o, metadata, status }
  }
  if (JSON.stringify(sorted(rest(current))) === JSON.stringify(sorted(rest(next)))) return undefined
  const name = current.metadata.name ?? ''
  return new StatusError(
    statusBody(403, 'Forbidden', `persistentvolumeclaims "${name}" is forbidden: node "${node}" is not allowed to update fields other than status.capacity and status.conditions`, {
      name,
      kind: 'persistentvolumeclaims',
    }),
  )
}

/** `value` with every object's keys in order, for a comparison that ignores key order. */
function sorted(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sorted)
  if (typeof value !== 'object' || value === null) return value
  return Object.fromEntries(Object.keys(value).sort().map((k) => [k, sorted((value as Record<string, unknown>)[k])]))
}
