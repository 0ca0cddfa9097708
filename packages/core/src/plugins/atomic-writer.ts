/**
 * The kubelet's AtomicWriter (`pkg/volume/util/atomic_writer.go`, SPEC §7.6): writes a payload into
 * a volume directory so that readers always see one whole version of it.
 *
 * ```
 * <dir>/..2026_11_29_10_00_00.123000000/   the data of one version (files, subdirectories)
 * <dir>/..data -> ..2026_11_29_10_00_00.123000000
 * <dir>/key    -> ..data/key                one symlink per first path element
 * ```
 *
 * A new version is written into a fresh timestamped directory, then `..data_tmp` is made to point at
 * it and renamed onto `..data` (rename(2) replaces the link atomically), then the old directory goes.
 */
import type { Clock } from '../clock.js'
import { KubevolError, errorMessage, isHostError } from '../errors.js'
import type { FileInfo, Host } from '../host/host.js'
import { type Logger, silentLogger } from '../observability.js'
import { joinPath } from '../paths.js'
import { type CleanFile, type Payload, cleanPayload, firstElement } from './payload.js'
import { setVolumeOwnership } from './util/fs-group.js'

/** The symlink that points at the current version. */
export const DATA_DIR_NAME = '..data'
/** The symlink made before the swap; one left behind means a write was interrupted. */
const NEW_DATA_DIR_NAME = '..data_tmp'

const TIMESTAMP_DIR = /^\.\.\d{4}(_\d{2}){5}\.\d+$/

/**
 * The name of a version directory: `..YYYY_MM_DD_HH_MM_SS.` (UTC, as the kubelet) and nine digits,
 * the milliseconds of `ms` and a six-digit sequence that makes two names of one millisecond differ.
 */
export function timestampDirName(ms: number, sequence = 0): string {
  const d = new Date(ms)
  const two = (n: number): string => String(n).padStart(2, '0')
  const date = `${d.getUTCFullYear()}_${two(d.getUTCMonth() + 1)}_${two(d.getUTCDate())}`
  const time = `${two(d.getUTCHours())}_${two(d.getUTCMinutes())}_${two(d.getUTCSeconds())}`
  return `..${date}_${time}.${String(d.getUTCMilliseconds()).padStart(3, '0')}${String(sequence % 1_000_000).padStart(6, '0')}`
}

/** True for names the writer (or the kubelet's, whose suffix is random digits) gives version directories. */
export function isTimestampDirName(name: string): boolean {
  return TIMESTAMP_DIR.test(name)
}

export interface AtomicWriteOptions {
  /** Names the version directory. */
  readonly clock: Clock
  /**
   * The pod's fsGroup (SPEC §7.2, `setVolumeOwnership`): when a version is written, the whole volume
   * gets this group, files mode |= 0440 (0660 when not read-only), directories also setgid and 0110.
   * Failures to chown or chmod are logged, not thrown, as in the kubelet.
   */
  readonly fsGroup?: number
  /** The volume is read-only for containers (every AtomicWriter volume is). @default true */
  readonly readOnly?: boolean
  readonly logger?: Logger
}

/** What a write did. */
export interface AtomicWriteResult {
  /** False when `..data` already held exactly this payload (content, modes, owners): nothing was written. */
  readonly written: boolean
  /** The version directory `..data` points at now (a name inside the target directory). */
  readonly dataDir: string
}

/**
 * Writes `payload` into `targetDir` atomically. `targetDir` must exist. Idempotent: a payload equal
 * to what `..data` holds writes nothing (only missing user-visible links are made again).
 *
 * Leftovers of an interrupted write (`..data_tmp`, version directories `..data` does not point at)
 * are removed first. When writing the new version or the swap fails, the new directory is removed
 * again and `..data` still shows the old version whole; the error is thrown. Failures after the
 * swap (links, removing the old directory) are thrown too, with the new version already visible;
 * the next write finishes the job. Not safe to run twice at once on one directory.
 *
 * Throws `InvalidPayloadPath` errors naming the path ("invalid path: must not contain '..': a/../b")
 * before touching the disk, and the host's errors as they are.
 */
