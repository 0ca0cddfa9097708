/**
 * Field errors in the API server's words (`field.ErrorList` of k8s.io/apimachinery), and the name
 * checks they are made of. A message reads like the API server's:
 * `spec.containers[0].name: Invalid value: "../x": a lowercase RFC 1123 label must consist of ...`.
 */

/** Where a field is: keys and list indexes from the object's root, e.g. `['spec', 'containers', 0, 'name']`. */
export type FieldPath = readonly (string | number)[]

/** One thing wrong with one field of an object. */
export interface FieldError {
  readonly path: FieldPath
  /** The whole text, field included: `spec.volumes[1].name: Duplicate value: "data"`. */
  readonly message: string
}

/** `spec.containers[0].name` for `['spec', 'containers', 0, 'name']`. */
function fieldPathString(path: FieldPath): string {
  let text = ''
  for (const part of path) text += typeof part === 'number' ? `[${part}]` : text === '' ? part : `.${part}`
  return text
}

/** A value quoted as the API server quotes it, cut short when long; control characters escaped. */
function quoteValue(value: unknown): string {
  const text = typeof value === 'string' ? value : String(value)
  return JSON.stringify(text.length > 80 ? `${text.slice(0, 80)}…` : text)
}

/** `<field>: Invalid value: "<value>": <detail>` */
export function invalidField(path: FieldPath, value: unknown, detail: string): FieldError {
  return { path, message: `${fieldPathString(path)}: Invalid value: ${quoteValue(value)}: ${detail}` }
}

/** `<field>: Invalid value: must be <what>`, for a value of the wrong type (a manifest can hold anything). */
export function wrongTypeField(path: FieldPath, what: string): FieldError {
  return { path, message: `${fieldPathString(path)}: Invalid value: must be ${what}` }
}

/** `<field>: Required value` */
export function requiredField(path: FieldPath, detail?: string): FieldError {
  return { path, message: `${fieldPathString(path)}: Required value${detail ? `: ${detail}` : ''}` }
}

/** `<field>: Duplicate value: "<value>"` */
export function duplicateField(path: FieldPath, value: unknown): FieldError {
  return { path, message: `${fieldPathString(path)}: Duplicate value: ${quoteValue(value)}` }
}

/** `<field>: Not found: "<value>"` */
export function notFoundField(path: FieldPath, value: unknown): FieldError {
  return { path, message: `${fieldPathString(path)}: Not found: ${quoteValue(value)}` }
}

/** `<field>: Unsupported value: "<value>": supported values: "a", "b"` */
export function notSupportedField(path: FieldPath, value: unknown, supported: readonly string[]): FieldError {
  return { path, message: `${fieldPathString(path)}: Unsupported value: ${quoteValue(value)}: supported values: ${supported.map((v) => JSON.stringify(v)).join(', ')}` }
}

/** `<field>: Forbidden: <detail>` */
export function forbiddenField(path: FieldPath, detail: string): FieldError {
  return { path, message: `${fieldPathString(path)}: Forbidden: ${detail}` }
}

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/

/** Null for a DNS-1123 label (namespaces, container and volume names), else the API server's reason. */
export function dns1123LabelError(value: string): string | null {
  if (value.length > 63) return 'must be no more than 63 characters'
  if (!DNS1123_LABEL.test(value)) {
    return "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"
  }
  return null
}

/** Null for a DNS-1123 subdomain (object names), else the API server's reason. */
export function dns1123SubdomainError(value: string): string | null {
  if (value.length > 253) return 'must be no more than 253 characters'
  if (!DNS1123_SUBDOMAIN.test(value)) {
    return "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
  }
  return null
}

/** The longest file name Linux takes (NAME_MAX), in bytes. */
const NAME_MAX_BYTES = 255
// biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
const CONTROL = /[\u0000-\u001f\u007f]/
// A lone surrogate is written to disk as U+FFFD: two different names would be one directory.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

function utf8Length(value: string): number {
  let bytes = 0
  for (const ch of value) {
    const code = ch.codePointAt(0) as number
    bytes += code < 0x80 ? 1 : code < 0x800 ? 2 : code < 0x10000 ? 3 : 4
  }
  return bytes
}

/**
 * Null when `value` names exactly one directory entry wherever it is joined (not empty, not `.` or
 * `..`, no `/`, no NUL or other control character, no lone surrogate, at most 255 UTF-8 bytes),
 * else why not. The check every name that becomes a path component passes, whatever its source.
 */
export function pathComponentError(value: string): string | null {
  if (value === '') return 'must not be empty'
  if (value === '.' || value === '..') return `must not be '${value}'`
  if (value.includes('/')) return "must not contain '/'"
  if (CONTROL.test(value)) return 'must not contain control characters'
  if (LONE_SURROGATE.test(value)) return 'must be valid unicode'
  if (value.length * 3 > NAME_MAX_BYTES && utf8Length(value) > NAME_MAX_BYTES) return `must be no more than ${NAME_MAX_BYTES} bytes`
  return null
}
