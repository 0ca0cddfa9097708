/**
 * One hostile node per attack: a temporary directory holding kubevol's root R (nested a few levels
 * deep, so a crafted `..` lands in the temporary directory where the audit sees it), a manifest
 * directory, a canary tree and the attack's own fixtures outside R. Helpers write and remove pod
 * manifests, start and stop the agent, wait on its status API, and register what the attack must
 * undo itself (FUSE daemons, loop devices, its own mounts) before the audit runs.
 */
import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { type Entry, type Snapshot, entryOf, mountTable, snapshot } from './audit.js'
import { type AgentEntry, type AgentProcess, runCli, startAgentProcess, until } from './processes.js'

/** What `/v1/pods/<uid>` answers, as far as the attacks read it. */
interface PodView {
  readonly uid: string
  readonly podErrors?: string[]
  readonly worker?: { phase: string; lastError?: string }
  readonly volumes: { name: string; phase: string; mountState: string; lastError?: string }[]
}

/** What `/v1/state` answers, as far as the attacks read it. */
interface StateView {
  readonly podErrors: Record<string, string[]>
  readonly desired: { volumeName: string; podUID: string }[]
  readonly actual: { mounted: { volumeName: string; podUID: string; mountState: string }[]; attached: { volumeName: string }[] }
  /** Operations running now (a mount may still land after its pod is gone). */
  readonly pendingOperations: { name: string; volumeName: string }[]
  readonly manifests?: { errors: { file: string; line: number; reason: string }[] }
}

export interface HostileNode {
  /** The temporary directory everything lives in. */
  readonly base: string
  /** kubevol's root. */
  readonly root: string
  readonly manifests: string
  /** A directory outside R for the attack's fixtures (audited by content like the canaries). */
  readonly outside: string
  /** The canary files (outside R, known content). */
  readonly canaries: readonly string[]
  /** An absolute path outside the temporary directory that crafted names aim at: it must never appear. */
  readonly sentinel: string
  /** The running agent, if any. */
  agent: AgentProcess | undefined
  /**
   * Starts the agent (stopping none: call {@link stop} first) through `entry` (default: the last one
   * given, at first the agent's main), with `extra` flags (default: the last ones given). The
   * teardown's restart uses the same entry and flags.
   */
  start(options?: { shutdownGraceMs?: number; entry?: AgentEntry; extra?: readonly string[] }): Promise<AgentProcess>
  /** SIGTERM, waits for the exit (SIGKILL after `timeoutMs`). */
  stop(timeoutMs?: number): Promise<void>
  /** Writes a manifest file (atomically: a temporary file renamed into place). */
  write(name: string, yaml: string): void
  remove(name: string): void
  /** The pod as the agent shows it (undefined when it knows nothing of it). */
  pod(uid: string): Promise<PodView | undefined>
  state(): Promise<StateView>
  /** Waits until every volume of the pod (at least `count`) is mounted. */
  waitMounted(uid: string, count: number, timeoutMs?: number): Promise<void>
  /** Waits until the agent knows nothing of the pod and nothing is mounted under its directory. */
  waitGone(uid: string, timeoutMs?: number): Promise<void>
  /** Mount points (from the kernel) under `dir` (default: R). */
  mountsUnder(dir?: string): string[]
  /** Runs the CLI; `--host linux --root-dir R` are added. */
  kubevol(...args: string[]): Promise<{ code: number | string; stdout: string; stderr: string }>
  /** Records `paths` (files) now: {@link lostSince} tells which changed later. */
  remember(paths: readonly string[]): Map<string, Entry | undefined>
  /** Files of a {@link remember} that are gone or changed, with their bytes. */
  lostSince(remembered: Map<string, Entry | undefined>): { lost: string[]; bytes: number }
  /** Registers an undo step the teardown runs before the audit (newest first). */
  onCleanup(step: () => void | Promise<void>): void
  /** Registers a step run before the teardown asks the agent to unmount (e.g. SIGCONT a FUSE daemon). */
  beforeTeardown(step: () => void | Promise<void>): void
  /** Paths outside R the audit must not read (hung FUSE mounts) or may see changed (hostPath directories pods write). */
  exclude(path: string): void
  /**
   * For fixtures made or changed outside R after the agent first started: takes `path` (or, without
   * it, everything outside R) into the audit's reference snapshot as it is now.
   */
  outsideChanged(path?: string): void
  /** Backing files besides the temporary directory whose loop devices are leaks (a block device given as an image). */
  watchLoopBacking(file: string): void
}

