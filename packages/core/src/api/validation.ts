/**
 * Pod validation: what the API server checks before a pod reaches a node, for the fields kubevol
 * uses (`ValidatePodCreate`: metadata, containers, volume mounts and devices, volumes). A pod from
 * a manifest directory never meets an API server, so the kubelet validates static pods itself, and
 * so does kubevol: a name or a UID becomes a directory name under the root.
 *
 * Two levels: {@link validatePod} is the API server's check (for pods written by people);
 * {@link validatePodPathNames} is the minimum every pod must pass whatever its source, because each
 * of those values is joined into a path as one component.
 */
import {
  type FieldError,
  type FieldPath,
  dns1123LabelError,
  dns1123SubdomainError,
  duplicateField,
  forbiddenField,
  invalidField,
  notFoundField,
  pathComponentError,
  requiredField,
  wrongTypeField,
} from './field-errors.js'
import type { Pod } from './kubernetes.js'
import { mountPropagationErrors, recursiveReadOnlyErrors } from './mount-validation.js'
import { validatePodVolumes } from './volume-validation.js'

export type { FieldError, FieldPath } from './field-errors.js'
export { pathComponentError } from './field-errors.js'

/** The longest pod UID taken: the API server's are 36 characters (a UUID), static pods' 32 (a hash). */
const MAX_POD_UID_LENGTH = 128

/**
 * Null when `uid` can be a pod UID, else why not. Accepts what clusters produce (UUIDs, the
 * kubelet's hex hashes, any short name of safe characters); refuses what is not exactly one path
 * component, and anything holding `..`.
 */
export function podUIDError(uid: string): string | null {
  const component = pathComponentError(uid)
  if (component) return `a pod UID ${component}`
  if (uid.includes('..')) return "a pod UID must not contain '..'"
  if (uid.length > MAX_POD_UID_LENGTH) return `a pod UID must be no more than ${MAX_POD_UID_LENGTH} characters`
  return null
}

const CONTAINER_LISTS = ['initContainers', 'containers', 'ephemeralContainers'] as const

type Entry = { readonly path: FieldPath; readonly value: Record<string, unknown> }

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)

/** The entries of a list field that are objects; a wrong type is reported, never thrown. */
function objectsOf(path: FieldPath, list: unknown, errors: FieldError[]): Entry[] {
  if (list === undefined || list === null) return []
  if (!Array.isArray(list)) {
    errors.push(wrongTypeField(path, 'a list'))
    return []
  }
  const entries: Entry[] = []
  list.forEach((value, i) => {
    if (isObject(value)) entries.push({ path: [...path, i], value })
    else errors.push(wrongTypeField([...path, i], 'an object'))
  })
  return entries
}

/**
 * Every container of the pod (init, regular, ephemeral) with its field path. Tolerates any shape:
 * what is not a list or an object is reported in `errors`.
 */
function containersOf(spec: Record<string, unknown>, errors: FieldError[]): (Entry & { readonly list: (typeof CONTAINER_LISTS)[number] })[] {
  return CONTAINER_LISTS.flatMap((list) => objectsOf(['spec', list], spec[list], errors).map((e) => ({ ...e, list })))
}

/** The API server's `validateLocalDescendingPath` (subPath, subPathExpr), and no control characters. */
function descendingPathErrors(path: FieldPath, value: string): FieldError[] {
  const errors: FieldError[] = []
  if (value.startsWith('/')) errors.push(invalidField(path, value, 'must be a relative path'))
  if (value.split('/').includes('..')) errors.push(invalidField(path, value, "must not contain '..'"))
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
  if (/[\u0000-\u001f]/.test(value)) errors.push(invalidField(path, value, 'must not contain control characters'))
  return errors
}

