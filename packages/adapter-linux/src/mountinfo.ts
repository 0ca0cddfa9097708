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

// Propagation from the optional fields as the kernel wrote them, space separated (no array, no new
// string on the parse path): shared wins over slave (a mount may be both).
function propagationOfText(text: string): MountEntry['propagation'] {
  if (text === '') return 'private'
  if (hasField(text, 'shared:', true)) return 'shared'
  if (hasField(text, 'master:', true)) return 'slave'
  if (hasField(text, 'unbindable', false)) return 'unbindable'
  return 'private'
}

// True when a space-separated field of `text` is `name` (or starts with it, for `shared:12`).
function hasField(text: string, name: string, prefix: boolean): boolean {
  for (let at = text.indexOf(name); at >= 0; at = text.indexOf(name, at + 1)) {
    if (at > 0 && text.charCodeAt(at - 1) !== 32) continue
    const after = at + name.length
    if (prefix || after === text.length || text.charCodeAt(after) === 32) return true
  }
  return false
}

// A non-negative decimal integer from `line[start, end)`, or NaN (what Number() of the slice gave).
function integerAt(line: string, start: number, end: number): number {
  if (end <= start || end - start > 15) return Number.NaN
  let n = 0
  for (let i = start; i < end; i++) {
    const digit = line.charCodeAt(i) - 48
    if (digit < 0 || digit > 9) return Number.NaN
    n = n * 10 + digit
  }
  return n
}

// `major:minor`, both decimal, at `line[start, end)`.
function isDeviceAt(line: string, start: number, end: number): boolean {
  const colon = line.indexOf(':', start)
  return colon > start && colon < end - 1 && !Number.isNaN(integerAt(line, start, colon)) && !Number.isNaN(integerAt(line, colon + 1, end))
}

// The kernel appends this to a mount point whose dentry was unlinked (mount-utils strips it too).
const DELETED = ' (deleted)'

const NO_FIELDS: readonly string[] = Object.freeze([])

/**
 * One parsed line. The optional fields are split only when read: nothing in kubevol needs them
 * past the propagation, which is computed while parsing, and an array per line is what made a
 * 10,000-mount table slow to parse (it survives the parse, so the collector copies it).
 */
class MountInfoEntry implements LinuxMountEntry {
  readonly #optionalText: string
  #optionalFields: readonly string[] | undefined
  readonly propagation: MountEntry['propagation']

  constructor(
    readonly id: number,
    readonly parentId: number,
    readonly device: string,
    readonly root: string,
    readonly target: string,
    readonly fstype: string,
    readonly source: string,
    readonly options: readonly string[],
    readonly superOptions: readonly string[],
    optionalText: string,
  ) {
    this.#optionalText = optionalText
    this.propagation = propagationOfText(optionalText)
  }

  get optionalFields(): readonly string[] {
    this.#optionalFields ??= this.#optionalText === '' ? NO_FIELDS : Object.freeze(this.#optionalText.split(' ').filter((f) => f !== ''))
    return this.#optionalFields
  }

  /** A plain object with every field, the optional fields included (what `JSON.stringify` writes). */
  toJSON(): LinuxMountEntry {
    const { id, parentId, device, root, target, fstype, source, options, superOptions, propagation, optionalFields } = this
    return { id, parentId, device, root, target, fstype, source, options, superOptions, propagation, optionalFields }
  }
}

/**
 * What one parse has seen, by text. A node's table repeats a handful of option strings, roots,
 * filesystem types and sources thousands of times (`rw,relatime`, `/`, `tmpfs`); each is kept once
 * and shared, so a 10,000-line table leaves tens of long-lived strings and arrays behind, not tens
 * of thousands (what survives a parse is what the garbage collector has to copy).
 */
interface ParseCache {
  readonly options: Map<string, readonly string[]>
  readonly strings: Map<string, string>
}

function optionsOf(text: string, cache: ParseCache | undefined): readonly string[] {
  let options = cache?.options.get(text)
  if (!options) {
    options = Object.freeze(splitMountOptions(text))
    cache?.options.set(text, options)
  }
  return options
}

function shared(text: string, cache: ParseCache | undefined): string {
  if (!cache) return text
  const known = cache.strings.get(text)
  if (known !== undefined) return known
  cache.strings.set(text, text)
  return text
}

/** Parses one line. Throws {@link MountInfoParseError} on a malformed line. */
export function parseMountInfoLine(line: string): LinuxMountEntry {
  return parseLine(line, undefined)
}

