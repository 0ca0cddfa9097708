/**
 * The host of the configuration, and the root lock as the first service: one manager per root.
 */
import { createMemoryHost } from '@kubevol/adapter-mock'
import type { Clock, Host } from '@kubevol/core'
import { errorMessage } from '@kubevol/core'
import { AgentConfigError } from '../config/load-config.js'
import type { ResolvedAgentConfig } from '../config/options.js'
import { type ValueService, defineService } from './service.js'

/** What the kernel offers the Linux host (adapter-linux's `KernelFloor`, which the agent does not import). */
export interface KernelFloor {
  /** `uname -r`. */
  readonly release: string
  /** `openat2(2)`, Linux 5.6. */
  readonly openat2: boolean
  /** `open_tree`/`move_mount`/`fsopen`, Linux 5.2. */
  readonly newMountApi: boolean
}

/** The kernel lacks what the Linux host needs: a configuration error (exit 2) whose message is one line. */
class KernelTooOldError extends AgentConfigError {
  constructor(message: string) {
    super([{ key: 'host', value: 'linux', source: 'the running kernel', allowed: message }])
    this.message = message
  }
}

/**
 * The host `config.host` names: the memory host, or the Linux host loaded on demand. The Linux host
 * is refused with {@link KernelTooOldError} on a kernel without openat2 or the new mount API, as
 * `probe` (default: adapter-linux's `probeKernelFloor`) finds it.
 */
export async function loadHost(config: ResolvedAgentConfig, clock: Clock, probe?: () => KernelFloor): Promise<Host> {
  return config.host === 'linux' ? await loadLinuxHost(probe) : createMemoryHost({ clock })
}

interface LinuxAdapter {
  createLinuxHost?: (options?: object) => Host
  probeKernelFloor?: () => KernelFloor
  kernelFloorRefusal?: (floor: KernelFloor) => string | undefined
}

/** Loads @kubevol/adapter-linux only when asked, so the agent runs where it is not installed. */
async function loadLinuxHost(probe: (() => KernelFloor) | undefined): Promise<Host> {
  const specifier = '@kubevol/adapter-linux'
  let mod: LinuxAdapter
  try {
    mod = (await import(specifier)) as LinuxAdapter
  } catch (err) {
    throw new Error(`host "linux" needs @kubevol/adapter-linux, which cannot be loaded: ${errorMessage(err)}`, { cause: err })
  }
  if (typeof mod.createLinuxHost !== 'function') throw new Error('@kubevol/adapter-linux has no createLinuxHost')
  const floor = (probe ?? mod.probeKernelFloor)?.()
  const refusal = floor && mod.kernelFloorRefusal?.(floor)
  if (refusal) throw new KernelTooOldError(refusal)
  return mod.createLinuxHost()
}

type RootLock = Awaited<ReturnType<NonNullable<Host['lockRoot']>>>

/**
 * One manager per root: a second agent, or `kubevol gc`, would tear down what this one set up.
 * First in the list, so taken first and released last; the kernel drops it if we are killed.
 */
export function rootLockService(host: Host, rootDir: string): ValueService<RootLock | undefined> {
  return defineService('root-lock', {
    create: async () => {
      const lock = await host.lockRoot?.(rootDir)
      if (lock && !lock.locked) {
        throw new Error(`the root ${rootDir} is in use by kubevol${lock.holderPid ? ` (pid ${lock.holderPid})` : ''}: another agent manages it; stop it first`)
      }
      return lock
    },
    stop: async (lock) => {
      if (lock?.locked) await lock.release()
    },
  })
}
