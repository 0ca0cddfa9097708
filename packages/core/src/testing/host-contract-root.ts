/**
 * The Host contract's locked root (registered by `runHostContract`): the rule of the Host port, checked
 * as a class. For every member that takes a path, on random paths the engine uses, something is
 * planted at a random level before the call: a symlink to a directory outside the root that holds
 * canary files and the rest of the path (following it would succeed), a regular file, or a foreign
 * mount point (a tmpfs holding the rest of the path); or a level is swapped for such a symlink during
 * the call. The refusal is asserted (ELOOP, ENOTDIR; a mount point is crossed as usual), and in every
 * case that nothing outside the root changed: the canaries byte for byte, their modes and owners,
 * no new entry, no new or lost mount.
 *
 * Random but replayable: a failure names its seed and plan; `runHostContract(..., { seed })` replays it.
 */
import { expect, it } from 'vitest'
import { HostError } from '../errors.js'
import type { Host } from '../host/host.js'
import { dirname, joinPath } from '../paths.js'
import { type CaseEnv, type MemberCase, makeBeside, makeLeaf, memberCases } from './host-contract-root-cases.js'
import { type ContractContext, encoder, text } from './host-contract-support.js'
import { seededRandom } from './seeded-random.js'

/** Runs `hook` before each call the host makes (a composite call's steps included) until disposed. */
export type BeforeEachCall = (hook: () => Promise<void>) => () => void

/** How the locked-root part of the contract runs. */
export interface RootContractOptions {
  /** The host may mount here: foreign mount points are planted, and the cases that mount run. */
  readonly canMount: boolean
  /** Random runs per member. */
  readonly runs: number
  /** Replays a failure; a fresh one each run otherwise. */
  readonly seed: number
  /** See {@link HostContractSetup.beforeEachCall}; absent, the swap races the call instead. */
  readonly beforeEachCall: () => BeforeEachCall | undefined
}

/** Paths the engine uses beneath its root (SPEC's disk layout), as components. */
const ENGINE_PATHS: readonly (readonly string[])[] = [
  'pods/8d1e-uid/volumes/kubernetes.io~empty-dir/cache/data',
  'pods/8d1e-uid/volume-subpaths/config/app/0',
  'pods/8d1e-uid/plugins/kubernetes.io~empty-dir/cache/ready',
  'pods/8d1e-uid/volumeDevices/kubernetes.io~csi/block-pv',
  'plugins/kubevol.io/file-disk/mounts/pv-1',
  'plugins/kubevol.io/file-disk/loops/pv-1',
  'plugins/kubernetes.io/csi/hostpath.csi.k8s.io/3f2a/globalmount',
  'journal/volumes.log',
  'plugins_registry/hostpath.csi.k8s.io-reg.sock',
].map((path) => path.split('/'))

/** What is planted: nothing (the call must succeed), a symlink, a file, a foreign mount, or a symlink swapped in during the call. */
type Plant = 'nothing' | 'symlink' | 'file' | 'mount' | 'swap'

interface Plan {
  readonly path: readonly string[]
  /** The index of the planted component. */
  readonly level: number
  readonly plant: Plant
  /** For a swap where the host can interleave: before which of its calls (0: the call itself). */
  readonly swapAt: number
}

function hashName(name: string): number {
  let h = 2166136261
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619)
  return h >>> 0
}

function drawPlan(random: () => number, canMount: boolean): Plan {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T
  const path = pick(ENGINE_PATHS)
  const level = Math.floor(random() * path.length)
  const intermediate = level < path.length - 1
  const plants: Plant[] = ['nothing', 'symlink', 'symlink', 'swap', ...(intermediate ? (['file', ...(canMount ? (['mount'] as const) : [])] as const) : [])]
  return { path, level, plant: pick(plants), swapAt: Math.floor(random() * 3) }
}

