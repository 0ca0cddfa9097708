/**
 * The values of downward API files: pod fields (`fieldRef`, kubelet `fieldpath.ExtractFieldPathAsString`)
 * and container resources (`resourceFieldRef`, kubelet `ExtractResourceValueByContainerNameAndNodeAllocatable`).
 */
import type { Container, Pod, ResourceFieldSelector } from '../api/kubernetes.js'
import { KubevolError } from '../errors.js'
import type { ResourceList } from './atomic-writer-volume.js'

function fieldError(message: string): KubevolError {
  return new KubevolError('InvalidFieldPath', message)
}

/** The value of a map key that the object itself holds (`constructor` is a valid label key). */
function own(map: Readonly<Record<string, string>> | undefined, key: string): string {
  return map && Object.hasOwn(map, key) ? (map[key] as string) : ''
}

/**
 * The text of a pod field. Supported: `metadata.name`, `metadata.namespace`, `metadata.uid`,
 * `metadata.labels`, `metadata.annotations` (all pairs as sorted `key="value"` lines),
 * `metadata.labels['k']`, `metadata.annotations['k']` (one value, "" when absent), and, beyond the
 * kubelet's volumes (which allow only metadata), `spec.nodeName` and `spec.serviceAccountName`.
 * Throws "unsupported fieldPath: X" for anything else (`status.podIP` is not in kubevol's Pod type).
 */
export function podFieldValue(pod: Pod, fieldPath: string): string {
  const subscripted = splitSubscript(fieldPath)
  if (subscripted) {
    const { path, key } = subscripted
    if (path !== 'metadata.labels' && path !== 'metadata.annotations') throw fieldError(`fieldPath "${fieldPath}" does not support subscript`)
    // Annotation keys are checked lowercased, as upstream does.
    const problem = qualifiedNameProblem(path === 'metadata.annotations' ? key.toLowerCase() : key)
    if (problem) throw fieldError(`invalid key subscript in ${fieldPath}: ${problem}`)
    return own(path === 'metadata.labels' ? pod.metadata.labels : pod.metadata.annotations, key)
  }
  switch (fieldPath) {
    case 'metadata.annotations':
      return formatMap(pod.metadata.annotations)
    case 'metadata.labels':
      return formatMap(pod.metadata.labels)
    case 'metadata.name':
      return pod.metadata.name ?? ''
    case 'metadata.namespace':
      return pod.metadata.namespace ?? ''
    case 'metadata.uid':
      return pod.metadata.uid ?? ''
    case 'spec.nodeName':
      return pod.spec?.nodeName ?? ''
    case 'spec.serviceAccountName':
      return pod.spec?.serviceAccountName ?? ''
  }
  throw fieldError(`unsupported fieldPath: ${fieldPath}`)
}

/** `metadata.labels['k']` → `{ path: 'metadata.labels', key: 'k' }` (upstream `SplitMaybeSubscriptedPath`). */
function splitSubscript(fieldPath: string): { path: string; key: string } | null {
  if (!fieldPath.endsWith("']")) return null
  const open = fieldPath.indexOf("['")
  if (open <= 0) return null
  return { path: fieldPath.slice(0, open), key: fieldPath.slice(open + 2, -2) }
}

const NAME_PART = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/

/** Why `value` is not a qualified name (`prefix/name`), or null when it is one. */
function qualifiedNameProblem(value: string): string | null {
  const parts = value.split('/')
  if (parts.length > 2) return `a qualified name must be a name with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`
  const name = parts.length === 2 ? (parts[1] as string) : value
  if (parts.length === 2) {
    const prefix = parts[0] as string
    if (prefix === '') return 'prefix part must be non-empty'
    if (prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix)) return 'prefix part must be a lowercase RFC 1123 subdomain'
  }
  if (name === '') return 'name part must be non-empty'
  if (name.length > 63) return 'name part must be no more than 63 characters'
  if (!NAME_PART.test(name)) return "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
  return null
}

/** Sorted `key="value"` lines, values quoted as Go's `%q` (upstream `fieldpath.FormatMap`). */
export function formatMap(map: Readonly<Record<string, string>> | undefined): string {
  return Object.keys(map ?? {})
    .sort()
    .map((key) => `${key}=${goQuote(own(map, key))}`)
    .join('\n')
}

const GO_ESCAPES: Readonly<Record<string, string>> = {
  '"': '\\"',
  '\\': '\\\\',
  '\x07': '\\a',
  '\b': '\\b',
  '\f': '\\f',
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
  '\v': '\\v',
}
// Go's strconv.IsPrint: letters, marks, numbers, punctuation, symbols and the ASCII space.
const NOT_PRINTABLE = /^[\p{C}\p{Z}]$/u

