/**
 * The Host contract: the behaviour every Host implementation shares, checked by one suite that each
 * adapter runs against itself (the memory host in CI, the Linux host as root under /tmp). It asserts
 * only what the Linux kernel also does: errno codes, what is visible where, what survives an
 * unmount; never exact device numbers, mount ids or inode numbers.
 */
import { afterEach, beforeEach, describe } from 'vitest'
import type { Host, MountEntry } from '../host/host.js'
import { joinPath } from '../paths.js'
import { devicesContract } from './host-contract-devices.js'
import { filesContract } from './host-contract-files.js'
import { fileStepsContract } from './host-contract-steps.js'
import { ownershipContract, symlinksContract } from './host-contract-links.js'
import { mountsContract } from './host-contract-mounts.js'
import { type BeforeEachCall, rootContract } from './host-contract-root.js'
import { type ContractContext, text } from './host-contract-support.js'

export { expectHostError } from './host-contract-support.js'
export type { BeforeEachCall } from './host-contract-root.js'

/**
 * Parts of the contract a host can be excused from where it runs (they are reported as skipped).
 * `root` is the locked root's rule (a host without `lockRoot` skips it by itself).
 */
export type HostContractArea = 'files' | 'symlinks' | 'ownership' | 'mounts' | 'devices' | 'root'

/** A host under test and the directory the suite may use. */
export interface HostContractSetup {
  readonly host: Host
  /** An existing, empty directory, given as a canonical absolute path (no symlinks in it). */
  readonly root: string
  /** Runs after each test, once the suite has unmounted what it mounted under `root`. */
  readonly cleanup?: () => Promise<void>
  /**
   * Runs `hook` before each call the host makes from now on (the calls a composite call such as
   * `fileSteps` makes of its steps included; the hook's own calls too, which it ignores) until the
   * returned function is called: how the locked-root cases swap a level in the middle of a call.
   * Left out where calls cannot be interleaved; the swap then races the call in a loop.
   */
  readonly beforeEachCall?: BeforeEachCall
}

export interface HostContractOptions {
  /** Areas to skip, e.g. `['mounts', 'devices']` for a host that is not running as root. @default [] */
  readonly skip?: readonly HostContractArea[]
  /**
   * The seed of the locked-root cases' random plans, to replay a failure (its message names the seed).
   * @default a fresh one each run
   */
  readonly seed?: number
  /** Random plans per member in the locked-root cases. @default 20 */
  readonly rootRuns?: number
}

function isUnder(target: string, root: string): boolean {
  return target === root || target.startsWith(`${root}/`)
}

/**
 * Registers the Host contract suite (vitest `describe`/`it`) for one implementation. `setup` runs
 * before each test and gives a fresh root directory; after each test the suite lazily unmounts
 * everything under it and detaches the loop devices it attached, then calls `cleanup`.
 *
 * @example
 * runHostContract('memory host', async () => ({ host: createMemoryHost(), root: '/contract' }))
 */
export function runHostContract(name: string, setup: () => Promise<HostContractSetup>, options: HostContractOptions = {}): void {
  const skipped = new Set(options.skip ?? [])

  describe(`Host contract: ${name}`, () => {
    let current: HostContractSetup | undefined
    let attached: string[] = []

    const ctx = (): HostContractSetup => {
      if (!current) throw new Error('host contract: setup did not run')
      return current
    }
    const h = (): Host => ctx().host
    const p = (...parts: string[]): string => joinPath(ctx().root, ...parts)
    const read = async (path: string): Promise<string> => text(await h().readFile(path))
    const entryAt = async (target: string): Promise<MountEntry | undefined> => (await h().mounts()).findLast((e) => e.target === target)
    const attach = async (file: string, attachOptions?: { readonly readOnly?: boolean }): Promise<string> => {
      const loops = h().loopDevices
      if (!loops) throw new Error('host contract: no loopDevices')
      const device = await loops.attach(file, attachOptions)
      attached.push(device)
      return device
    }
    const contract: ContractContext = { h, p, root: () => ctx().root, read, entryAt, attach }

    beforeEach(async () => {
      current = await setup()
      attached = []
    })

    afterEach(async () => {
      const { host, root, cleanup } = ctx()
      // Lazy, deepest and latest first; a few rounds because a lazy unmount takes its children along.
      for (let round = 0; round < 5; round++) {
        const under = (await host.mounts()).filter((e) => isUnder(e.target, root)).reverse()
        if (under.length === 0) break
        for (const entry of under) await host.unmount(entry.target, { lazy: true }).catch(() => undefined)
      }
      for (const device of attached) await host.loopDevices?.detach(device).catch(() => undefined)
      current = undefined
      await cleanup?.()
    })

    describe.skipIf(skipped.has('files'))('directories and files', () => filesContract(contract))
    describe.skipIf(skipped.has('files'))('file steps', () => fileStepsContract(contract))

    describe.skipIf(skipped.has('symlinks'))('symlinks', () => symlinksContract(contract))

    describe.skipIf(skipped.has('ownership'))('ownership', () => ownershipContract(contract))

    describe.skipIf(skipped.has('mounts'))('mounts', () => mountsContract(contract))

    describe.skipIf(skipped.has('devices'))('loop devices and filesystems', () => devicesContract(contract))

    describe.skipIf(skipped.has('root'))('the locked root', () =>
      rootContract(contract, {
        canMount: !skipped.has('mounts'),
        runs: options.rootRuns ?? 20,
        seed: options.seed ?? Math.floor(Math.random() * 2 ** 31),
        beforeEachCall: () => ctx().beforeEachCall,
      }),
    )
  })
}
