/**
 * The checks the API server makes on a pod's volumes before a pod reaches a node (a subset of
 * `ValidateVolumes`), made again here because pods from a manifest directory never pass through an
 * API server: a volume name becomes a directory name, and a file mode becomes a file's mode.
 */
import { type FieldError, type FieldPath, dns1123LabelError, duplicateField, invalidField, requiredField, wrongTypeField } from './field-errors.js'

const SOURCES_WITH_MODES = ['configMap', 'secret', 'downwardAPI', 'projected'] as const

function modeError(path: FieldPath, mode: unknown): FieldError | null {
  if (mode === undefined || mode === null) return null
  if (typeof mode !== 'number' || !Number.isInteger(mode) || mode < 0 || mode > 0o777) {
    return invalidField(path, mode, 'must be a number between 0 and 0777 (octal), both inclusive')
  }
  return null
}

/** Mode fields of a configMap, secret, downwardAPI or projected source (defaultMode, items[].mode). */
function modeErrors(where: FieldPath, source: Record<string, unknown>): FieldError[] {
  const errors: FieldError[] = []
  const push = (e: FieldError | null): void => {
    if (e) errors.push(e)
  }
  push(modeError([...where, 'defaultMode'], source.defaultMode))
  const checkItems = (path: FieldPath, items: unknown): void => {
    if (items === undefined || items === null) return
    if (!Array.isArray(items)) {
      errors.push(wrongTypeField(path, 'a list'))
      return
    }
    items.forEach((item, i) => {
      if (item && typeof item === 'object') push(modeError([...path, i, 'mode'], (item as { mode?: unknown }).mode))
      else errors.push(wrongTypeField([...path, i], 'an object'))
    })
  }
  checkItems([...where, 'items'], source.items)
  if (Array.isArray(source.sources)) {
    source.sources.forEach((projection, i) => {
      if (!projection || typeof projection !== 'object') return
      for (const [kind, inner] of Object.entries(projection as Record<string, unknown>)) {
        if (inner && typeof inner === 'object') checkItems([...where, 'sources', i, kind, 'items'], (inner as { items?: unknown }).items)
      }
    })
  }
  return errors
}

/**
 * What is wrong with one entry of `spec.volumes`, in the API server's words (empty: nothing). The
 * entry may be anything a manifest holds: wrong types are reported, never thrown.
 */
function validateVolume(volume: unknown, index: number): FieldError[] {
  const where: FieldPath = ['spec', 'volumes', index]
  if (!volume || typeof volume !== 'object' || Array.isArray(volume)) return [wrongTypeField(where, 'an object')]
  const v = volume as Record<string, unknown>
  if (typeof v.name !== 'string' || v.name === '') return [requiredField([...where, 'name'])]
  const nameError = dns1123LabelError(v.name)
  if (nameError) return [invalidField([...where, 'name'], v.name, nameError)]
  const errors: FieldError[] = []
  for (const [key, value] of Object.entries(v)) {
    if (key === 'name') continue
    if (value === null || typeof value !== 'object' || Array.isArray(value)) errors.push(wrongTypeField([...where, key], 'an object'))
  }
  if (errors.length > 0) return errors
  for (const kind of SOURCES_WITH_MODES) {
    const source = v[kind]
    if (source && typeof source === 'object') errors.push(...modeErrors([...where, kind], source as Record<string, unknown>))
  }
  return errors
}

/** What is wrong with a pod's `spec.volumes` as a whole and with each entry (empty: nothing). */
export function validatePodVolumes(volumes: unknown): FieldError[] {
  if (volumes === undefined || volumes === null) return []
  if (!Array.isArray(volumes)) return [wrongTypeField(['spec', 'volumes'], 'a list')]
  const errors = volumes.flatMap((v, i) => validateVolume(v, i))
  const seen = new Set<string>()
  volumes.forEach((v, i) => {
    const name = (v as { name?: unknown } | null)?.name
    if (typeof name !== 'string') return
    if (seen.has(name)) errors.push(duplicateField(['spec', 'volumes', i, 'name'], name))
    seen.add(name)
  })
  return errors
}
