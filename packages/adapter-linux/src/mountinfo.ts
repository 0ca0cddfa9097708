/**
 * The parser of `/proc/<pid>/mountinfo` (proc(5)): pure, so it is tested anywhere.
 *
 * ```
 * 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
 * (1)(2)(3)   (4)   (5)      (6)       (7)   (8) (9)   (10)         (11)
 * ```
 * id, parent id, major:minor, root, mount point, mount options, optional fields up to a lone `-`,
 * fstype, source, super options.
 */
import type { MountEntry } from '@kubevol/core'

/** A mount table entry with what Linux adds: the optional fields (`shared:1`, `master:3`). */
export interface LinuxMountEntry extends MountEntry {
  /** The optional fields as the kernel wrote them (`shared:12`, `master:3`, `propagate_from:2`, `unbindable`). */
  readonly optionalFields: readonly string[]
}

/** A malformed line. The message quotes it, as mount-utils' `ParseMountInfo` does. */
export class MountInfoParseError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'MountInfoParseError'
  }
}

/**
 * Undoes the kernel's octal escapes (`\040` space, `\011` tab, `\012` newline, `\134` backslash):
 * the kernel escapes those in paths so that fields stay separated by single spaces.
 */
export function unescapeMountField(field: string): string {
  if (!field.includes('\\')) return field
  return field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(Number.parseInt(octal, 8)))
}

/** Splits mount options on commas, except inside double quotes (SELinux `context="a:b:c1,c2"`). */
export function splitMountOptions(options: string): string[] {
  // The common case has no quotes: a plain split (this runs for every line of a 10,000-mount table).
  if (!options.includes('"')) return options.split(',').filter((o) => o !== '')
  const result: string[] = []
  let current = ''
  let quoted = false
  for (const char of options) {
    if (char === '"') quoted = !quoted
    if (char === ',' && !quoted) {
      if (current !== '') result.push(current)
      current = ''
      continue
    }
    current += char
  }
  if (current !== '') result.push(current)
  return result
}

/** Propagation from the optional fields: shared wins over slave (a mount may be both). */
export function propagationOf(optionalFields: readonly string[]): MountEntry['propagation'] {
  if (optionalFields.some((f) => f.startsWith('shared:'))) return 'shared'
  if (optionalFields.some((f) => f.startsWith('master:'))) return 'slave'
  if (optionalFields.includes('unbindable')) return 'unbindable'
  return 'private'
}

const DEVICE = /^\d+:\d+$/

// The kernel appends this to a mount point whose dentry was unlinked (mount-utils strips it too).
const DELETED = ' (deleted)'

/** Parses one line. Throws {@link MountInfoParseError} on a malformed line. */
export function parseMountInfoLine(line: string): LinuxMountEntry {
  const fields = line.split(' ')
  if (fields.length < 10) {
    throw new MountInfoParseError(`wrong number of fields in mountinfo (expected at least 10, got ${fields.length}): ${line}`)
  }
  const separator = fields.indexOf('-', 6)
  if (separator < 0 || fields.length - separator - 1 < 3) {
    throw new MountInfoParseError(`expect 3 fields after the separator in mountinfo, got ${separator < 0 ? 0 : fields.length - separator - 1}: ${line}`)
  }
  const [idText, parentText, device, root, target, options] = fields as [string, string, string, string, string, string]
  const id = Number(idText)
  const parentId = Number(parentText)
  if (!Number.isInteger(id) || !Number.isInteger(parentId)) throw new MountInfoParseError(`bad mount id in mountinfo: ${line}`)
  if (!DEVICE.test(device)) throw new MountInfoParseError(`bad major:minor "${device}" in mountinfo: ${line}`)
  const optionalFields = fields.slice(6, separator).filter((f) => f !== '')
  let mountPoint = unescapeMountField(target)
  if (mountPoint.endsWith(DELETED)) mountPoint = mountPoint.slice(0, -DELETED.length)
  return {
    id,
    parentId,
    device,
    root: unescapeMountField(root),
    target: mountPoint,
    fstype: unescapeMountField(fields[separator + 1] as string),
    source: unescapeMountField(fields[separator + 2] as string),
    options: splitMountOptions(options),
    // Super options may contain spaces only escaped; rejoin what a stray space may have split.
    superOptions: splitMountOptions(unescapeMountField(fields.slice(separator + 3).join(' '))),
    propagation: propagationOf(optionalFields),
    optionalFields,
  }
}

/** Parses a whole mountinfo text; blank lines are ignored. Entries keep the kernel's order (mount order). */
export function parseMountInfo(text: string): LinuxMountEntry[] {
  const entries: LinuxMountEntry[] = []
  let start = 0
  while (start < text.length) {
    let end = text.indexOf('\n', start)
    if (end < 0) end = text.length
    if (end > start) {
      const line = text.slice(start, end)
      if (line.trim() !== '') entries.push(parseMountInfoLine(line))
    }
    start = end + 1
  }
  return entries
}

/** `major:minor` of a device number as the kernel encodes it in `st_rdev`/`st_dev` (glibc `gnu_dev_major/minor`). */
export function deviceNumber(dev: number | bigint): string {
  const n = BigInt(dev)
  const major = ((n >> 8n) & 0xfffn) | ((n >> 32n) & 0xfffff000n)
  const minor = (n & 0xffn) | ((n >> 12n) & 0xffffff00n)
  return `${major}:${minor}`
}

/** The entries whose filesystem is the device `majorMinor` (`7:3`), in mount order. */
export function mountsOfDevice(entries: readonly MountEntry[], majorMinor: string): MountEntry[] {
  return entries.filter((e) => e.device === majorMinor)
}

/** True when `path` is `base` or below it (plain string test on canonical paths). */
export function isPathWithin(path: string, base: string): boolean {
  if (base === '/') return path.startsWith('/')
  return path === base || path.startsWith(`${base}/`)
}

/**
 * The entry of the mount that holds `path`: the latest mounted entry whose target is the deepest
 * prefix of `path` (a later mount on the same target covers an earlier one). `path` must be canonical.
 */
export function containingMount<T extends MountEntry>(entries: readonly T[], path: string): T | undefined {
  let best: T | undefined
  for (const entry of entries) {
    if (!isPathWithin(path, entry.target)) continue
    if (!best || entry.target.length >= best.target.length) best = entry
  }
  return best
}
