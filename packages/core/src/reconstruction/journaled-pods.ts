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
import { type ChainProblem, type PodVolumeRef, describeChainProblem, findChainProblem } from '../operations/pod-dir-chain.js'
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

/** The outcome of one chain check. */
type Outcome = { readonly problem: ChainProblem | null } | { readonly error: unknown }

/** What is checked for one journaled volume: each pod's chain key, or why none could be built. */
type Plan = { readonly volume: JournalVolume; readonly keys: readonly string[] } | { readonly volume: JournalVolume; readonly error: unknown }

/**
 * Checks the directories of every journaled (volume, pod), all at once: one check per pod, plugin
 * and mode, whatever the number of volumes it holds, and each directory looked at once (10,000
 * volumes of 1,000 pods cost 1,000 checks, not 10,000). A pod whose chain is not made of real
 * directories is left out, with one log line saying why; a volume whose check failed is returned
 * as the error.
 */
export async function checkJournaledPods(ctx: JournalCheckContext, volumes: Iterable<JournalVolume>): Promise<(CheckedJournalVolume | { readonly volume: JournalVolume; readonly error: unknown })[]> {
  const seen = new Map<string, Promise<FileInfo | null>>()
  const lstat = (path: string): Promise<FileInfo | null> => {
    let answer = seen.get(path)
    if (!answer) seen.set(path, (answer = ctx.host.lstat(path)))
    return answer
  }
  const refs = new Map<string, PodVolumeRef>()
  const plans: Plan[] = []
  for (const volume of volumes) {
    try {
      const keys: string[] = []
      for (const [, p] of volume.pods) {
        const ref = { podUID: p.podUID, pluginName: ctx.plugins.findPluginBySpec(p.spec).name, block: isBlockSpec(p.spec) }
        const key = `${ref.podUID}\0${ref.pluginName}\0${ref.block}`
        if (!refs.has(key)) refs.set(key, ref)
        keys.push(key)
      }
      plans.push({ volume, keys })
    } catch (error) {
      plans.push({ volume, error })
    }
  }
  const outcomes = new Map<string, Outcome>()
  await Promise.all(
    [...refs].map(([key, ref]) =>
      findChainProblem(ctx.host, ctx.paths, ref, lstat).then(
        (problem) => void outcomes.set(key, { problem }),
        (error: unknown) => void outcomes.set(key, { error }),
      ),
    ),
  )
  return plans.map((plan) => ('error' in plan ? plan : applyOutcomes(ctx, plan.volume, plan.keys, outcomes)))
}

/** The volume's pods whose chain is sound; the first failed check fails the volume. */
function applyOutcomes(ctx: JournalCheckContext, volume: JournalVolume, keys: readonly string[], outcomes: ReadonlyMap<string, Outcome>): CheckedJournalVolume | { readonly volume: JournalVolume; readonly error: unknown } {
  const pods: (readonly [UniquePodName, JournalPod])[] = []
  let i = 0
  for (const entry of volume.pods) {
    const outcome = outcomes.get(keys[i++] as string) as Outcome
    if ('error' in outcome) return { volume, error: outcome.error }
    if (outcome.problem === null) {
      pods.push(entry)
      continue
    }
    ctx.logger.warn('Journaled volume not reconstructed: its pod directory is not a chain of real directories, and nothing is torn down through it', {
      volume: volume.volume,
      pod: entry[0],
      reason: describeChainProblem(outcome.problem),
    })
  }
  return { volume, pods }
}
