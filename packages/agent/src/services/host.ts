/**
 * The host of the configuration, and the root lock as the first service: one manager per root.
 */
import { createMemoryHost } from '@kubevol/adapter-mock'
import type { Clock, Host } from '@kubevol/core'
import { errorMessage } from '@kubevol/core'
import type { ResolvedAgentConfig } from '../config/options.js'
import { type ValueService, defineService } from './service.js'

/** The host `config.host` names: the memory host, or the Linux host loaded on demand. */
export async function loadHost(config: ResolvedAgentConfig, clock: Clock): Promise<Host> {
  return config.host === 'linux' ? await loadLinuxHost() : createMemoryHost({ clock })
}

/** Loads @kubevol/adapter-linux only when asked, so the agent runs where it is not installed. */
async function loadLinuxHost(): Promise<Host> {
  const specifier = '@kubevol/adapter-linux'
  let mod: { createLinuxHost?: (options?: object) => Host }
  try {
    mod = (await import(specifier)) as typeof mod
  } catch (err) {
    throw new Error(`host "linux" needs @kubevol/adapter-linux, which cannot be loaded: ${errorMessage(err)}`, { cause: err })
  }
  if (typeof mod.createLinuxHost !== 'function') throw new Error('@kubevol/adapter-linux has no createLinuxHost')
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