/** A string quoted as Go's `strconv.Quote`: printable characters kept, the rest escaped. */
export function goQuote(text: string): string {
  let out = '"'
  for (const ch of text) {
    const cp = ch.codePointAt(0) as number
    const hex = (width: number): string => cp.toString(16).padStart(width, '0')
    if (GO_ESCAPES[ch]) out += GO_ESCAPES[ch]
    else if (cp < 0x20 || cp === 0x7f) out += `\\x${hex(2)}`
    else if (cp >= 0xd800 && cp <= 0xdfff) out += '\ufffd' // a lone surrogate becomes U+FFFD in UTF-8
    else if (ch !== ' ' && NOT_PRINTABLE.test(ch)) out += cp < 0x10000 ? `\\u${hex(4)}` : `\\U${hex(8)}`
    else out += ch
  }
  return `${out}"`
}

/** An exact quantity: n / d with d > 0. */
interface Exact {
  readonly n: bigint
  readonly d: bigint
}

const QUANTITY = /^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?([KMGTPE]i|[numkMGTPE])?$/
const BINARY_SHIFT: Readonly<Record<string, number>> = { Ki: 10, Mi: 20, Gi: 30, Ti: 40, Pi: 50, Ei: 60 }
const DECIMAL_EXPONENT: Readonly<Record<string, number>> = { n: -9, u: -6, m: -3, '': 0, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 }

/** Parses a quantity without rounding (api/quantity's parseQuantity rounds up to whole units: 500m → 1). */
function exactQuantity(value: string | number): Exact {
  const match = QUANTITY.exec(String(value).trim())
  const [, sign = '', whole = '', fraction = '', exponent = '0', suffix = ''] = match ?? []
  if (!match || whole + fraction === '') throw new KubevolError('InvalidQuantity', `invalid quantity "${value}"`)
  let n = BigInt(whole + fraction) * (sign === '-' ? -1n : 1n)
  let d = 10n ** BigInt(fraction.length)
  const shift = BINARY_SHIFT[suffix]
  if (shift !== undefined) n *= 2n ** BigInt(shift)
  const e = Number(exponent) + (DECIMAL_EXPONENT[suffix] ?? 0)
  if (e >= 0) n *= 10n ** BigInt(e)
  else d *= 10n ** BigInt(-e)
  return { n, d }
}

/** ⌈a / b⌉ for b > 0. */
function ceilDiv(a: bigint, b: bigint): bigint {
  const q = a / b
  return a % b !== 0n && a > 0n ? q + 1n : q
}

const LIMITS_FROM_ALLOCATABLE = new Set(['cpu', 'memory', 'ephemeral-storage'])

/**
 * The text of a container resource (`limits.cpu`, `requests.memory`, `limits.ephemeral-storage`,
 * `requests.hugepages-2Mi`, ...) divided by `divisor` (default 1) and rounded up, as the kubelet:
 * cpu in units of the divisor's millicores (`250m` with divisor `1m` → `250`, with `1` → `1`),
 * the others in bytes. A request that is not set is the limit (API defaulting), else 0. A cpu,
 * memory or ephemeral-storage limit that is not set (or 0) is the node's allocatable value; throws
 * when `nodeAllocatable` lacks it too. Throws "container X not found" and "unsupported container
 * resource : X" as the kubelet.
 */
export function containerResourceValue(pod: Pod, selector: ResourceFieldSelector, nodeAllocatable?: ResourceList): string {
  const containerName = selector.containerName ?? ''
  if (containerName === '') throw fieldError(`resourceFieldRef "${selector.resource}" needs a containerName in a volume`)
  const all: readonly Container[] = [...(pod.spec?.containers ?? []), ...(pod.spec?.initContainers ?? [])]
  const container = all.find((c) => c.name === containerName)
  if (!container) throw fieldError(`container ${containerName} not found`)
  const match = /^(limits|requests)\.(cpu|memory|ephemeral-storage|hugepages-.+)$/.exec(selector.resource)
  if (!match) throw fieldError(`unsupported container resource : ${selector.resource}`)
  const [, kind, resource] = match as unknown as [string, 'limits' | 'requests', string]
  const limits = container.resources?.limits ?? {}
  let limit = Object.hasOwn(limits, resource) ? limits[resource] : undefined
  if ((limit === undefined || exactQuantity(limit).n === 0n) && LIMITS_FROM_ALLOCATABLE.has(resource)) {
    limit = nodeAllocatable?.[resource]
    if (limit === undefined && kind === 'limits') {
      throw fieldError(`limits.${resource} of container ${containerName} is not set and the node allocatable ${resource} is not known`)
    }
  }
  const requests = container.resources?.requests ?? {}
  const raw = kind === 'limits' ? limit : Object.hasOwn(requests, resource) ? requests[resource] : container.resources?.limits?.[resource]
  const quantity = exactQuantity(raw ?? 0)
  const divisor = exactQuantity(selector.divisor ?? 1)
  // cpu compares millicores, the others whole units (Quantity.MilliValue / Value, both rounded up).
  const scale = resource === 'cpu' ? 1000n : 1n
  const divisorUnits = ceilDiv(divisor.n * scale, divisor.d)
  if (divisorUnits <= 0n) throw fieldError(`invalid divisor "${selector.divisor}" for ${selector.resource}`)
  return ceilDiv(ceilDiv(quantity.n * scale, quantity.d), divisorUnits).toString()
}
