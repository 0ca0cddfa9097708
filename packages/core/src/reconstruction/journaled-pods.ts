/**
 * Which of the journal's set-ups are reconstructed. The journal says a volume was set up for a pod;
 * it cannot say that the pod's directories are still the ones kubevol made. A pod directory (or its
 * `volumes`, `volumeDevices` or plugin directory) swapped for a symlink while kubevol was down
 * would lead the tear-down of the reconstructed volume to whatever the link points at. The disk
 * scan skips such entries by their type (lstat); so does this, for what the journal names.
 *
 * A missing directory is no reason to skip: nothing below it exists to be followed, and some
 * volumes (hostPath) never have one, while their subPath binds must still be cleaned. The
 * tear-down checks the directories again before it removes anything.
 */
import type { UniquePodName } from '../api/names.js'
import { isBlockSpec } from '../api/volume-spec.js'
import type { FileInfo, Host } from '../host/host.js'
import type { JournalVolume } from '../journal/journal.js'
import type { Logger } from '../observability.js'
import { type ChainProblem, describeChainProblem, findChainProblem } from '../operations/pod-dir-chain.js'
import type { Paths } from '../paths.js'
import type { PluginManager } from '../plugins/plugin-manager.js'

type JournalPod = JournalVolume['pods'] extends Iterable<[UniquePodName, infer P]> ? P : never

/** A journaled volume with the pods whose directories are real directories. */
export interface CheckedJournalVolume {
  readonly volume: JournalVolume
  readonly pods: readonly (readonly [UniquePodName, JournalPod])[]
}

export interface JournalCheckContext {
  readonly host: Host
  readonly paths: Paths
  readonly plugins: PluginManager
  readonly logger: Logger
}

/**
 * Checks the directories of every journaled (volume, pod), all at once (the levels pods share are
 * looked at once). A pod whose chain is not made of real directories is left out, with one log line
 * saying why; a volume whose check failed is returned as the error.
 */
export async function checkJournaledPods(ctx: JournalCheckContext, volumes: Iterable<JournalVolume>): Promise<(CheckedJournalVolume | { readonly volume: JournalVolume; readonly error: unknown })[]> {
  const seen = new Map<string, Promise<FileInfo | null>>()
  const lstat = (path: string): Promise<FileInfo | null> => {
    let answer = seen.get(path)
    if (!answer) seen.set(path, (answer = ctx.host.lstat(path)))
    return answer
  }
  return Promise.all(
    [...volumes].map(async (volume) => {
      try {
        return await checkVolume(ctx, volume, lstat)
      } catch (error) {
        return { volume, error }
      }
    }),
  )
}

async function checkVolume(ctx: JournalCheckContext, volume: JournalVolume, lstat: (path: string) => Promise<FileInfo | null>): Promise<CheckedJournalVolume> {
  const entries = [...volume.pods]
  const problems = await Promise.all(
    entries.map(([, p]) => {
      const ref = { podUID: p.podUID, pluginName: ctx.plugins.findPluginBySpec(p.spec).name, block: isBlockSpec(p.spec) }
      return findChainProblem(ctx.host, ctx.paths, ref, lstat)
    }),
  )
  const pods: (readonly [UniquePodName, JournalPod])[] = []
  for (const [i, entry] of entries.entries()) {
    const problem = problems[i] as ChainProblem | null
    if (problem === null) pods.push(entry)
    else {
      ctx.logger.warn('Journaled volume not reconstructed: its pod directory is not a chain of real directories, and nothing is torn down through it', {
        volume: volume.volume,
        pod: entry[0],
        reason: describeChainProblem(problem),
      })
    }
  }
  return { volume, pods }
}
