/**
 * What the symlink attacks of issue 36 share: every level of every path under R the engine uses (a
 * pod's directories, the fileDisk plugin's, the journal), the pods whose volumes make those paths (a
 * disk and a Memory emptyDir, a configMap, a subPath, a fileDisk claim), a decoy outside R for each
 * level (a directory shaped as what kubevol expects below that level, every directory holding canary
 * files), the exchanger process that swaps a level and a symlink to its decoy, and what a level's
 * decoy shows afterwards (a file changed or gone, a new entry, a mount concerning it).
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { lstatSync, mkdirSync, readlinkSync, renameSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type Snapshot, compareSnapshots, entryOf, mountTable, mountsConcerning, snapshot } from '../harness/audit.js'
import { podYaml } from '../harness/fixtures.js'
import type { HostileNode } from '../harness/node.js'
import { until } from '../harness/processes.js'

const EMPTY_DIR = 'kubernetes.io~empty-dir'
const CONFIG_MAP = 'kubernetes.io~configmap'
const FILE_DISK = 'kubevol.io~file-disk'
const FILE_DISK_PLUGIN = 'plugins/kubevol.io/file-disk'

/**
 * The levels of a pod's directory, `{uid}` and `{pv}` (the fileDisk PV's name) filled in per pod.
 * Each exists while the pod's volumes are set up: `volume-subpaths/scratch/main/1` is the subPath
 * bind of the container's second mount, `plugins/kubernetes.io~empty-dir/<vol>` holds the emptyDir's
 * `ready` marker, `volumes/kubevol.io~file-disk/{pv}` the bind of the fileDisk's global mount.
 */
export const POD_LEVELS: readonly string[] = [
  'pods/{uid}',
  'pods/{uid}/volumes',
  `pods/{uid}/volumes/${EMPTY_DIR}`,
  `pods/{uid}/volumes/${EMPTY_DIR}/scratch`,
  `pods/{uid}/volumes/${EMPTY_DIR}/shm`,
  `pods/{uid}/volumes/${CONFIG_MAP}`,
  `pods/{uid}/volumes/${CONFIG_MAP}/cfg`,
  `pods/{uid}/volumes/${FILE_DISK}`,
  `pods/{uid}/volumes/${FILE_DISK}/{pv}`,
  'pods/{uid}/volume-subpaths',
  'pods/{uid}/volume-subpaths/scratch',
  'pods/{uid}/volume-subpaths/scratch/main',
  'pods/{uid}/volume-subpaths/scratch/main/1',
  'pods/{uid}/plugins',
  `pods/{uid}/plugins/${EMPTY_DIR}`,
  `pods/{uid}/plugins/${EMPTY_DIR}/scratch`,
  `pods/{uid}/plugins/${EMPTY_DIR}/shm`,
]

/** The levels under R that every pod shares: the pods directory, the fileDisk plugin's tree, the journal. */
export const ROOT_LEVELS: readonly string[] = [
  'pods',
  'plugins',
  'plugins/kubevol.io',
  FILE_DISK_PLUGIN,
  `${FILE_DISK_PLUGIN}/mounts`,
  `${FILE_DISK_PLUGIN}/mounts/{pv}`,
  `${FILE_DISK_PLUGIN}/loops`,
  'journal',
]