function metadataErrors(metadata: unknown): FieldError[] {
  if (!isObject(metadata)) return [requiredField(['metadata'])]
  const errors: FieldError[] = []
  const { name, namespace, uid } = metadata
  if (typeof name !== 'string' || name === '') errors.push(requiredField(['metadata', 'name'], 'name or generateName is required'))
  else {
    const reason = dns1123SubdomainError(name)
    if (reason) errors.push(invalidField(['metadata', 'name'], name, reason))
  }
  if (namespace !== undefined && namespace !== null) {
    const reason = typeof namespace === 'string' ? dns1123LabelError(namespace) : 'must be a string'
    if (reason) errors.push(invalidField(['metadata', 'namespace'], namespace, reason))
  }
  if (uid !== undefined && uid !== null) {
    const reason = typeof uid === 'string' ? podUIDError(uid) : 'must be a string'
    if (reason) errors.push(invalidField(['metadata', 'uid'], uid, reason))
  }
  return errors
}

/** One container's volumeMounts and volumeDevices against the pod's volumes. */
function containerVolumeErrors(container: Entry & { readonly list: string }, volumes: ReadonlyMap<string, Record<string, unknown>>): FieldError[] {
  const errors: FieldError[] = []
  const mountPaths = new Set<string>()
  const mountNames = new Set<string>()
  const securityContext = container.value.securityContext
  const privileged = isObject(securityContext) && securityContext.privileged === true
  for (const { path, value: m } of objectsOf([...container.path, 'volumeMounts'], container.value.volumeMounts, errors)) {
    if (typeof m.name !== 'string' || m.name === '') errors.push(requiredField([...path, 'name']))
    else if (!volumes.has(m.name)) errors.push(notFoundField([...path, 'name'], m.name))
    else mountNames.add(m.name)
    if (typeof m.mountPath !== 'string' || m.mountPath === '') errors.push(requiredField([...path, 'mountPath']))
    else if (mountPaths.has(m.mountPath)) errors.push(invalidField([...path, 'mountPath'], m.mountPath, 'must be unique'))
    else mountPaths.add(m.mountPath)
    const hasSubPath = m.subPath !== undefined && m.subPath !== null && m.subPath !== ''
    const hasExpr = m.subPathExpr !== undefined && m.subPathExpr !== null && m.subPathExpr !== ''
    if (container.list === 'ephemeralContainers' && hasSubPath) errors.push(forbiddenField([...path, 'subPath'], 'cannot be set for an Ephemeral Container'))
    if (container.list === 'ephemeralContainers' && hasExpr) errors.push(forbiddenField([...path, 'subPathExpr'], 'cannot be set for an Ephemeral Container'))
    errors.push(...mountPropagationErrors(m, privileged, path), ...recursiveReadOnlyErrors(m, path))
    for (const key of ['subPath', 'subPathExpr'] as const) {
      const value = m[key]
      if (value === undefined || value === null || value === '') continue
      if (typeof value !== 'string') errors.push(invalidField([...path, key], value, 'must be a string'))
      else errors.push(...descendingPathErrors([...path, key], value))
    }
    if (hasSubPath && hasExpr) errors.push(invalidField([...path, 'subPathExpr'], m.subPathExpr, 'subPathExpr and subPath are mutually exclusive'))
  }
  const devicePaths = new Set<string>()
  const deviceNames = new Set<string>()
  for (const { path, value: d } of objectsOf([...container.path, 'volumeDevices'], container.value.volumeDevices, errors)) {
    if (typeof d.name !== 'string' || d.name === '') errors.push(requiredField([...path, 'name']))
    else {
      const volume = volumes.get(d.name)
      if (deviceNames.has(d.name)) errors.push(invalidField([...path, 'name'], d.name, 'must be unique'))
      if (!volume) errors.push(notFoundField([...path, 'name'], d.name))
      else if (!isObject(volume.persistentVolumeClaim) && !isObject(volume.ephemeral)) {
        errors.push(invalidField([...path, 'name'], d.name, 'can only use volume source type of PersistentVolumeClaim or Ephemeral for block mode'))
      }
      if (mountNames.has(d.name)) errors.push(invalidField([...path, 'name'], d.name, 'must not already exist in volumeMounts'))
      deviceNames.add(d.name)
    }
    if (typeof d.devicePath !== 'string' || d.devicePath === '') errors.push(requiredField([...path, 'devicePath']))
    else if (d.devicePath.split('/').includes('..')) errors.push(invalidField([...path, 'devicePath'], d.devicePath, "can not contain backsteps ('..')"))
    else if (devicePaths.has(d.devicePath)) errors.push(invalidField([...path, 'devicePath'], d.devicePath, 'must be unique'))
    else if (mountPaths.has(d.devicePath)) errors.push(invalidField([...path, 'devicePath'], d.devicePath, 'must not already exist as a path in volumeMounts'))
    else devicePaths.add(d.devicePath)
  }
  return errors
}

