/**
 * Parses a manifest file (YAML or JSON, several documents, `kind: List` too) into the objects kubevol
 * reads, and says exactly what is wrong with the rest: the file, the line of the offending field and
 * the reason.
 */
import { type Document, LineCounter, isMap, isNode, isScalar, isSeq, parseAllDocuments } from 'yaml'
import { validatePod } from '@kubevol/core'
import * as z from 'zod/mini'
import { withEnglishMessages } from '../zod-messages.js'

/** The kinds a manifest directory may hold. */
export const MANIFEST_KINDS = ['Pod', 'PersistentVolumeClaim', 'PersistentVolume', 'ConfigMap', 'Secret', 'CSIDriver'] as const
export type ManifestKind = (typeof MANIFEST_KINDS)[number]

/** One valid object of a manifest file. */
export interface ManifestObject {
  readonly kind: ManifestKind
  /** The object as written (plain JSON values). */
  readonly object: Record<string, unknown>
  readonly file: string
  /** 1-based line of the object's first line. */
  readonly line: number
}

/** Why a document or object of a manifest file was refused. */
export interface ManifestError {
  readonly file: string
  /** 1-based line of the offending field (or of the document). */
  readonly line: number
  readonly reason: string
}

export interface ParsedManifests {
  readonly objects: ManifestObject[]
  readonly errors: ManifestError[]
}

// A DNS-1123 subdomain (object names) and label (namespaces), as the API server checks them.
const subdomain = z.string().check(z.maxLength(253), z.regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/, 'must be a lowercase RFC 1123 subdomain'))
const label = z.string().check(z.maxLength(63), z.regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be a lowercase RFC 1123 label'))
const metadata = z.looseObject({
  name: subdomain,
  namespace: z.optional(label),
  uid: z.optional(z.string().check(z.minLength(1))),
  labels: z.optional(z.record(z.string(), z.string())),
  annotations: z.optional(z.record(z.string(), z.string())),
})
const clusterMetadata = z.extend(z.omit(metadata, { namespace: true }), { namespace: z.optional(z.undefined({ error: 'a cluster-scoped object has no namespace' })) })
const nonEmpty = z.string().check(z.minLength(1))
const base64 = z.string().check(z.regex(/^[A-Za-z0-9+/]*={0,2}$/, 'must be base64'))
const container = z.looseObject({
  name: nonEmpty,
  volumeMounts: z.optional(z.array(z.looseObject({ name: nonEmpty, mountPath: nonEmpty }))),
  volumeDevices: z.optional(z.array(z.looseObject({ name: nonEmpty, devicePath: nonEmpty }))),
})

const schemas: Record<ManifestKind, z.ZodMiniType> = withEnglishMessages({
  Pod: z.looseObject({
    apiVersion: z.literal('v1'),
    metadata,
    spec: z.looseObject({
      nodeName: z.optional(z.string()),
      volumes: z.optional(z.array(z.looseObject({ name: label }))),
      containers: z.array(container).check(z.minLength(1)),
      initContainers: z.optional(z.array(container)),
    }),
  }),
  PersistentVolumeClaim: z.looseObject({
    apiVersion: z.literal('v1'),
    metadata,
    spec: z.optional(z.looseObject({ volumeName: z.optional(z.string()) })),
  }),
  PersistentVolume: z.looseObject({ apiVersion: z.literal('v1'), metadata: clusterMetadata, spec: z.looseObject({}) }),
  ConfigMap: z.looseObject({
    apiVersion: z.literal('v1'),
    metadata,
    data: z.optional(z.record(z.string(), z.string())),
    binaryData: z.optional(z.record(z.string(), base64)),
  }),
  Secret: z.looseObject({
    apiVersion: z.literal('v1'),
    metadata,
    data: z.optional(z.record(z.string(), base64)),
    stringData: z.optional(z.record(z.string(), z.string())),
  }),
  CSIDriver: z.looseObject({ apiVersion: z.literal('storage.k8s.io/v1'), metadata: clusterMetadata, spec: z.optional(z.looseObject({})) }),
})

type Path = readonly (string | number)[]

const MAX_FLOW_DEPTH = 100
/** Field errors of one pod quoted in its error; the count of the others follows. */
const MAX_FIELD_ERRORS = 5

/**
 * The 1-based line where `[`/`{` nesting (outside quoted scalars and comments) first exceeds
 * `limit`, or undefined. An approximation on the safe side: a bracket in a plain scalar counts too.
 */
function flowNestingBeyond(text: string, limit: number): number | undefined {
  let depth = 0
  let line = 1
  let quote: '"' | "'" | undefined
  let comment = false
  for (let i = 0; i < text.length; i++) {
    const c = text[i]
    if (c === '\n') {
      line++
      comment = false
      continue
    }
    if (comment) continue
    if (quote) {
      if (quote === '"' && c === '\\') i++
      else if (c === quote) quote = undefined
      continue
    }
    if (c === '"' || c === "'") quote = c
    else if (c === '#' && (i === 0 || text[i - 1] === ' ' || text[i - 1] === '\t' || text[i - 1] === '\n')) comment = true
    else if (c === '[' || c === '{') {
      if (++depth > limit) return line
    } else if ((c === ']' || c === '}') && depth > 0) depth--
  }
  return undefined
}

/**
 * The 1-based line of the field at `path` (its key, for a mapping entry), or of its nearest ancestor
 * that exists: a missing field is reported where its parent is written.
 */
function lineOf(doc: Document, lines: LineCounter, path: Path): number {
  for (let n = path.length; n > 0; n--) {
    const parent = n === 1 ? doc.contents : doc.getIn(path.slice(0, n - 1), true)
    const last = path[n - 1]
    if (isMap(parent)) {
      const pair = parent.items.find((p) => isScalar(p.key) && p.key.value === last)
      const key = pair?.key
      if (isNode(key) && key.range) return lines.linePos(key.range[0]).line
    } else if (isSeq(parent) && typeof last === 'number') {
      const item = parent.items[last]
      if (isNode(item) && item.range) return lines.linePos(item.range[0]).line
    }
  }
  const root = doc.contents
  return isNode(root) && root.range ? lines.linePos(root.range[0]).line : 1
}

function describePath(path: Path): string {
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? p : `.${p}`)).join('')
}

