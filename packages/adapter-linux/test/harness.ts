/** One temp root and one Linux host per test, cleaned up after it (mounts, loop devices, files). */
import { afterEach, beforeEach } from 'vitest'
import { createLinuxHost } from '../src/create-linux-host.js'
import type { LinuxHost } from '../src/linux-host.js'
import type { LinuxHostOptions } from '../src/options.js'
import { cleanupTempRoot, makeTempRoot } from './temp-root.js'

export interface Harness {
  readonly host: LinuxHost
  readonly root: string
  /** A path below the root. */
  p(...parts: string[]): string
}

/** Registers the hooks; the returned getter is valid inside tests. */
export function useLinuxHost(options: LinuxHostOptions = {}): () => Harness {
  let current: Harness | undefined
  const cleanups: (() => void)[] = []
  beforeEach(() => {
    const root = makeTempRoot()
    const host = createLinuxHost({ callTimeoutMs: 20_000, ...options })
    current = { host, root, p: (...parts) => [root, ...parts].join('/') }
    cleanups.push(() => {
      host.close()
      cleanupTempRoot(root)
    })
  })
  afterEach(() => {
    for (const cleanup of cleanups.splice(0)) cleanup()
    current = undefined
  })
  return () => {
    if (!current) throw new Error('harness used outside a test')
    return current
  }
}
