/**
 * Patch formats the fake accepts: JSON merge patch (RFC 7386), strategic merge patch (applied as a
 * merge patch: the fake knows no patch strategies, so lists are replaced), and JSON patch (RFC 6902).
 */
import { badRequest } from './status.js'

type Json = unknown

/** RFC 7386: objects merge key by key, null deletes, anything else replaces. */
export function mergePatch(target: Json, patch: Json): Json {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) return patch
  const base: Record<string, Json> = typeof target === 'object' && target !== null && !Array.isArray(target) ? { ...(target as Record<string, Json>) } : {}
  for (const [key, value] of Object.entries(patch as Record<string, Json>)) {
    if (value === null) delete base[key]
    else base[key] = mergePatch(base[key], value)
  }
  return base
}

function pointer(path: string): string[] {
  if (path === '') return []
  if (!path.startsWith('/')) throw badRequest(`the server rejected our request due to an error in our request: invalid JSON pointer ${path}`)
  return path
    .slice(1)
    .split('/')
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
}

/** RFC 6902 add, remove, replace and test. */
export function jsonPatch(target: Json, ops: Json): Json {
  if (!Array.isArray(ops)) {
    throw badRequest('the server rejected our request due to an error in our request: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp')
  }
  let doc = structuredClone(target)
  for (const op of ops as { op?: string; path?: string; value?: Json }[]) {
    const parts = pointer(op.path ?? '')
    if (parts.length === 0) {
      if (op.op === 'add' || op.op === 'replace') doc = structuredClone(op.value)
      continue
    }
    let parent = doc as Record<string, Json> | Json[]
    for (const part of parts.slice(0, -1)) {
      const next = (parent as Record<string, Json>)[part]
      if (typeof next !== 'object' || next === null) throw badRequest(`the server rejected our request due to an error in our request: doc is missing path: ${op.path}`)
      parent = next as Record<string, Json>
    }
    const last = parts[parts.length - 1] as string
    const isArray = Array.isArray(parent)
    const index = last === '-' ? (parent as Json[]).length : Number(last)
    switch (op.op) {
      case 'add':
        if (isArray) (parent as Json[]).splice(index, 0, structuredClone(op.value))
        else (parent as Record<string, Json>)[last] = structuredClone(op.value)
        break
      case 'replace':
      case 'remove': {
        const exists = isArray ? index < (parent as Json[]).length : Object.hasOwn(parent, last)
        if (!exists) throw badRequest(`the server rejected our request due to an error in our request: doc is missing path: ${op.path}`)
        if (op.op === 'remove') {
          if (isArray) (parent as Json[]).splice(index, 1)
          else delete (parent as Record<string, Json>)[last]
        } else if (isArray) (parent as Json[])[index] = structuredClone(op.value)
        else (parent as Record<string, Json>)[last] = structuredClone(op.value)
        break
      }
      case 'test': {
        const actual = isArray ? (parent as Json[])[index] : (parent as Record<string, Json>)[last]
        if (JSON.stringify(actual) !== JSON.stringify(op.value)) throw badRequest(`the server rejected our request due to an error in our request: testing value ${op.path} failed`)
        break
      }
      default:
        throw badRequest(`the server rejected our request due to an error in our request: unexpected kind: ${String(op.op)}`)
    }
  }
  return doc
}
