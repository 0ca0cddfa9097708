/**
 * The checks the API server makes on a pod's volumes before a pod reaches a node (a subset of
 * `ValidateVolumes`), made again here because pods from a manifest directory never pass through an
 * API server: a volume name becomes a directory name, and a file mode becomes a file's mode.
 */

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/
const SOURCES_WITH_MODES = ['configMap', 'secret', 'downwardAPI', 'projected'] as const

/** The API server's message for a name that is not a DNS-1123 label. */
function labelError(name: string): string | null {
  if (name.length > 63) return 'must be no more than 63 characters'
  if (!DNS1123_LABEL.test(name)) {
    return "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"
  }
  return null
}

/** A name short enough to quote in a message, with control characters escaped. */
function quote(value: unknown): string {
  const text = typeof value === 'string' ? value : String(value)
  return JSON.stringify(text.length > 80 ? `${text.slice(0, 80)}…` : text)
}

function modeError(where: string, mode: unknown): string | null {
  if (mode === undefined || mode === null) return null
  if (typeof mode !== 'number' || !Number.isInteger(mode) || mode < 0 || mode > 0o777) {
    return `${where}: Invalid value: ${quote(mode)}: must be a number between 0 and 0777 (octal), both inclusive`
  }
  return null
}

/** Mode fields of a configMap, secret, downwardAPI or projected source (defaultMode, items[].mode). */
function modeErrors(where: string, source: Record<string, unknown>): string[] {
  const errors: string[] = []
  const push = (e: string | null): void => {
    if (e) errors.push(e)
  }
  push(modeError(`${where}.defaultMode`, source.defaultMode))
  const checkItems = (path: string, items: unknown): void => {
    if (items === undefined || items === null) return
    if (!Array.isArray(items)) {
      errors.push(`${path}: Invalid value: must be a list`)
      return
    }
    items.forEach((item, i) => {
      if (item && typeof item === 'object') push(modeError(`${path}[${i}].mode`, (item as { mode?: unknown }).mode))
      else errors.push(`${path}[${i}]: Invalid value: must be an object`)
    })
  }
  checkItems(`${where}.items`, source.items)
  if (Array.isArray(source.sources)) {
    source.sources.forEach((projection, i) => {
      if (!projection || typeof projection !== 'object') return
      for (const [kind, inner] of Object.entries(projection as Record<string, unknown>)) {
        if (inner && typeof inner === 'object') checkItems(`${where}.sources[${i}].${kind}.items`, (inner as { items?: unknown }).items)
      }
    })
  }
  return errors
}

/**
 * What is wrong with one entry of `spec.volumes`, in the API server's words (empty: nothing). The
 * entry may be anything a manifest holds: wrong types are reported, never thrown.
 */
export function validateVolume(volume: unknown, index: number): string[] {
  const where = `spec.volumes[${index}]`
  if (!volume || typeof volume !== 'object' || Array.isArray(volume)) return [`${where}: Invalid value: must be an object`]
  const v = volume as Record<string, unknown>
  if (typeof v.name !== 'string' || v.name === '') return [`${where}.name: Required value`]
  const nameError = labelError(v.name)
  if (nameError) return [`${where}.name: Invalid value: ${quote(v.name)}: ${nameError}`]
  const errors: string[] = []
  for (const [key, value] of Object.entries(v)) {
    if (key === 'name') continue
    if (value === null || typeof value !== 'object' || Array.isArray(value)) errors.push(`${where}.${key}: Invalid value: must be an object`)
  }
  if (errors.length > 0) return errors
  for (const kind of SOURCES_WITH_MODES) {
    const source = v[kind]
    if (source && typeof source === 'object') errors.push(...modeErrors(`${where}.${kind}`, source as Record<string, unknown>))
  }
  return errors
}

/** What is wrong with a pod's `spec.volumes` as a whole and with each entry (empty: nothing). */
export function validatePodVolumes(volumes: unknown): string[] {
  if (volumes === undefined || volumes === null) return []
  if (!Array.isArray(volumes)) return ['spec.volumes: Invalid value: must be a list']
  const errors = volumes.flatMap((v, i) => validateVolume(v, i))
  const seen = new Set<string>()
  volumes.forEach((v, i) => {
    const name = (v as { name?: unknown } | null)?.name
    if (typeof name !== 'string') return
    if (seen.has(name)) errors.push(`spec.volumes[${i}].name: Duplicate value: ${quote(name)}`)
    seen.add(name)
  })
  return errors
}