/** The internal side the suite's teardown uses. */
export interface NodeInternals {
  readonly node: HostileNode
  readonly cleanups: (() => void | Promise<void>)[]
  readonly preTeardown: (() => void | Promise<void>)[]
  readonly excluded: Set<string>
  readonly loopFiles: string[]
  /** The snapshot of everything outside R, taken when the agent first starts. */
  baseline: Snapshot | undefined
  /** Losses found by attacks in the middle of a run (files inside R that had to survive). */
  readonly midRunLosses: { lost: string[]; bytes: number }
  outsideSnapshot(): Snapshot
  readonly canaryFiles: string[]
}

/** A canary tree: nested files of known content, a binary one, an empty one and a symlink. */
function writeCanaries(dir: string): string[] {
  const files: [string, string | Buffer][] = [
    ['README', 'canary: must never change\n'],
    ['nested/deeper/data.bin', randomBytes(64 * 1024)],
    ['nested/empty', ''],
    ['volumes/kubernetes.io~empty-dir/cache/data', 'looks like a pod volume, is not one\n'],
    ['pods/od/volumes/kubernetes.io~empty-dir/cache/data', 'looks like a pod directory, is not one\n'],
  ]
  for (const [rel, content] of files) {
    mkdirSync(dirname(join(dir, rel)), { recursive: true })
    writeFileSync(join(dir, rel), content)
  }
  symlinkSync('README', join(dir, 'link-to-readme'))
  return files.map(([rel]) => join(dir, rel))
}