/**
 * What the API server would refuse in `pod` (empty: nothing), as field errors in its words:
 * metadata.name (DNS-1123 subdomain), metadata.namespace (label), metadata.uid ({@link podUIDError}),
 * container names (labels, unique over init, regular and ephemeral containers), volumes (names,
 * duplicates, modes), each volumeMount (an existing volume, a unique mountPath, subPath and
 * subPathExpr relative without `..` and not both, none in an ephemeral container, a known
 * mountPropagation and Bidirectional only when privileged, recursiveReadOnly only read-only and
 * without propagation) and volumeDevice (an existing claim volume, a
 * unique devicePath without `..`, not also mounted). `pod` may be anything a manifest holds: a
 * wrong type is an error, never an exception.
 */
export function validatePod(pod: unknown): FieldError[] {
  if (!isObject(pod)) return [wrongTypeField([], 'an object')]
  const errors = metadataErrors(pod.metadata)
  const spec = pod.spec
  if (!isObject(spec)) return [...errors, requiredField(['spec'])]
  errors.push(...validatePodVolumes(spec.volumes))
  const volumes = new Map<string, Record<string, unknown>>()
  if (Array.isArray(spec.volumes)) {
    for (const v of spec.volumes) if (isObject(v) && typeof v.name === 'string') volumes.set(v.name, v)
  }
  if (!Array.isArray(spec.containers) || spec.containers.length === 0) errors.push(requiredField(['spec', 'containers']))
  const names = new Set<string>()
  for (const container of containersOf(spec, errors)) {
    const name = container.value.name
    const where = [...container.path, 'name']
    if (typeof name !== 'string' || name === '') errors.push(requiredField(where))
    else {
      const reason = dns1123LabelError(name)
      if (reason) errors.push(invalidField(where, name, reason))
      else if (names.has(name)) errors.push(duplicateField(where, name))
      names.add(name)
    }
    errors.push(...containerVolumeErrors(container, volumes))
  }
  return errors
}

/**
 * The minimum every pod passes before any of its values is joined into a path, whatever its
 * source (an API server's pods included): its UID ({@link podUIDError}), its volume names and
 * its container names are each exactly one path component. Empty: nothing wrong.
 */
export function validatePodPathNames(pod: Pod): FieldError[] {
  const errors: FieldError[] = []
  const uid: unknown = pod.metadata?.uid
  const uidReason = typeof uid === 'string' ? podUIDError(uid) : 'must be a string'
  if (uidReason) errors.push(invalidField(['metadata', 'uid'], uid, uidReason))
  const check = (path: FieldPath, value: unknown): void => {
    const reason = typeof value === 'string' ? pathComponentError(value) : 'must be a string'
    if (reason) errors.push(invalidField(path, value, reason))
  }
  const spec = pod.spec as Record<string, unknown> | undefined
  if (!isObject(spec)) return errors
  for (const { path, value } of objectsOf(['spec', 'volumes'], spec.volumes, errors)) check([...path, 'name'], value.name)
  for (const { path, value } of containersOf(spec, errors)) check([...path, 'name'], value.name)
  return errors
}
