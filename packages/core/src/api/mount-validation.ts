/**
 * The API server's checks of a volumeMount's `mountPropagation` and `recursiveReadOnly`
 * (`validateMountPropagation`, `validateMountRecursiveReadOnly` in pkg/apis/core/validation), shared
 * by pod admission (`validatePod`) and a container's mounts (`containerMounts`), so that both refuse
 * the same mounts with the same texts.
 */
import { type FieldError, type FieldPath, forbiddenField, notSupportedField } from './field-errors.js'

const PROPAGATIONS = ['Bidirectional', 'HostToContainer', 'None'] as const
const RECURSIVE_READ_ONLY = ['Disabled', 'Enabled', 'IfPossible'] as const

/** The parts of a volumeMount (as a manifest holds it: anything) the checks read. */
export interface MountOptionsInput {
  readonly readOnly?: unknown
  readonly mountPropagation?: unknown
  readonly recursiveReadOnly?: unknown
}

/**
 * `mountPropagation`: one of the three modes, and `Bidirectional` only in a privileged container.
 * `path` is the volumeMount's.
 */
export function mountPropagationErrors(mount: MountOptionsInput, privileged: boolean, path: FieldPath): FieldError[] {
  const mode = mount.mountPropagation
  if (mode === undefined || mode === null) return []
  const at = [...path, 'mountPropagation']
  if (typeof mode !== 'string' || !(PROPAGATIONS as readonly string[]).includes(mode)) return [notSupportedField(at, mode, PROPAGATIONS)]
  if (mode === 'Bidirectional' && !privileged) return [forbiddenField(at, 'Bidirectional mount propagation is available only to privileged containers')]
  return []
}

/** `recursiveReadOnly`: a known mode; `Enabled` and `IfPossible` only with `readOnly` and no propagation. */
export function recursiveReadOnlyErrors(mount: MountOptionsInput, path: FieldPath): FieldError[] {
  const mode = mount.recursiveReadOnly
  if (mode === undefined || mode === null || mode === 'Disabled') return []
  const at = [...path, 'recursiveReadOnly']
  if (mode !== 'Enabled' && mode !== 'IfPossible') return [notSupportedField(at, mode, RECURSIVE_READ_ONLY)]
  const errors: FieldError[] = []
  if (mount.readOnly !== true) errors.push(forbiddenField(at, 'may only be specified when readOnly is true'))
  const propagation = mount.mountPropagation
  if (propagation !== undefined && propagation !== null && propagation !== 'None') {
    errors.push(forbiddenField(at, 'may only be specified when mountPropagation is None or not specified'))
  }
  return errors
}
