/**
 * `kubectl apply -f` for the bundle's kinds, as the administrator, over plain HTTP: each manifest is
 * created, or replaced when it exists. And a ClusterRole's rules as a flat list of rights.
 */
import type { ControlPlane } from './control-plane.js'

export interface Manifest {
  readonly apiVersion: string
  readonly kind: string
  readonly metadata: { readonly name: string; readonly namespace?: string; readonly [k: string]: unknown }
  readonly [k: string]: unknown
}

export interface ClusterRole extends Manifest {
  readonly rules: readonly { readonly apiGroups: readonly string[]; readonly resources: readonly string[]; readonly verbs: readonly string[]; readonly resourceNames?: readonly string[] }[]
}

/** The collection path of each kind the bundle holds: [path, namespaced]. */
const COLLECTIONS: Readonly<Record<string, readonly [string, boolean]>> = {
  ServiceAccount: ['/api/v1', true],
  ConfigMap: ['/api/v1', true],
  Secret: ['/api/v1', true],
  Namespace: ['/api/v1', false],
  ClusterRole: ['/apis/rbac.authorization.k8s.io/v1', false],
  ClusterRoleBinding: ['/apis/rbac.authorization.k8s.io/v1', false],
  Role: ['/apis/rbac.authorization.k8s.io/v1', true],
  RoleBinding: ['/apis/rbac.authorization.k8s.io/v1', true],
  CSIDriver: ['/apis/storage.k8s.io/v1', false],
  DaemonSet: ['/apis/apps/v1', true],
  ValidatingAdmissionPolicy: ['/apis/admissionregistration.k8s.io/v1', false],
  ValidatingAdmissionPolicyBinding: ['/apis/admissionregistration.k8s.io/v1', false],
}

/** The plural of a kind, as the API spells its resource. */
const plural = (kind: string): string => (kind.endsWith('y') ? `${kind.slice(0, -1).toLowerCase()}ies` : `${kind.toLowerCase()}s`)

/** Creates each manifest (replacing one that exists), in order; fails with the server's message. */
export async function applyManifests(cp: ControlPlane, manifests: readonly Manifest[]): Promise<void> {
  for (const m of manifests) {
    const collection = COLLECTIONS[m.kind]
    if (!collection) throw new Error(`applyManifests: no path known for kind ${m.kind}`)
    const [prefix, namespaced] = collection
    const ns = namespaced ? `/namespaces/${m.metadata.namespace ?? 'default'}` : ''
    const path = `${prefix}${ns}/${plural(m.kind)}`
    const created = await cp.request('POST', path, m)
    if (created.status === 201) continue
    if (created.status !== 409) throw new Error(`apply ${m.kind} ${m.metadata.name}: HTTP ${created.status}: ${JSON.stringify(created.body).slice(0, 300)}`)
    const current = await cp.must<{ metadata: { resourceVersion: string } }>('GET', `${path}/${m.metadata.name}`)
    await cp.must('PUT', `${path}/${m.metadata.name}`, { ...m, metadata: { ...m.metadata, resourceVersion: current.metadata.resourceVersion } })
  }
}

/** A role's rights as `verb group/resource[/subresource]` (the core group without a prefix), sorted. */
export function rightsOf(role: ClusterRole): string[] {
  const rights = new Set<string>()
  for (const rule of role.rules) {
    for (const group of rule.apiGroups) for (const resource of rule.resources) for (const verb of rule.verbs) rights.add(`${verb} ${group ? `${group}/` : ''}${resource}`)
  }
  return [...rights].sort()
}
