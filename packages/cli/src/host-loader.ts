/**
 * The host a command runs on: a given one (tests), the in-memory host, or the Linux host loaded on
 * demand (so the CLI runs where @kubevol/adapter-linux cannot load).
 */
import { createMemoryHost } from '@kubevol/adapter-mock'
import type { Host } from '@kubevol/core'
import { CliError } from './errors.js'

/** The parts of @kubevol/adapter-linux the CLI uses. */
export interface LinuxAdapter {
  createLinuxHost(options?: object): Host
  checkMountNamespace(): Promise<{ name: string; ok: boolean; message: string }>
  checkRootPropagation(host: Host, root: string): Promise<{ name: string; ok: boolean; message: string }>
  probeKernelFloor(): { release: string; openat2: boolean; newMountApi: boolean }
}

/** Imports @kubevol/adapter-linux. Throws CliError saying why it cannot load. */
export async function loadLinuxAdapter(): Promise<LinuxAdapter> {
  const specifier = '@kubevol/adapter-linux'
  try {
    return (await import(specifier)) as LinuxAdapter
  } catch (err) {
    throw new CliError(`--host linux needs @kubevol/adapter-linux, which cannot be loaded: ${(err as Error).message}`)
  }
}

/** The host `--host` names, unless one is given. */
export async function hostFor(kind: unknown, given: Host | undefined): Promise<Host> {
  if (given) return given
  if (kind === 'linux') return (await loadLinuxAdapter()).createLinuxHost()
  return createMemoryHost()
}