/** The locked-root part of the contract. */
export function rootContract({ h, root }: ContractContext, options: RootContractOptions): void {
  it.for(memberCases.map((c) => ({ ...c, member: c.name })))('$member: no symlink beneath the root is followed, at any level', async (member, context) => {
    const host = h()
    if (!host.lockRoot || (member.has && !member.has(host)) || (member.mounts && !options.canMount)) {
      context.skip()
      return
    }
    const random = seededRandom(options.seed ^ hashName(member.name))
    for (let run = 0; run < options.runs; run++) {
      const plan = drawPlan(random, options.canMount)
      try {
        await runOnce(host, joinPath(root(), `run-${run}`), member, plan, options)
      } catch (err) {
        const where = `${member.name}, seed ${options.seed}, run ${run}: ${plan.plant} at ${plan.path.slice(0, plan.level + 1).join('/')} of ${plan.path.join('/')}`
        if (err instanceof Error) err.message = `${where}: ${err.message}`
        throw err
      }
    }
  })
}

async function runOnce(host: Host, base: string, member: MemberCase, plan: Plan, options: RootContractOptions): Promise<void> {
  const rootDir = joinPath(base, 'kubevol')
  const outside = joinPath(base, 'outside')
  await host.mkdir(rootDir, { recursive: true })
  await host.mkdir(outside)
  await host.writeFile(joinPath(outside, 'canary'), 'outside the root\n')
  const lock = await host.lockRoot?.(rootDir)
  if (!lock?.locked) throw new Error(`lockRoot(${rootDir}) did not lock`)
  try {
    const env: CaseEnv = { host, root: rootDir, aside: joinPath(rootDir, 'aside') }
    await host.mkdir(env.aside)
    await member.prepareAside?.(env)
    const { path: parts, level } = plan
    const path = joinPath(rootDir, ...parts)
    const levelPath = joinPath(rootDir, ...parts.slice(0, level + 1))
    // What following the planted link would reach: the rest of the path, whole, and canaries.
    const mirrorLevel = joinPath(outside, 'mirror', ...parts.slice(level, level + 1))
    const buildMirror = async (): Promise<void> => {
      const mirrorPath = joinPath(outside, 'mirror', ...parts.slice(level))
      await host.mkdir(dirname(mirrorPath), { recursive: true })
      for (let dir = dirname(mirrorPath); dir.startsWith(outside); dir = dirname(dir)) {
        await host.writeFile(joinPath(dir, 'canary'), encoder.encode(`canary of ${dir}\n`))
      }
      await makeLeaf(host, mirrorPath, member.leaf)
    }

    switch (plan.plant) {
      case 'nothing':
      case 'swap':
        await host.mkdir(dirname(path), { recursive: true })
        await makeLeaf(host, path, member.leaf)
        if (plan.plant === 'swap') await buildMirror()
        break
      case 'symlink':
        await host.mkdir(dirname(levelPath), { recursive: true })
        await buildMirror()
        await host.symlink(mirrorLevel, levelPath)
        if (level === parts.length - 1) await makeBeside(host, path, member.leaf)
        break
      case 'file':
        await host.mkdir(dirname(levelPath), { recursive: true })
        await host.writeFile(levelPath, 'a file where a directory should be\n')
        break
      case 'mount':
        await host.mkdir(levelPath, { recursive: true })
        await host.mount({ source: 'foreign', target: levelPath, fstype: 'tmpfs', options: ['size=1m'] })
        await host.mkdir(dirname(path), { recursive: true })
        await makeLeaf(host, path, member.leaf)
        break
    }

    const before = await snapshotOutside(host, base, rootDir)
    const outcome =
      plan.plant === 'swap'
        ? await callWhileSwapping(() => member.call(env, path), plan, options.beforeEachCall(), {
            there: async () => {
              await host.rename(levelPath, joinPath(rootDir, 'swapped-away'))
              await host.symlink(mirrorLevel, levelPath)
            },
            back: async () => {
              await host.remove(levelPath)
              await host.rename(joinPath(rootDir, 'swapped-away'), levelPath)
            },
          })
        : await settle(member.call(env, path))
    const error = outcome.ok ? undefined : outcome.error

    const atLast = level === parts.length - 1
    switch (plan.plant) {
      case 'nothing':
        expect(error, 'with nothing planted the call succeeds').toBeUndefined()
        break
      case 'symlink': {
        const atLink = atLast ? (member.atLink ?? 'ELOOP') : 'ELOOP'
        if (typeof atLink === 'string') {
          expectRefusal(error, atLink, levelPath)
        } else {
          expect(error, 'a symlink as the last component is acted on, not followed').toBeUndefined()
          await atLink(env, path, outcome.ok ? outcome.value : undefined)
        }
        break
      }
      case 'file':
        expectRefusal(error, 'ENOTDIR', levelPath)
        break
      case 'mount':
        expect(error, 'a mount point beneath the root is crossed as usual').toBeUndefined()
        expect((await host.mounts()).some((e) => e.target === levelPath && e.source === 'foreign'), 'the foreign mount stays').toBe(true)
        break
      case 'swap':
        // Any answer but one from outside the root: only the canaries below tell.
        if (error !== undefined) expect(error).toBeInstanceOf(HostError)
        break
    }
    expect(await snapshotOutside(host, base, rootDir), 'nothing outside the root changed').toEqual(before)
  } finally {
    await lock.release()
  }
}

