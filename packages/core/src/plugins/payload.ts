/**
 * The payload of an AtomicWriter volume (SPEC §7.6): relative path → file content and mode, plus the
 * path rules of the kubelet's `validatePath` and the byte codecs the volume plugins share.
 */
import type { KeyToPath } from '../api/kubernetes.js'
import { KubevolError } from '../errors.js'
import { encodeUtf8 } from '../text.js'

/** One file of a payload (kubelet `FileProjection`). */
export interface FileProjection {
  /** The content; a string is written as UTF-8. */
  readonly data: Uint8Array | string
  /** Permission bits of the file (e.g. 0o644). Applied exactly, whatever the umask. */
  readonly mode: number
  /** Owner of the file; absent keeps the writer's (root). */
  readonly fsUser?: number
}

/**
 * Relative path → file. A Map, not an object: keys come from ConfigMap and Secret keys, and a key
 * such as `__proto__` is valid there.
 */
export type Payload = ReadonlyMap<string, FileProjection>

/** A payload entry after validation: the cleaned path and the content as bytes. */
export interface CleanFile {
  readonly bytes: Uint8Array
  readonly mode: number
  readonly fsUser?: number
}

/** The kubelet's default file mode of configMap, secret, downwardAPI and projected volumes. */
export const DEFAULT_FILE_MODE = 0o644
/** Longest payload path, in bytes (kubelet `maxPathLength`). */
const MAX_PATH_BYTES = 4096
/** Longest path element, in bytes (kubelet `maxFileNameLength`). */
const MAX_NAME_BYTES = 255

const BASE64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'
const BASE64_VALUE = new Map([...BASE64].map((c, i) => [c, i]))

/**
 * Decodes standard base64 (the JSON form of Secret `data` and ConfigMap `binaryData`). Padding is
 * optional; whitespace is not allowed. Throws on anything else, as Go's decoder does.
 */
export function decodeBase64(text: string): Uint8Array {
  const body = text.endsWith('==') ? text.slice(0, -2) : text.endsWith('=') ? text.slice(0, -1) : text
  if (body.length % 4 === 1 || (body.length !== text.length && text.length % 4 !== 0)) throw new Error('illegal base64 data: bad length')
  const out = new Uint8Array(Math.floor((body.length * 3) / 4))
  let bits = 0
  let value = 0
  let o = 0
  for (let i = 0; i < body.length; i++) {
    const v = BASE64_VALUE.get(body[i] as string)
    if (v === undefined) throw new Error(`illegal base64 data at input byte ${i}`)
    value = (value << 6) | v
    bits += 6
    if (bits >= 8) {
      bits -= 8
      out[o++] = (value >> bits) & 0xff
    }
  }
  return out
}

function invalidPath(message: string): KubevolError {
  return new KubevolError('InvalidPayloadPath', `invalid path: ${message}`)
}

/**
 * Checks one payload path as the kubelet's `validatePath` does, and names the path in the error:
 * non-empty, relative, at most 4096 bytes, elements at most 255 bytes, no `..` element, and the
 * first element must not start with `..` (reserved for `..data` and the timestamped directories).
 */
export function validatePayloadPath(path: string): void {
  if (path === '') throw invalidPath('must not be empty: ""')
  if (path.startsWith('/')) throw invalidPath(`must be relative path: ${path}`)
  if (encodeUtf8(path).length > MAX_PATH_BYTES) throw invalidPath(`must be less than or equal to ${MAX_PATH_BYTES} characters: ${path}`)
  const items = path.split('/')
  for (const item of items) {
    if (item === '..') throw invalidPath(`must not contain '..': ${path}`)
    if (encodeUtf8(item).length > MAX_NAME_BYTES) throw invalidPath(`filenames must be less than or equal to ${MAX_NAME_BYTES} characters: ${path}`)
  }
  const first = items[0] as string
  if (first.startsWith('..') && first.length > 2) throw invalidPath(`must not start with '..': ${path}`)
}

/** `path.Clean` for a validated relative path: no empty or `.` elements, no trailing slash. */
export function cleanPayloadPath(path: string): string {
  return path
    .split('/')
    .filter((item) => item !== '' && item !== '.')
    .join('/')
}