/**
 * The rest of what the API server checks in a pod that passed the schema (the kubelet validates
 * static pods the same way): UID, names, mounts, devices, each of which may become a directory
 * name. One error for the pod, at the line of its first bad field, quoting a few field errors.
 */
function podProblemOf(pod: Record<string, unknown>): { path: Path; reason: string } | undefined {
  const invalid = validatePod(pod)
  const first = invalid[0]
  if (!first) return undefined
  const shown = invalid.slice(0, MAX_FIELD_ERRORS).map((e) => e.message)
  if (invalid.length > MAX_FIELD_ERRORS) shown.push(`and ${invalid.length - MAX_FIELD_ERRORS} more`)
  const name = (pod.metadata as { name: string }).name
  return { path: first.path, reason: `Pod ${name}: ${shown.join('; ')}` }
}

/**
 * Parses every document of `text`. A document that is not valid YAML, or an object that is not a
 * valid object of a {@link ManifestKind}, becomes a {@link ManifestError}; the others are returned.
 */
export function parseManifests(text: string, file: string): ParsedManifests {
  // Deeply nested flow collections exhaust the parser's stack in a way that can end the process
  // (not only throw): refuse them before parsing. Kubernetes objects nest a few levels deep.
  const tooDeep = flowNestingBeyond(text, MAX_FLOW_DEPTH)
  if (tooDeep !== undefined) {
    return { objects: [], errors: [{ file, line: tooDeep, reason: `invalid YAML: collections nested more than ${MAX_FLOW_DEPTH} levels deep` }] }
  }
  const lines = new LineCounter()
  const objects: ManifestObject[] = []
  const errors: ManifestError[] = []
  const docs = parseAllDocuments(text, { lineCounter: lines, prettyErrors: false, uniqueKeys: true })
  // parseAllDocuments returns an EmptyStream (an array) for empty input, or a list of documents.
  for (const doc of Array.isArray(docs) ? docs : []) {
    const yamlError = doc.errors[0]
    if (yamlError) {
      const line = yamlError.linePos?.[0]?.line ?? lines.linePos(yamlError.pos[0]).line
      errors.push({ file, line, reason: `invalid YAML: ${yamlError.message.split('\n')[0]}` })
      continue
    }
    let value: unknown
    try {
      // Throws on alias expansion beyond a bound (a "billion laughs" document).
      value = doc.toJS()
    } catch (err) {
      errors.push({ file, line: lineOf(doc, lines, []), reason: `invalid YAML: ${err instanceof Error ? err.message : String(err)}` })
      continue
    }
    if (value === null || value === undefined) continue
    const validate = (object: unknown, at: Path): void => {
      const line = lineOf(doc, lines, at)
      if (typeof object !== 'object' || object === null || Array.isArray(object)) {
        errors.push({ file, line, reason: 'expected an object with apiVersion, kind and metadata' })
        return
      }
      const kind = (object as { kind?: unknown }).kind
      if (kind === 'List') {
        const items = (object as { items?: unknown }).items
        if (!Array.isArray(items)) {
          errors.push({ file, line, reason: 'a List needs items' })
          return
        }
        for (const [i, item] of items.entries()) validate(item, [...at, 'items', i])
        return
      }
      if (typeof kind !== 'string' || !(MANIFEST_KINDS as readonly string[]).includes(kind)) {
        errors.push({
          file,
          line: lineOf(doc, lines, [...at, 'kind']),
          reason: `kind ${JSON.stringify(kind)} is not supported here; allowed: ${MANIFEST_KINDS.join(', ')} (or a List of them)`,
        })
        return
      }
      const result = (schemas[kind as ManifestKind] as z.ZodMiniType).safeParse(object)
      if (!result.success) {
        const issue = result.error.issues[0] as z.core.$ZodIssue
        const name = (object as { metadata?: { name?: unknown } }).metadata?.name
        const subject = `${kind}${typeof name === 'string' ? ` ${name}` : ''}`
        errors.push({
          file,
          line: lineOf(doc, lines, [...at, ...(issue.path as Path)]),
          reason: `${subject}: ${describePath(issue.path as Path) || 'object'}: ${issue.message}`,
        })
        return
      }
      const podProblem = kind === 'Pod' ? podProblemOf(object as Record<string, unknown>) : undefined
      if (podProblem) {
        errors.push({ file, line: lineOf(doc, lines, [...at, ...podProblem.path]), reason: podProblem.reason })
        return
      }
      objects.push({ kind: kind as ManifestKind, object: object as Record<string, unknown>, file, line })
    }
    validate(value, [])
  }
  return { objects, errors }
}