/** Files kubevol itself keeps at a level, so that its decoy holds files of those names. */
const LOOKALIKES: Record<string, Record<string, string>> = {
  [`pods/{uid}/volumes/${EMPTY_DIR}/scratch`]: { data: 'looks like emptyDir data\n', 'logs/kept': 'looks like a subPath file\n' },
  [`pods/{uid}/volumes/${EMPTY_DIR}/shm`]: { data: 'looks like tmpfs data\n' },
  [`pods/{uid}/volumes/${CONFIG_MAP}/cfg`]: { a: 'not the configMap key a\n', b: 'not the configMap key b\n' },
  [`pods/{uid}/volumes/${FILE_DISK}/{pv}`]: { data: 'looks like disk data\n' },
  'pods/{uid}/volume-subpaths/scratch/main/1': { data: 'looks like a subPath bind\n' },
  [`pods/{uid}/plugins/${EMPTY_DIR}/scratch`]: { ready: 'not the ready marker\n' },
  [`pods/{uid}/plugins/${EMPTY_DIR}/shm`]: { ready: 'not the ready marker\n' },
  [`${FILE_DISK_PLUGIN}/mounts/{pv}`]: { data: 'looks like a mounted disk\n', 'lost+found/kept': 'hidden by a mount over it\n' },
  [`${FILE_DISK_PLUGIN}/loops`]: { 'record.json': '{"looks":"like a loop record"}\n' },
  journal: { 'volumes.log': `${'{"looks":"like a journal record"}\n'.repeat(64)}` },
}

/** One pod of an attack, and the names its paths are filled with. */
export interface Workload {
  readonly uid: string
  readonly pv: string
  /** With a fileDisk claim (a 64 MiB image outside R). */
  readonly disk: boolean
}

export const fill = (template: string, w: Workload): string => template.replaceAll('{uid}', w.uid).replaceAll('{pv}', w.pv)

/** A short name of a level for file names and messages. */
export const slug = (template: string): string =>
  template
    .replaceAll('{uid}', 'UID')
    .replaceAll('{pv}', 'PV')
    .replace(/[^A-Za-z0-9.-]+/g, '_')

/** The ConfigMap every workload's `cfg` volume projects. */
const CONFIG_MAP_YAML = `${JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'cfg', namespace: 'default' }, data: { a: 'alpha\n', b: 'beta\n' } })}\n`

const imageOf = (n: HostileNode, w: Workload): string => join(n.outside, 'images', `${w.uid}.img`)

/**
 * Before the agent first starts: the workloads' fileDisk images (outside R, left out of the audit's
 * content check: the pods write them) and the ConfigMap's manifest.
 */
export function prepare(n: HostileNode, ws: readonly Workload[]): void {
  for (const w of ws.filter((x) => x.disk)) {
    const image = imageOf(n, w)
    mkdirSync(dirname(image), { recursive: true })
    execFileSync('truncate', ['-s', '64M', image])
    n.exclude(image)
  }
  n.write('cfg.yaml', CONFIG_MAP_YAML)
}

/**
 * The workload's manifest (its image made by {@link prepare}): the pod, and its PV and claim when it has a disk. Its volumes:
 * `scratch` (a disk emptyDir, mounted whole and as `subPath: logs`), `shm` (a Memory emptyDir),
 * `cfg` (the configMap), `disk` (the fileDisk claim).
 */
export function workloadYaml(n: HostileNode, w: Workload): string {
  const volumes: unknown[] = [
    { name: 'scratch', emptyDir: {} },
    { name: 'shm', emptyDir: { medium: 'Memory', sizeLimit: '8Mi' } },
    { name: 'cfg', configMap: { name: 'cfg' } },
  ]
  const mounts: unknown[] = [
    { name: 'scratch', mountPath: '/scratch' },
    { name: 'scratch', mountPath: '/logs', subPath: 'logs' },
    { name: 'shm', mountPath: '/shm' },
    { name: 'cfg', mountPath: '/cfg' },
  ]
  const docs: string[] = []
  if (w.disk) {
    const image = imageOf(n, w)
    const claim = `claim-${w.uid}`
    docs.push(
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'PersistentVolume',
        metadata: { name: w.pv },
        spec: { capacity: { storage: '64Mi' }, accessModes: ['ReadWriteOnce'], csi: { driver: 'filedisk.kubevol.io', volumeHandle: image, fsType: 'ext4' }, claimRef: { name: claim, namespace: 'default' } },
      }),
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'PersistentVolumeClaim',
        metadata: { name: claim, namespace: 'default' },
        spec: { volumeName: w.pv, accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '64Mi' } } },
        status: { phase: 'Bound', capacity: { storage: '64Mi' } },
      }),
    )
    volumes.push({ name: 'disk', persistentVolumeClaim: { claimName: claim } })
    mounts.push({ name: 'disk', mountPath: '/disk' })
  }
  docs.push(podYaml({ name: w.uid, uid: w.uid, volumes, mounts }).trimEnd())
  return `${docs.join('\n---\n')}\n`
}

