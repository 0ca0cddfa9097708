/**
 * The directories between kubevol's root and a pod's volume (`pods`, `pods/<uid>`, `volumes` or
 * `volumeDevices`, the plugin's directory), and those beside them a tear-down removes from
 * (`plugins/<plugin>`, `volume-subpaths`). Every path a tear-down touches is built from them, and
 * the kernel follows a symlink in the middle of a path: a pod directory swapped for a link to a
 * directory elsewhere would make the tear-down unmount and remove what is there. So before anything
 * is reconstructed or torn down, each level is checked by its own type (lstat): it must be a real
 * directory; a missing one is fine (nothing below it exists to be followed). The checks of one
 * volume are issued together, so a host that batches the calls of one turn (the Linux host)
 * answers them in one round trip.
 *
 * The root itself may be a symlink (an administrator's choice); nothing below it may.
 */
import { errorMessage } from '../errors.js'
import type { FileInfo, Host } from '../host/host.js'
import { type Paths, escapePluginName, joinPath } from '../paths.js'

/** The volume whose directories are checked. */
export interface PodVolumeRef {
  readonly podUID: string
  readonly pluginName: string
  /** `volumeDevices` (a block volume) instead of `volumes`. */
  readonly block: boolean
}

/** The first level that is not a real directory, and what is there instead. */
export interface ChainProblem {
  readonly path: string
  /** A file type (`symlink`, `file`, ...), or `unreadable` (the check failed: see `error`). */
  readonly found: FileInfo['type'] | 'unreadable'
  readonly error?: string
}

/** The levels of `ref`, each after its parent. Throws when the pod UID is not one path component. */
function levelsOf(paths: Paths, ref: PodVolumeRef): string[] {
  const podDir = paths.podDir(ref.podUID)
  const kindDir = ref.block ? paths.podVolumeDevicesDir(ref.podUID) : paths.podVolumesDir(ref.podUID)
  return [
    paths.podsDir,
    podDir,
    kindDir,
    joinPath(kindDir, escapePluginName(ref.pluginName)),
    joinPath(podDir, 'plugins'),
    paths.podPluginDir(ref.podUID, ref.pluginName),
    joinPath(podDir, 'volume-subpaths'),
  ]
}

/** The index in {@link levelsOf} of each level's parent directory; -1 for the pods directory (the root's child). */
const PARENT_LEVEL: readonly number[] = [-1, 0, 1, 2, 1, 4, 1]

/**
 * The first level of `ref`'s directories that is there and is not a real directory, or null. A
 * missing level is fine: nothing below it exists to be followed. `lstat` replaces the host's (to
 * share the answers of levels many volumes have in common).
 */
export async function findChainProblem(
  host: Host,
  paths: Paths,
  ref: PodVolumeRef,
  lstat: (path: string) => Promise<FileInfo | null> = (path) => host.lstat(path),
): Promise<ChainProblem | null> {
  return (await checkChain(paths, ref, lstat)).problem
}

/** What a check of the levels found: the first problem, and whether the pod's `volume-subpaths` is missing. */
interface ChainCheck {
  readonly problem: ChainProblem | null
  /** The pod has no `volume-subpaths` directory (nor, then, any volume's directory in it). Only meaningful without a problem. */
  readonly subPathsMissing: boolean
}

/** The index of `volume-subpaths` in {@link levelsOf}. */
const SUBPATHS_LEVEL = 6

async function checkChain(paths: Paths, ref: PodVolumeRef, lstat: (path: string) => Promise<FileInfo | null>): Promise<ChainCheck> {
  const levels = levelsOf(paths, ref)
  // All asked at once: the calls of one turn share a round trip where the host batches them. Read
  // in order; a level below a missing one is missing, whatever its own answer. (Hot on every
  // tear-down: no settled-result objects, no set of missing paths.)
  const asked = levels.map((level) => lstat(level))
  for (const answer of asked) answer.catch(() => undefined)
  const missing: boolean[] = []
  for (let i = 0; i < levels.length; i++) {
    const parent = PARENT_LEVEL[i] as number
    if (parent >= 0 && missing[parent] === true) {
      missing[i] = true
      continue
    }
    let info: FileInfo | null
    try {
      info = await (asked[i] as Promise<FileInfo | null>)
    } catch (err) {
      return { problem: { path: levels[i] as string, found: 'unreadable', error: errorMessage(err) }, subPathsMissing: false }
    }
    missing[i] = info === null
    if (info !== null && info.type !== 'directory') return { problem: { path: levels[i] as string, found: info.type }, subPathsMissing: false }
  }
  return { problem: null, subPathsMissing: missing[SUBPATHS_LEVEL] === true }
}

/** `<path> is a symlink, not a directory` (or could not be checked). */
export function describeChainProblem(problem: ChainProblem): string {
  if (problem.found === 'unreadable') return `${problem.path} could not be checked: ${problem.error ?? 'unknown error'}`
  return `${problem.path} is a ${problem.found}, not a directory`
}

/** The checks of the current run of microtasks, by host and levels (see {@link checkOnceThisRun}). */
let checksThisRun: WeakMap<Host, Map<string, Promise<ChainCheck>>> | undefined

/**
 * The check of `ref`'s levels, shared with one asked for the same levels on the same host in the
 * same run of microtasks: the memo is dropped by a microtask queued when its first check is asked,
 * so it holds the checks asked before the microtasks already waiting then have run. The volumes of a
 * pod torn down together (started in one reconcile pass, or as their operations end in one burst of
 * answers) ask the same seven levels; they share one answer, as a host that batches the calls of
 * one turn (the Linux host) already shares the system calls. Each volume's answer is the one its own
 * calls would have had: such a host makes the calls after the microtasks either way, and meanwhile
 * kubevol itself can only make or remove directories at these levels (never a link or a file), which
 * changes no answer. After that microtask, checks are asked anew.
 */
function checkOnceThisRun(host: Host, paths: Paths, ref: PodVolumeRef): Promise<ChainCheck> {
  if (!checksThisRun) {
    checksThisRun = new WeakMap()
    void Promise.resolve().then(() => {
      checksThisRun = undefined
    })
  }
  let checks = checksThisRun.get(host)
  if (!checks) {
    checks = new Map()
    checksThisRun.set(host, checks)
  }
  const key = `${paths.podsDir}\0${ref.podUID}\0${ref.pluginName}\0${ref.block ? 'block' : 'fs'}`
  let check = checks.get(key)
  if (!check) {
    check = checkChain(paths, ref, (path) => host.lstat(path))
    checks.set(key, check)
  }
  return check
}

/**
 * Throws, before anything is removed, when a directory of the pod's volume is not a real directory:
 * `refusing to tear down volume "<name>" of pod "<uid>": <path> is a symlink, not a directory`.
 * Volumes of one pod and plugin checked together share the check (see {@link checkOnceThisRun}).
 * Resolves with whether the pod has no `volume-subpaths` directory: then no volume of it has a
 * subPath to clean, and none can get one while its own tear-down runs (only its set-up makes one).
 */
export async function assertTearDownChain(host: Host, paths: Paths, ref: PodVolumeRef & { readonly volumeName: string }): Promise<{ readonly subPathsMissing: boolean }> {
  const { problem, subPathsMissing } = await checkOnceThisRun(host, paths, ref)
  if (problem) {
    throw new Error(`refusing to tear down volume "${ref.volumeName}" of pod "${ref.podUID}": ${describeChainProblem(problem)}; nothing was removed`)
  }
  return { subPathsMissing }
}