// One pass over the line with indexOf: no array of fields, no intermediate slices of it.
// The end of each field of the line being parsed: one array for every line (parsing is synchronous).
const ends: number[] = []

function parseLine(line: string, cache: ParseCache | undefined): LinuxMountEntry {
  let fields = 0
  let separatorField = -1
  let pos = 0
  for (;;) {
    const space = line.indexOf(' ', pos)
    const end = space < 0 ? line.length : space
    if (separatorField < 0 && fields >= 6 && end === pos + 1 && line.charCodeAt(pos) === 45 /* - */) separatorField = fields
    ends[fields++] = end
    // Past the separator, the source and the first chunk of super options, the rest is super options.
    if (space < 0 || (separatorField >= 0 && fields === separatorField + 3)) break
    pos = space + 1
  }
  const count = fields + (separatorField >= 0 && ends[fields - 1] !== line.length ? 1 : 0)
  if (count < 10) {
    throw new MountInfoParseError(`wrong number of fields in mountinfo (expected at least 10, got ${line.split(' ').length}): ${line}`)
  }
  if (separatorField < 0 || count - separatorField - 1 < 3) {
    throw new MountInfoParseError(`expect 3 fields after the separator in mountinfo, got ${separatorField < 0 ? 0 : count - separatorField - 1}: ${line}`)
  }
  const field = (i: number) => line.slice(i === 0 ? 0 : (ends[i - 1] as number) + 1, ends[i])
  const id = integerAt(line, 0, ends[0] as number)
  const parentId = integerAt(line, (ends[0] as number) + 1, ends[1] as number)
  if (Number.isNaN(id) || Number.isNaN(parentId)) throw new MountInfoParseError(`bad mount id in mountinfo: ${line}`)
  const device = field(2)
  if (!isDeviceAt(line, (ends[1] as number) + 1, ends[2] as number)) throw new MountInfoParseError(`bad major:minor "${device}" in mountinfo: ${line}`)
  const optionalText = separatorField > 6 ? line.slice((ends[5] as number) + 1, ends[separatorField - 1]) : ''
  let mountPoint = unescapeMountField(field(4))
  if (mountPoint.endsWith(DELETED)) mountPoint = mountPoint.slice(0, -DELETED.length)
  // Super options may contain spaces only escaped; a stray space stays part of them.
  const superText = line.slice((ends[separatorField + 2] as number) + 1)
  return new MountInfoEntry(
    id,
    parentId,
    device,
    shared(unescapeMountField(field(3)), cache),
    mountPoint,
    shared(unescapeMountField(field(separatorField + 1)), cache),
    shared(unescapeMountField(field(separatorField + 2)), cache),
    optionsOf(field(5), cache),
    superText.includes('\\') ? optionsOf(unescapeMountField(superText), undefined) : optionsOf(superText, cache),
    optionalText,
  )
}

/** Parses a whole mountinfo text; blank lines are ignored. Entries keep the kernel's order (mount order). */
export function parseMountInfo(text: string): LinuxMountEntry[] {
  const entries: LinuxMountEntry[] = []
  const cache: ParseCache = { options: new Map(), strings: new Map() }
  let start = 0
  while (start < text.length) {
    let end = text.indexOf('\n', start)
    if (end < 0) end = text.length
    if (end > start) {
      const line = text.slice(start, end)
      if (line.trim() !== '') entries.push(parseLine(line, cache))
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

/**
 * The other mount points that show `path` (mount-utils `SearchMountPoints`): the latest mounted
 * entry that is `path` or contains it (a later mount over a parent hides an earlier one below it,
 * so mount order, not depth, decides); the place `path` is inside that filesystem (the entry's
 * root, field 4, joined with the rest of `path`); then every other entry of the same device whose
 * root is that place. `path` must be canonical (symlinks resolved).
 */
export function mountReferencesIn(entries: readonly MountEntry[], path: string): string[] {
  let holder: MountEntry | undefined
  for (let i = entries.length - 1; i >= 0; i--) {
    const entry = entries[i] as MountEntry
    if (isPathWithin(path, entry.target)) {
      holder = entry
      break
    }
  }
  if (!holder) throw new Error(`failed to get root path and major:minor for ${path}`)
  const rest = holder.target === '/' ? path.slice(1) : path.slice(holder.target.length + 1)
  const root = rest === '' ? holder.root : holder.root === '/' ? `/${rest}` : `${holder.root}/${rest}`
  const { id, device } = holder
  return entries.filter((e) => e.id !== id && e.device === device && e.root === root).map((e) => e.target)
}
