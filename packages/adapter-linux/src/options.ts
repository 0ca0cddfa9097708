/** Options of `createLinuxHost`, each with its default, resolved in one place. */
import type { Clock } from '@kubevol/core'
import { ConfigError, systemClock } from '@kubevol/core'

export interface LinuxHostOptions {
  /**
   * Deadline of one call that may block in the kernel (mount, umount, stat, ioctl, statfs, a file
   * read). A call that misses it fails with ETIMEDOUT, which the manager records as uncertain.
   * @default 30_000
   */
  readonly callTimeoutMs?: number
  /**
   * Deadline of one filesystem tool run (mkfs, fsck, resize2fs, xfs_growfs, blkid). A tool that
   * misses it is left running. @default 600_000
   */
  readonly toolTimeoutMs?: number
  /**
   * Size of the libuv threadpool this process runs with (set `UV_THREADPOOL_SIZE` before Node
   * starts any async work). @default Number(process.env.UV_THREADPOOL_SIZE) || 4
   */
  readonly threadPoolSize?: number
  /**
   * How many calls may be stalled past their deadline before every new call fails fast, so that
   * the pool keeps a thread for the rest of the process. It also bounds the I/O workers: one per
   * blocked call and one more. @default threadPoolSize - 1 (at least 1)
   */
  readonly maxStalledCalls?: number
  /** Time for deadlines. @default systemClock */
  readonly clock?: Clock
  /** Environment of the spawned tools (PATH decides which mkfs runs). @default process.env */
  readonly toolEnv?: NodeJS.ProcessEnv
  /** Where SELinux reports its mode. @default '/sys/fs/selinux/enforce' */
  readonly selinuxEnforcePath?: string
}

/** The options with every default filled in. Throws ConfigError on a nonsensical value. */
export function resolveLinuxHostOptions(options: LinuxHostOptions = {}) {
  const threadPoolSize = options.threadPoolSize ?? (Number(process.env.UV_THREADPOOL_SIZE) || 4)
  const resolved = {
    callTimeoutMs: options.callTimeoutMs ?? 30_000,
    toolTimeoutMs: options.toolTimeoutMs ?? 600_000,
    threadPoolSize,
    maxStalledCalls: options.maxStalledCalls ?? Math.max(1, threadPoolSize - 1),
    clock: options.clock ?? systemClock,
    toolEnv: options.toolEnv ?? process.env,
    selinuxEnforcePath: options.selinuxEnforcePath ?? '/sys/fs/selinux/enforce',
  }
  for (const key of ['callTimeoutMs', 'toolTimeoutMs', 'threadPoolSize', 'maxStalledCalls'] as const) {
    if (!(resolved[key] > 0)) throw new ConfigError(`createLinuxHost: ${key} must be a positive number, got ${resolved[key]}`)
  }
  return resolved
}

export type ResolvedLinuxHostOptions = ReturnType<typeof resolveLinuxHostOptions>