/** How many volumes of the workload are mounted when it is set up. */
const volumeCount = (w: Workload): number => (w.disk ? 4 : 3)

/**
 * A decoy for `template` outside R: a directory holding, below it, every deeper level of the
 * workload's paths, each directory with a `canary` file, and the files kubevol keeps at that level
 * ({@link LOOKALIKES}). Made before the agent first starts, so the audit compares it by content.
 */
export function makeDecoy(n: HostileNode, template: string, w: Workload, tag = ''): string {
  const dir = join(n.outside, `decoy${tag}-${slug(template)}`)
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, 'canary'), `decoy of ${template}\n`)
  const deeper = [...POD_LEVELS, ...ROOT_LEVELS].filter((t) => t === template || t.startsWith(`${template}/`))
  for (const t of deeper) {
    const rel = fill(t, w).slice(fill(template, w).length + 1)
    const at = join(dir, rel)
    mkdirSync(at, { recursive: true })
    writeFileSync(join(at, 'canary'), `decoy of ${template}: ${rel || '.'}\n`)
    for (const [file, content] of Object.entries(LOOKALIKES[t] ?? {})) {
      mkdirSync(dirname(join(at, file)), { recursive: true })
      writeFileSync(join(at, file), content)
    }
  }
  return dir
}

/** What a decoy (a directory, or a file) looks like now, to compare with {@link decoyFindings}. */
export function decoySnapshot(decoy: string): Snapshot {
  const self = entryOf(decoy)
  if (self?.type !== 'directory') return new Map(self ? [['.', self]] : [])
  return snapshot(decoy, new Set(), new Set(mountTable().map((m) => m.target)))
}

/** What happened to a decoy since `before`: files changed or gone, new entries, mounts concerning it. */
export function decoyFindings(dir: string, before: Snapshot): string[] {
  const now = decoySnapshot(dir)
  const { added, lost } = compareSnapshots(before, now)
  return [...lost.map((l) => `lost ${l}`), ...added.map((a) => `created ${a}`), ...mountsConcerning(dir).map((m) => `mount at ${m.target} (${m.fsType} ${m.source}${m.root !== '/' ? ` root ${m.root}` : ''})`)]
}

const EXCHANGER = fileURLToPath(new URL('../harness/exchanger.py', import.meta.url))

/** A running exchanger (harness/exchanger.py). */
export interface Exchanger {
  running(): boolean
  /** Resolves when it ends, with the swaps made per pair. */
  readonly done: Promise<number[]>
}

const isLink = (path: string): boolean => {
  try {
    return lstatSync(path).isSymbolicLink()
  } catch {
    return false
  }
}
const isDir = (path: string): boolean => {
  try {
    return lstatSync(path).isDirectory()
  } catch {
    return false
  }
}

/**
 * Starts swapping each `path` with a symlink `<path>.hostile` → `target` for `ms`. Registered with
 * the node: killed before the teardown, and its paths put back as kubevol made them if it could not.
 */