export async function writeAtomically(host: Host, targetDir: string, payload: Payload, options: AtomicWriteOptions): Promise<AtomicWriteResult> {
  const files = cleanPayload(payload)
  const logger = options.logger ?? silentLogger
  const current = await currentDataDir(host, targetDir, logger)
  const listed = await removeLeftovers(host, targetDir, current, logger)
  const expected = { fsGroup: options.fsGroup, groupBits: (options.readOnly ?? true) ? 0o440 : 0o660 }
  if (current !== null && (await holdsPayload(host, joinPath(targetDir, current), files, expected))) {
    await syncUserVisibleLinks(host, targetDir, files, listed)
    return { written: false, dataDir: current }
  }
  const dataDir = await writeVersion(host, targetDir, files, options, logger)
  await syncUserVisibleLinks(host, targetDir, files, listed)
  if (current !== null) await host.removeAll(joinPath(targetDir, current))
  return { written: true, dataDir }
}

/** The version `..data` points at, or null when there is none (or it points somewhere the writer never would). */
async function currentDataDir(host: Host, targetDir: string, logger: Logger): Promise<string | null> {
  const link = joinPath(targetDir, DATA_DIR_NAME)
  const info = await host.lstat(link)
  if (!info) return null
  if (info.type !== 'symlink') throw new KubevolError('CorruptVolume', `${link} is a ${info.type}, not a symbolic link`)
  const target = await host.readlink(link)
  if (isTimestampDirName(target)) return target
  // Not ours: replace the link, but never remove what it points at.
  logger.warn('Atomic writer found ..data pointing outside the volume; replacing it', { link, target })
  return null
}

/**
 * Removes `..data_tmp` and version directories `..data` does not point at (an interrupted write).
 * Returns the names the directory held, leftovers included.
 */
async function removeLeftovers(host: Host, targetDir: string, current: string | null, logger: Logger): Promise<readonly string[]> {
  const names = await host.readdir(targetDir)
  for (const name of names) {
    if (name !== NEW_DATA_DIR_NAME && (!isTimestampDirName(name) || name === current)) continue
    logger.warn('Atomic writer removes a leftover of an interrupted write', { path: joinPath(targetDir, name) })
    await host.removeAll(joinPath(targetDir, name))
  }
  return names
}

interface Expected {
  readonly fsGroup: number | undefined
  readonly groupBits: number
}

/** True when `dir` holds exactly the files of the payload with their modes, owners and content. */
async function holdsPayload(host: Host, dir: string, files: ReadonlyMap<string, CleanFile>, expected: Expected): Promise<boolean> {
  const found = new Map<string, FileInfo>()
  try {
    await walk(host, dir, '', found)
  } catch {
    return false // a dangling ..data or a half-removed directory: write a fresh version
  }
  const wanted = new Set<string>()
  for (const path of files.keys()) {
    wanted.add(path)
    for (let i = path.indexOf('/'); i !== -1; i = path.indexOf('/', i + 1)) wanted.add(path.slice(0, i))
  }
  if (found.size !== wanted.size) return false
  for (const [path, info] of found) {
    const file = files.get(path)
    if (!file) {
      if (!wanted.has(path) || info.type !== 'directory') return false
      continue
    }
    if (info.type !== 'file' || info.mode !== expectedMode(file.mode, expected)) return false
    if (file.fsUser !== undefined && info.uid !== file.fsUser) return false
    if (expected.fsGroup !== undefined && info.gid !== expected.fsGroup) return false
    if (!sameBytes(await host.readFile(joinPath(dir, path)), file.bytes)) return false
  }
  return true
}

function expectedMode(mode: number, expected: Expected): number {
  return expected.fsGroup === undefined ? mode : mode | expected.groupBits
}

