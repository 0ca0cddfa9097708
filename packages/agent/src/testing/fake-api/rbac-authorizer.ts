/**
 * The RBAC authorizer, for the identities the Node authorizer does not decide (a ServiceAccount, a
 * user): ClusterRoles and Roles granted by ClusterRoleBindings (everywhere) and RoleBindings (in their
 * namespace), as the API server evaluates them. A rule names API groups, resources (`pods`,
 * `nodes/status`, `*`), verbs and optionally resource names; a list or watch restricted to one name by
 * `metadata.name=<name>` counts as a request for that name, as the API server's request info says.
 * `system:masters` may do anything. A refusal is the API server's 403, without a reason after it.
 */
import type { AuthzRequest, Identity } from './node-authorizer.js'
import { StatusError, statusBody } from './status.js'

/** One rule of a (Cluster)Role. */
interface RbacRule {
  readonly apiGroups?: readonly string[]
  readonly resources?: readonly string[]
  readonly verbs: readonly string[]
  readonly resourceNames?: readonly string[]
}

interface Subject {
  readonly kind: string
  readonly name: string
  readonly namespace?: string
}

/** A ClusterRole, Role, ClusterRoleBinding or RoleBinding as parsed from its manifest. */
type RbacObject = {
  readonly kind?: string
  readonly metadata?: { readonly name?: string; readonly namespace?: string }
  readonly rules?: readonly RbacRule[]
  readonly roleRef?: { readonly kind: string; readonly name: string }
  readonly subjects?: readonly Subject[]
}

/** Answers undefined when RBAC allows the request, else the 403 to send. */
export type RbacAuthorizer = (identity: Identity, req: AuthzRequest) => StatusError | undefined

function subjectMatches(s: Subject, identity: Identity): boolean {
  if (s.kind === 'User') return s.name === identity.user
  if (s.kind === 'Group') return identity.groups.includes(s.name)
  if (s.kind === 'ServiceAccount') return identity.user === `system:serviceaccount:${s.namespace ?? ''}:${s.name}`
  return false
}

function ruleAllows(rule: RbacRule, req: AuthzRequest, name: string | undefined): boolean {
  const resource = req.subresource ? `${req.resource.plural}/${req.subresource}` : req.resource.plural
  const has = (list: readonly string[] | undefined, value: string) => (list ?? []).includes(value) || (list ?? []).includes('*')
  if (!has(rule.apiGroups, req.resource.group) || !has(rule.resources, resource) || !has(rule.verbs, req.verb)) return false
  if (rule.resourceNames && rule.resourceNames.length > 0) return name !== undefined && rule.resourceNames.includes(name)
  return true
}

/**
 * The RBAC authorizer of these objects (other kinds are ignored). The objects are read once: a test
 * that changes RBAC starts another fake.
 */
export function createRbacAuthorizer(objects: readonly Record<string, unknown>[]): RbacAuthorizer {
  const all = objects as readonly RbacObject[]
  const roleRules = (kind: string, name: string, namespace?: string): readonly RbacRule[] =>
    all.find((o) => o.kind === kind && o.metadata?.name === name && (kind === 'ClusterRole' || o.metadata?.namespace === namespace))?.rules ?? []
  return (identity, req) => {
    if (identity.groups.includes('system:masters')) return undefined
    // A list or watch with metadata.name=<name> is a request for that name (the API server's request info).
    const name = req.name ?? (req.verb === 'list' || req.verb === 'watch' ? req.fieldSelector.find((f) => f.field === 'metadata.name' && f.op === '=')?.value : undefined)
    for (const b of all) {
      if (b.kind !== 'ClusterRoleBinding' && b.kind !== 'RoleBinding') continue
      if (!b.roleRef || !(b.subjects ?? []).some((s) => subjectMatches(s, identity))) continue
      // A RoleBinding grants only in its own namespace.
      if (b.kind === 'RoleBinding' && req.namespace !== b.metadata?.namespace) continue
      const rules = roleRules(b.roleRef.kind, b.roleRef.name, b.metadata?.namespace)
      if (rules.some((rule) => ruleAllows(rule, req, name))) return undefined
    }
    const res = `${req.resource.plural}${req.subresource ? `/${req.subresource}` : ''}`
    const qualified = req.resource.group ? `${req.resource.plural}.${req.resource.group}` : req.resource.plural
    const subject = name ? `${qualified} "${name}"` : qualified
    const scope = req.namespace ? `in the namespace "${req.namespace}"` : 'at the cluster scope'
    const message = `${subject} is forbidden: User "${identity.user}" cannot ${req.verb} resource "${res}" in API group "${req.resource.group}" ${scope}`
    return new StatusError(statusBody(403, 'Forbidden', message, { ...(name ? { name } : {}), ...(req.resource.group ? { group: req.resource.group } : {}), kind: req.resource.plural }))
  }
}
