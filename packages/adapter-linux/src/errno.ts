/**
 * errno → HostError. The kernel's answer is kept as is where the Host port has a code for it; the
 * few errnos the port has no code for are folded onto the nearest one, and the original name stays
 * in the message (`EIO: stat /mnt/nfs: ESTALE: stale file handle`).
 */
import { constants } from 'node:os'
import { getSystemErrorMap } from 'node:util'
import type { HostErrorCode } from '@kubevol/core'
import { HostError } from '@kubevol/core'

const HOST_CODES: ReadonlySet<string> = new Set<HostErrorCode>([
  'ENOENT',
  'EEXIST',
  'ENOTDIR',
  'EISDIR',
  'ENOTEMPTY',
  'EBUSY',
  'EINVAL',
  'EPERM',
  'EACCES',
  'ELOOP',
  'EIO',
  'ENXIO',
  'ENODEV',
  'ENOTBLK',
  'ENOSPC',
  'EROFS',
  'EXDEV',
  'ENOTSUP',
  'ETIMEDOUT',
])

// The nearest code for the errnos the port does not list. Corrupted-mount errnos (SPEC §8.3
// IsCorruptedMnt: ENOTCONN, ESTALE, EHOSTDOWN) become EIO, so callers treat them as I/O failures.
const FOLDED: Readonly<Record<string, HostErrorCode>> = {
  EOPNOTSUPP: 'ENOTSUP',
  ENOTTY: 'ENOTSUP',
  ENOSYS: 'ENOTSUP',
  EAGAIN: 'EBUSY',
  EWOULDBLOCK: 'EBUSY',
  ETXTBSY: 'EBUSY',
  ENAMETOOLONG: 'EINVAL',
  EBADF: 'EINVAL',
  EFAULT: 'EINVAL',
  ERANGE: 'EINVAL',
  EMLINK: 'ENOSPC',
  EDQUOT: 'ENOSPC',
  EFBIG: 'ENOSPC',
  ETIME: 'ETIMEDOUT',
}

let names: Map<number, string> | undefined
const errorMap = getSystemErrorMap()

/** The symbolic name of a positive errno (`2` → `ENOENT`), or `E<n>` when unknown. */
export function errnoName(errno: number): string {
  if (!names) {
    names = new Map()
    for (const [name, value] of Object.entries(constants.errno)) if (!names.has(value)) names.set(value, name)
  }
  return names.get(errno) ?? `E${errno}`
}

// Texts libuv's table lacks, from glibc's strerror.
const EXTRA_MESSAGES: Readonly<Record<string, string>> = {
  ESTALE: 'stale file handle',
  ENOTBLK: 'block device required',
  EDQUOT: 'disk quota exceeded',
  ENOMEDIUM: 'no medium found',
  EMEDIUMTYPE: 'wrong medium type',
  EREMOTEIO: 'remote I/O error',
  EUCLEAN: 'structure needs cleaning',
}

/** The text of a positive errno (`2` → `no such file or directory`). */
function errnoMessage(errno: number): string {
  return errorMap.get(-errno)?.[1] ?? EXTRA_MESSAGES[errnoName(errno)] ?? `errno ${errno}`
}

/** The Host code for an errno name: itself when the port has it, else the nearest. */
export function hostCodeOf(name: string): HostErrorCode {
  if (HOST_CODES.has(name)) return name as HostErrorCode
  return FOLDED[name] ?? 'EIO'
}

/** A HostError from a positive errno returned by a system call. */
export function errnoError(errno: number, syscall: string, path: string, detail?: string): HostError {
  const name = errnoName(errno)
  const code = hostCodeOf(name)
  const text = [detail, code === name ? errnoMessage(errno) : `${name}: ${errnoMessage(errno)}`].filter(Boolean).join(': ')
  const cause = Object.assign(new Error(`${name}: ${errnoMessage(errno)}`), { errno, code: name, syscall, path })
  return new HostError(code, syscall, path, text, { cause })
}

interface NodeSystemError {
  readonly code?: unknown
  readonly errno?: unknown
  readonly syscall?: unknown
  /** Said before the errno's text (the I/O worker's refusal of a symlink beneath the root). */
  readonly detail?: unknown
  /** The path the failure is about when it is not the call's (the I/O worker: a bind's source). */
  readonly hostPath?: unknown
}

/**
 * Maps an error thrown by node:fs (or anything else) to a HostError: a HostError passes through;
 * a system error keeps its errno (`err.code`); anything else becomes EIO with its message.
 */
export function toHostError(err: unknown, syscall: string, path: string): HostError {
  if (err instanceof HostError) return err
  const e = err as NodeSystemError
  if (typeof e?.code === 'string' && /^E[A-Z0-9]+$/.test(e.code)) {
    const name = e.code
    const code = hostCodeOf(name)
    const errno = typeof e.errno === 'number' ? Math.abs(e.errno) : constants.errno[name as keyof typeof constants.errno]
    const message = errno === undefined ? name : errnoMessage(errno)
    const text = code === name ? message : `${name}: ${message}`
    const about = typeof e.hostPath === 'string' ? e.hostPath : path
    return new HostError(code, syscall, about, typeof e.detail === 'string' ? `${e.detail}: ${text}` : text, { cause: err })
  }
  return new HostError('EIO', syscall, path, err instanceof Error ? err.message : String(err), { cause: err })
}