export function startExchanger(n: HostileNode, pairs: readonly { path: string; target: string }[], ms: number): Exchanger {
  const spec = { pairs: pairs.map((p) => [p.path, `${p.path}.hostile`, p.target]), durationMs: ms }
  const child: ChildProcess = spawn('python3', [EXCHANGER, JSON.stringify(spec)], { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let done = false
  child.stdout?.on('data', (c: Buffer) => (out += c.toString()))
  child.stderr?.on('data', (c: Buffer) => (out += c.toString()))
  const finished = new Promise<number[]>((resolve, reject) => {
    child.on('error', (err) => {
      done = true
      reject(new Error(`the exchanger (python3 ${EXCHANGER}) did not start: ${err.message}`))
    })
    child.on('exit', (code) => {
      done = true
      try {
        resolve((JSON.parse(out.trim().split('\n').pop() ?? '') as { swaps: number[] }).swaps)
      } catch {
        reject(new Error(`the exchanger exited ${code}: ${out.slice(-2000)}`))
      }
    })
  })
  n.beforeTeardown(async () => {
    if (!done) child.kill('SIGTERM')
    await finished.catch(() => undefined)
    // SIGKILLed or crashed: put each path back as the exchanger would have.
    for (const p of pairs) {
      const sibling = `${p.path}.hostile`
      try {
        if (isLink(p.path) && isDir(sibling) && readlinkSync(p.path) === p.target) {
          unlinkSync(p.path)
          renameSync(sibling, p.path)
        }
        if (isLink(sibling)) unlinkSync(sibling)
      } catch {}
    }
  })
  return { running: () => !done, done: finished }
}

/** Polls until `check` holds or `ms` pass; whether it held. For waits an attack may legitimately not see end (a refused pod). */
export async function settle(check: () => Promise<boolean>, ms: number): Promise<boolean> {
  try {
    await until('settle', check, ms)
    return true
  } catch {
    return false
  }
}

/** Every workload has all its volumes mounted. */
export const allMounted = (n: HostileNode, ws: readonly Workload[]) => async (): Promise<boolean> => {
  for (const w of ws) {
    const view = await n.pod(w.uid)
    if (!view || view.volumes.length < volumeCount(w) || !view.volumes.every((v) => v.phase === 'mounted')) return false
  }
  return true
}

/** Every workload is mounted, or refused: a volume or the pod shows an error. */
export const allSettled = (n: HostileNode, ws: readonly Workload[]) => async (): Promise<boolean> => {
  for (const w of ws) {
    const view = await n.pod(w.uid)
    if (!view) return false
    const mounted = view.volumes.length >= volumeCount(w) && view.volumes.every((v) => v.phase === 'mounted')
    const refused = (view.podErrors ?? []).length > 0 || view.worker?.lastError !== undefined || view.volumes.some((v) => v.lastError !== undefined)
    if (!mounted && !refused) return false
  }
  return true
}

/** The agent knows nothing of any workload any more. */
export const allGone = (n: HostileNode, ws: readonly Workload[]) => async (): Promise<boolean> => {
  const state = await n.state()
  const uids = new Set(ws.map((w) => w.uid))
  return !state.desired.some((v) => uids.has(v.podUID)) && !state.actual.mounted.some((m) => uids.has(m.podUID))
}

/**
 * Plants, before the agent starts, a symlink at each level (its parents made as real directories),
 * aimed at the level's decoy (or at `target` given). Returns each level's path and decoy.
 */
export function plant(n: HostileNode, levels: readonly { template: string; w: Workload; target?: string }[]): { template: string; path: string; decoy: string }[] {
  return levels.map(({ template, w, target }) => {
    const path = join(n.root, fill(template, w))
    const decoy = target ?? makeDecoy(n, template, w)
    mkdirSync(dirname(path), { recursive: true })
    symlinkSync(decoy, path)
    return { template, path, decoy }
  })
}

/** Adds and removes the workloads until `busy()` turns false (at least once): each wave waits up to `waitMs` to be mounted, then to be gone. */
export async function churn(n: HostileNode, ws: readonly Workload[], busy: () => boolean, waitMs = 1_500): Promise<number> {
  let waves = 0
  do {
    for (const w of ws) n.write(`${w.uid}.yaml`, workloadYaml(n, w))
    await settle(allMounted(n, ws), waitMs)
    for (const w of ws) n.remove(`${w.uid}.yaml`)
    await settle(allGone(n, ws), waitMs)
    waves++
  } while (busy())
  return waves
}