/** Makes the node's directories and canaries. */
export function createHostileNode(): NodeInternals {
  const base = realpathSync(mkdtempSync(join(tmpdir(), 'kubevol-hostile-')))
  // R four levels down: `R/pods/../../../x` is base/nest/a/x, inside the temporary directory.
  const root = join(base, 'nest/a/b/root')
  const manifests = join(base, 'manifests')
  const outside = join(base, 'outside')
  const canary = join(base, 'canary')
  for (const d of [root, manifests, outside, canary]) mkdirSync(d, { recursive: true })
  const canaryFiles = writeCanaries(canary)
  const sentinel = join(tmpdir(), `kubevol-hostile-escape-${randomBytes(4).toString('hex')}`)
  // The manifest directory is the attacks' to change; R is kubevol's.
  const excluded = new Set<string>([root, manifests])
  const internals: NodeInternals = {
    node: undefined as unknown as HostileNode,
    cleanups: [],
    preTeardown: [],
    excluded,
    loopFiles: [],
    baseline: undefined,
    midRunLosses: { lost: [], bytes: 0 },
    canaryFiles,
    outsideSnapshot: () =>
      snapshot(
        base,
        excluded,
        new Set(mountTable().map((m) => m.target)),
      ),
  }
  let agentEntry: AgentEntry = 'agent'
  let extra: readonly string[] = []
  const mountsUnder = (dir = root): string[] =>
    mountTable()
      .map((m) => m.target)
      .filter((t) => t === dir || t.startsWith(`${dir}/`))
  const node: HostileNode = {
    base,
    root,
    manifests,
    outside,
    sentinel,
    canaries: canaryFiles,
    agent: undefined,
    async start(options = {}) {
      internals.baseline ??= internals.outsideSnapshot()
      agentEntry = options.entry ?? agentEntry
      extra = options.extra ?? extra
      node.agent = await startAgentProcess({ rootDir: root, manifestDir: manifests, entry: agentEntry, extra, ...(options.shutdownGraceMs !== undefined ? { shutdownGraceMs: options.shutdownGraceMs } : {}) })
      return node.agent
    },
    async stop(timeoutMs) {
      await node.agent?.stop(timeoutMs)
      node.agent = undefined
    },
    write(name, yaml) {
      const tmp = join(manifests, `.${name}.tmp`)
      writeFileSync(tmp, yaml)
      execFileSync('mv', ['-f', tmp, join(manifests, name)])
    },
    remove(name) {
      unlinkSync(join(manifests, name))
    },
    async pod(uid) {
      if (!node.agent) throw new Error('no agent is running')
      return node.agent.get<PodView>(`/v1/pods/${encodeURIComponent(uid)}`)
    },
    async state() {
      if (!node.agent) throw new Error('no agent is running')
      return (await node.agent.get<StateView>('/v1/state')) as StateView
    },
    async waitMounted(uid, count, timeoutMs = 20_000) {
      let last: PodView | undefined
      try {
        await until(
          `pod ${uid}: ${count} volumes mounted`,
          async () => {
            last = await node.pod(uid)
            return last !== undefined && last.volumes.length >= count && last.volumes.every((v) => v.phase === 'mounted')
          },
          timeoutMs,
        )
      } catch (err) {
        throw new Error(`${(err as Error).message}; the agent shows: ${JSON.stringify(last)}`)
      }
    },
    async waitGone(uid, timeoutMs = 20_000) {
      const podDir = join(root, 'pods', uid)
      let last: StateView | undefined
      const known = (s: StateView): boolean => s.desired.some((v) => v.podUID === uid) || s.actual.mounted.some((m) => m.podUID === uid)
      try {
        await until(
          `pod ${uid} unmounted and forgotten`,
          async () => {
            last = await node.state()
            return !known(last) && mountsUnder(podDir).length === 0
          },
          timeoutMs,
        )
      } catch (err) {
        const volumes = last?.actual.mounted.filter((m) => m.podUID === uid).map((m) => `${m.volumeName} ${m.mountState}`)
        const backoffs = (last as { backoffs?: { volumeName: string; error: string }[] } | undefined)?.backoffs?.map((b) => `${b.volumeName}: ${b.error}`)
        throw new Error(`${(err as Error).message}; still mounted: ${JSON.stringify(mountsUnder(podDir))}; the agent's actual state: ${JSON.stringify(volumes)}; backoffs: ${JSON.stringify(backoffs)}`)
      }
    },
    mountsUnder,
    kubevol: (...args) => runCli([...args, '--host', 'linux', '--root-dir', root]),
    remember(paths) {
      return new Map(paths.map((p) => [p, entryOf(p)]))
    },
    lostSince(remembered) {
      const lost: string[] = []
      let bytes = 0
      for (const [path, was] of remembered) {
        const now = entryOf(path)
        if (was && (now?.type !== was.type || now.hash !== was.hash)) {
          lost.push(path)
          bytes += Math.max(was.size, 1)
        }
      }
      // Files outside R are audited again at the end: count here only those inside R.
      for (const path of lost.filter((p) => p.startsWith(`${root}/`))) {
        internals.midRunLosses.lost.push(path)
        internals.midRunLosses.bytes += Math.max(remembered.get(path)?.size ?? 0, 1)
      }
      return { lost, bytes }
    },
    onCleanup: (step) => internals.cleanups.push(step),
    beforeTeardown: (step) => internals.preTeardown.push(step),
    exclude: (path) => excluded.add(path),
    watchLoopBacking: (file) => internals.loopFiles.push(file),
    outsideChanged: (path) => {
      if (!internals.baseline) return
      const now = internals.outsideSnapshot()
      if (path === undefined) internals.baseline = now
      else for (const [rel, entry] of now) if (join(base, rel) === path || join(base, rel).startsWith(`${path}/`)) internals.baseline.set(rel, entry)
    },
  }
  ;(internals as { node: HostileNode }).node = node
  return internals
}

/** Removes the temporary directory once nothing is mounted in it any more (never through a mount). */
export function removeNodeDirs(internals: NodeInternals, stillMounted: readonly string[]): void {
  const { base, sentinel } = internals.node
  if (stillMounted.length > 0) return
  rmSync(base, { recursive: true, force: true })
  rmSync(sentinel, { recursive: true, force: true })
}