async function walk(host: Host, dir: string, prefix: string, into: Map<string, FileInfo>): Promise<void> {
  for (const name of await host.readdir(dir)) {
    const path = joinPath(dir, name)
    const info = await host.lstat(path)
    if (!info) continue
    const rel = prefix === '' ? name : `${prefix}/${name}`
    into.set(rel, info)
    if (info.type === 'directory') await walk(host, path, rel, into)
  }
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

/** Writes a new version directory and swaps `..data` to it. Returns its name. */
async function writeVersion(
  host: Host,
  targetDir: string,
  files: ReadonlyMap<string, CleanFile>,
  options: AtomicWriteOptions,
  logger: Logger,
): Promise<string> {
  const name = await createVersionDir(host, targetDir, options.clock.now())
  const dir = joinPath(targetDir, name)
  const tmpLink = joinPath(targetDir, NEW_DATA_DIR_NAME)
  const discard = async (): Promise<void> => {
    await host.removeAll(dir).catch((err: unknown) => logger.error('Atomic writer could not remove a new version', { dir, err: errorMessage(err) }))
  }
  try {
    // 0755 whatever the umask, so group and others can reach the files (as the kubelet).
    await host.chmod(dir, 0o755)
    for (const [path, file] of files) {
      const full = joinPath(dir, path)
      const slash = path.lastIndexOf('/')
      if (slash !== -1) await host.mkdir(joinPath(dir, path.slice(0, slash)), { recursive: true, mode: 0o755 })
      await host.writeFile(full, file.bytes, { mode: file.mode })
      await host.chmod(full, file.mode) // the create mode was masked by the umask
      if (file.fsUser !== undefined) await host.lchown(full, file.fsUser, -1)
    }
    // The kubelet's setPerms: the whole volume, as the first write also made files outside the version.
    await setVolumeOwnership({ host, clock: options.clock, logger, dir: targetDir, fsGroup: options.fsGroup, readOnly: options.readOnly ?? true })
    await host.symlink(name, tmpLink)
  } catch (err) {
    await discard()
    throw err
  }
  try {
    await host.rename(tmpLink, joinPath(targetDir, DATA_DIR_NAME))
  } catch (err) {
    await host.remove(tmpLink).catch(() => undefined)
    await discard()
    throw err
  }
  return name
}

/** mkdir of a fresh version directory; a name taken in the same millisecond gets the next sequence number. */
async function createVersionDir(host: Host, targetDir: string, now: number): Promise<string> {
  for (let sequence = 0; ; sequence++) {
    const name = timestampDirName(now, sequence)
    try {
      await host.mkdir(joinPath(targetDir, name), { mode: 0o755 })
      return name
    } catch (err) {
      if (!isHostError(err, 'EEXIST') || sequence >= 999) throw err
    }
  }
}

/**
 * Makes `<name> -> ..data/<name>` for each first path element; removes such links no path uses any
 * more. `listed` is what the directory held when the write began: since then the writer added only
 * names starting with `..` (its version, `..data`) and took only such names away, so a first path
 * element not listed is missing (its link is made without a look first; should one have appeared,
 * EEXIST, it is looked at as a listed one), and the links no path uses any more are among the
 * listed names. The kubelet reads each link before making it, and makes none it does not find.
 */
async function syncUserVisibleLinks(host: Host, targetDir: string, files: ReadonlyMap<string, CleanFile>, listed: readonly string[]): Promise<void> {
  const wanted = new Set([...files.keys()].map(firstElement))
  const present = new Set(listed)
  for (const name of wanted) {
    const path = joinPath(targetDir, name)
    const target = `${DATA_DIR_NAME}/${name}`
    if (!present.has(name)) {
      try {
        await host.symlink(target, path)
        continue
      } catch (err) {
        if (!isHostError(err, 'EEXIST')) throw err
      }
    }
    const info = await host.lstat(path)
    if (info && info.type !== 'symlink') throw new KubevolError('CorruptVolume', `cannot make user-visible path ${path}: a ${info.type} is in the way`)
    if (info && (await host.readlink(path)) === target) continue
    if (info) await host.remove(path)
    await host.symlink(target, path)
  }
  for (const name of listed) {
    if (name.startsWith('..') || wanted.has(name)) continue
    const path = joinPath(targetDir, name)
    // Only links into ..data are the writer's; anything else in the directory is left alone.
    if ((await host.lstat(path))?.type === 'symlink' && (await host.readlink(path)) === `${DATA_DIR_NAME}/${name}`) await host.remove(path)
  }
}