type Outcome = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly error: unknown }

function settle(promise: Promise<unknown>): Promise<Outcome> {
  return promise.then(
    (value) => ({ ok: true, value }),
    (error: unknown) => ({ ok: false, error }),
  )
}

function expectRefusal(error: unknown, code: string, levelPath: string): void {
  expect(error, `expected a HostError ${code}`).toBeInstanceOf(HostError)
  const hostError = error as HostError
  expect(hostError.code, hostError.message).toBe(code)
  // The path given (or, for a pair, one of them): beneath the planted level.
  expect(hostError.path.startsWith(levelPath), `${hostError.path} names the path given`).toBe(true)
  if (code === 'ELOOP') expect(hostError.message).toMatch(/symlink/)
}

/** Swaps a level for the symlink, and back. */
interface Swap {
  readonly there: () => Promise<void>
  readonly back: () => Promise<void>
}

/**
 * The call with a level swapped for the symlink during it: where the host can interleave, before
 * its `swapAt`-th call (a composite call's steps are calls of their own); elsewhere a loop of swaps
 * and swaps back races it until it settles.
 */
async function callWhileSwapping(call: () => Promise<unknown>, plan: Plan, interleave: BeforeEachCall | undefined, swap: Swap): Promise<Outcome> {
  if (interleave) {
    let calls = 0
    let busy = false
    const dispose = interleave(async () => {
      if (busy || calls++ !== plan.swapAt) return
      busy = true
      await swap.there().catch(() => undefined)
    })
    try {
      return await settle(call())
    } finally {
      dispose()
    }
  }
  let settled = false
  const racing = (async () => {
    for (let round = 0; round < 200 && !settled; round++) {
      await swap.there().catch(() => undefined)
      await swap.back().catch(() => undefined)
    }
  })()
  const outcome = await settle(call())
  settled = true
  await racing
  return outcome
}

/** What is outside the root under `base`: every entry (type, mode, owner, bytes, link target), and the mounts. */
async function snapshotOutside(host: Host, base: string, rootDir: string): Promise<Record<string, string>> {
  const seen: Record<string, string> = {}
  const walk = async (dir: string): Promise<void> => {
    for (const name of await host.readdir(dir)) {
      const path = joinPath(dir, name)
      if (path === rootDir) continue
      const info = await host.lstat(path)
      if (!info) continue
      let content = ''
      if (info.type === 'file') content = text(await host.readFile(path))
      else if (info.type === 'symlink') content = await host.readlink(path)
      seen[path] = `${info.type} ${info.mode.toString(8)} ${info.uid}:${info.gid} ${JSON.stringify(content)}`
      if (info.type === 'directory') await walk(path)
    }
  }
  await walk(base)
  for (const entry of await host.mounts()) {
    if (entry.target.startsWith(`${base}/`) && !entry.target.startsWith(`${rootDir}/`)) seen[`mount ${entry.target}`] = `${entry.fstype} ${entry.source}`
  }
  return seen
}