/** The user-visible name of a payload path: its first element (`a` for `a/b/c`). */
export function firstElement(path: string): string {
  const slash = path.indexOf('/')
  return slash === -1 ? path : path.slice(0, slash)
}

/**
 * Validates and cleans every path and encodes the content. Throws on an invalid path, on two paths
 * that clean to the same one, and on a path that is both a file and a directory (`a` and `a/b`).
 */
export function cleanPayload(payload: Payload): ReadonlyMap<string, CleanFile> {
  const clean = new Map<string, CleanFile>()
  for (const [path, file] of payload) {
    validatePayloadPath(path)
    const cleaned = cleanPayloadPath(path)
    if (cleaned === '') throw invalidPath(`must name a file: ${path}`)
    if (clean.has(cleaned)) throw invalidPath(`duplicate path after cleaning: ${path}`)
    const bytes = typeof file.data === 'string' ? encodeUtf8(file.data) : file.data
    clean.set(cleaned, { bytes, mode: file.mode & 0o7777, fsUser: file.fsUser })
  }
  for (const path of clean.keys()) {
    for (let i = path.indexOf('/'); i !== -1; i = path.indexOf('/', i + 1)) {
      if (clean.has(path.slice(0, i))) throw invalidPath(`${path.slice(0, i)} is both a file and a directory`)
    }
  }
  return clean
}

/**
 * Joins payloads in order (projected volume sources). Throws when two sources project the same
 * path ("conflicting duplicate paths", which the API server rejects as well).
 */
export function mergePayloads(parts: readonly Payload[]): Payload {
  const merged = new Map<string, FileProjection>()
  for (const part of parts) {
    for (const [path, file] of part) {
      const key = cleanPayloadPath(path)
      if (merged.has(key)) throw new KubevolError('InvalidPayloadPath', `conflicting duplicate paths: ${key}`)
      merged.set(key, file)
    }
  }
  return merged
}

/**
 * One error for several (apimachinery `NewAggregate`): none → undefined, one → that error itself,
 * more → "[a, b]" with duplicates messages once.
 */
export function aggregateErrors(errors: readonly unknown[]): Error | undefined {
  if (errors.length === 0) return undefined
  if (errors.length === 1 && errors[0] instanceof Error) return errors[0]
  const messages = [...new Set(errors.map((e) => (e instanceof Error ? e.message : String(e))))]
  if (messages.length === 1) return errors[0] instanceof Error ? errors[0] : new KubevolError('AggregateError', messages[0] as string)
  return new KubevolError('AggregateError', `[${messages.join(', ')}]`, { cause: errors })
}

/**
 * The payload of a ConfigMap or Secret (kubelet `MakePayload`): every key of `entries` at a path
 * equal to the key when `items` is absent or empty, else each listed item at its path, with its own
 * mode or `defaultMode`. A listed key `entries` lacks is skipped when `optional`, else throws
 * `missingKey(key)`.
 */
export function keyToPathPayload(
  entries: ReadonlyMap<string, Uint8Array | string>,
  items: readonly KeyToPath[] | undefined,
  defaultMode: number,
  optional: boolean,
  missingKey: (key: string) => string,
): Payload {
  const payload = new Map<string, FileProjection>()
  if (!items || items.length === 0) {
    for (const [key, data] of entries) payload.set(key, { data, mode: defaultMode })
    return payload
  }
  for (const item of items) {
    const data = entries.get(item.key)
    if (data === undefined) {
      if (optional) continue
      throw new KubevolError('MissingKey', missingKey(item.key))
    }
    payload.set(item.path, { data, mode: item.mode ?? defaultMode })
  }
  return payload
}

/** Decodes the base64 values of `values` (Secret `data`, ConfigMap `binaryData`); `what` names the field in errors. */
export function decodeBase64Values(values: Readonly<Record<string, string>> | undefined, what: string): Map<string, Uint8Array> {
  const decoded = new Map<string, Uint8Array>()
  for (const [key, value] of Object.entries(values ?? {})) {
    try {
      decoded.set(key, decodeBase64(value))
    } catch (err) {
      throw new KubevolError('InvalidObject', `${what} key ${key}: ${err instanceof Error ? err.message : String(err)}`)
    }
  }
  return decoded
}
