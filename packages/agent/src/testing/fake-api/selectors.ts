/**
 * Field and label selectors as the API server parses and applies them, including its refusal of a
 * field a resource does not index: `400 field label not supported: spec.foo`.
 */

/** Field labels every resource supports. */
const COMMON_FIELDS = ['metadata.name', 'metadata.namespace']

/** Field labels per resource beyond the common ones (as kube-apiserver v1.32 registers them). */
const RESOURCE_FIELDS: Readonly<Record<string, readonly string[]>> = {
  pods: [
    'spec.nodeName',
    'spec.restartPolicy',
    'spec.schedulerName',
    'spec.serviceAccountName',
    'spec.hostNetwork',
    'status.phase',
    'status.podIP',
    'status.podIPs',
    'status.nominatedNodeName',
  ],
  events: [
    'involvedObject.kind',
    'involvedObject.namespace',
    'involvedObject.name',
    'involvedObject.uid',
    'involvedObject.apiVersion',
    'involvedObject.resourceVersion',
    'involvedObject.fieldPath',
    'reason',
    'reportingComponent',
    'source',
    'type',
  ],
  secrets: ['type'],
  nodes: ['spec.unschedulable'],
}

export interface FieldRequirement {
  readonly field: string
  readonly op: '=' | '!='
  readonly value: string
}

/** A parsed selector, or the API's message for why it is refused. */
export type Parsed<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly message: string }

/** Parses `a=b,c!=d` for `resource`; unsupported labels are refused as the API server does. */
export function parseFieldSelector(selector: string | null | undefined, resource: string): Parsed<FieldRequirement[]> {
  if (!selector) return { ok: true, value: [] }
  const value: FieldRequirement[] = []
  for (const term of selector.split(',')) {
    if (term === '') continue
    const m = /^([^=!]+)(==|=|!=)(.*)$/.exec(term)
    if (!m) return { ok: false, message: `invalid selector: '${selector}'; can't understand '${term}'` }
    const field = (m[1] as string).trim()
    if (!COMMON_FIELDS.includes(field) && !(RESOURCE_FIELDS[resource] ?? []).includes(field)) {
      return { ok: false, message: `field label not supported: ${field}` }
    }
    value.push({ field, op: m[2] === '!=' ? '!=' : '=', value: (m[3] as string).trim() })
  }
  return { ok: true, value }
}

function fieldValue(object: Record<string, unknown>, field: string): string {
  if (field === 'source') {
    const source = object.source as { component?: string } | undefined
    return source?.component ?? ''
  }
  let cur: unknown = object
  for (const part of field.split('.')) cur = typeof cur === 'object' && cur !== null ? (cur as Record<string, unknown>)[part] : undefined
  if (cur === undefined || cur === null) return field === 'spec.hostNetwork' || field === 'spec.unschedulable' ? 'false' : ''
  if (Array.isArray(cur)) return cur.map((c) => (typeof c === 'object' && c !== null ? String((c as { ip?: string }).ip ?? '') : String(c))).join(',')
  return String(cur)
}

/** True when `object` meets every requirement. */
export function matchesFields(object: Record<string, unknown>, requirements: readonly FieldRequirement[]): boolean {
  return requirements.every((r) => (fieldValue(object, r.field) === r.value) === (r.op === '='))
}

export interface LabelRequirement {
  readonly key: string
  readonly op: 'in' | 'notin' | 'exists' | '!exists'
  readonly values: readonly string[]
}

/** Parses `a=b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`, comma-separated. */
export function parseLabelSelector(selector: string | null | undefined): Parsed<LabelRequirement[]> {
  if (!selector) return { ok: true, value: [] }
  const value: LabelRequirement[] = []
  // Split on commas outside parentheses.
  const terms: string[] = []
  let depth = 0
  let cur = ''
  for (const ch of selector) {
    if (ch === '(') depth++
    if (ch === ')') depth--
    if (ch === ',' && depth === 0) {
      terms.push(cur)
      cur = ''
    } else cur += ch
  }
  terms.push(cur)
  for (const raw of terms) {
    const term = raw.trim()
    if (!term) continue
    let m: RegExpExecArray | null
    if ((m = /^([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(term))) {
      value.push({ key: m[1] as string, op: m[2] as 'in' | 'notin', values: (m[3] as string).split(',').map((v) => v.trim()) })
    } else if ((m = /^([\w./-]+)\s*(==|=|!=)\s*([\w./-]*)$/.exec(term))) {
      value.push({ key: m[1] as string, op: m[2] === '!=' ? 'notin' : 'in', values: [m[3] as string] })
    } else if ((m = /^!([\w./-]+)$/.exec(term))) {
      value.push({ key: m[1] as string, op: '!exists', values: [] })
    } else if ((m = /^([\w./-]+)$/.exec(term))) {
      value.push({ key: m[1] as string, op: 'exists', values: [] })
    } else {
      return { ok: false, message: `unable to parse requirement: ${term}` }
    }
  }
  return { ok: true, value }
}

/** True when `object`'s labels meet every requirement. */
export function matchesLabels(object: Record<string, unknown>, requirements: readonly LabelRequirement[]): boolean {
  const labels = ((object.metadata as { labels?: Record<string, string> } | undefined)?.labels ?? {}) as Record<string, string>
  return requirements.every((r) => {
    const has = Object.hasOwn(labels, r.key)
    switch (r.op) {
      case 'exists':
        return has
      case '!exists':
        return !has
      case 'in':
        return has && r.values.includes(labels[r.key] as string)
      default:
        return !has || !r.values.includes(labels[r.key] as string)
    }
  })
}
