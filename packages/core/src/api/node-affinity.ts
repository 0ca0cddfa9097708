/**
 * Checks a PV's `nodeAffinity` against the node's labels (MountVolume step 2, SPEC §6.5).
 */
import type { Node, NodeSelectorRequirement, PersistentVolume } from './kubernetes.js'

function matches(req: NodeSelectorRequirement, labels: Readonly<Record<string, string>>): boolean {
  const value = labels[req.key]
  const values = req.values ?? []
  switch (req.operator) {
    case 'In':
      return value !== undefined && values.includes(value)
    case 'NotIn':
      return value === undefined || !values.includes(value)
    case 'Exists':
      return value !== undefined
    case 'DoesNotExist':
      return value === undefined
    case 'Gt':
    case 'Lt': {
      if (value === undefined || values.length !== 1) return false
      const a = Number.parseInt(value, 10)
      const b = Number.parseInt(values[0] as string, 10)
      if (Number.isNaN(a) || Number.isNaN(b)) return false
      return req.operator === 'Gt' ? a > b : a < b
    }
    default:
      return false
  }
}

/**
 * Null when the PV may be used on `node` (no affinity, or one term matches: terms are ORed, the
 * expressions of a term ANDed); otherwise the reason.
 */
export function checkNodeAffinity(pv: PersistentVolume, node: Node): string | null {
  const terms = pv.spec?.nodeAffinity?.required?.nodeSelectorTerms
  if (!terms) return null
  const labels = { ...node.metadata.labels, 'metadata.name': node.metadata.name ?? '' }
  const fields = { 'metadata.name': node.metadata.name ?? '' }
  for (const term of terms) {
    const exprs = term.matchExpressions ?? []
    const fieldExprs = term.matchFields ?? []
    if (exprs.length === 0 && fieldExprs.length === 0) continue
    if (exprs.every((r) => matches(r, labels)) && fieldExprs.every((r) => matches(r, fields))) return null
  }
  return `no matching NodeSelectorTerms for node "${node.metadata.name ?? ''}"`
}
