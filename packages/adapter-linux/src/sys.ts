/**
 * The two ways the Linux host reaches the kernel, both off the main thread and under the
 * deadline of a {@link CallRunner}: a C library call through koffi, or a node:fs/promises call.
 * Failures become HostErrors carrying the call and the path.
 */
import { HostError } from '@kubevol/core'
import type { CallContext, CallRunner } from './call-runner.js'
import { errnoError, toHostError } from './errno.js'
import type { Libc, SysResult } from './libc.js'

interface SysCallOptions {
  /** The filesystem the call may block on (for quarantine). @default the mount holding `path` */
  readonly key?: string
  /** Prefix of the error detail (`mount -t tmpfs tmpfs`); a function is called only when the call fails. */
  readonly detail?: string | (() => string)
}

const NO_OPTIONS: SysCallOptions = {}

/** What the host's parts use to reach the kernel. */
export interface Sys {
  /** A libc call; resolves with its non-negative return value, rejects with a HostError from errno. */
  call(syscall: string, path: string, run: (libc: Libc, call: CallContext) => Promise<SysResult>, options?: SysCallOptions): Promise<number>
  /** A libc call whose failure the caller inspects itself (errno), still under the deadline. */
  raw(syscall: string, path: string, run: (libc: Libc, call: CallContext) => Promise<SysResult>, options?: SysCallOptions): Promise<SysResult>
  /**
   * A node:fs call (or an I/O-worker call, given `call` so that it is queued in its filesystem's
   * lane and can be taken back at the deadline); its error mapped to a HostError.
   */
  fs<T>(syscall: string, path: string, run: (call: CallContext) => Promise<T>, options?: SysCallOptions): Promise<T>
  /** The bindings, loaded on first use (for synchronous, non-blocking calls). */
  libc(): Libc
}

/** How the host names the filesystem a path is on: from the last snapshot, or from a fresh table. */
export interface FilesystemKeys {
  keyOf(path: string): string
  freshKeyOf(path: string): Promise<string>
}

/** Builds a {@link Sys} over `runner`. */
export function createSys(runner: CallRunner, loadLibc: () => Libc, keys: FilesystemKeys): Sys {
  const refine = (path: string, options: SysCallOptions) => (options.key === undefined ? () => keys.freshKeyOf(path) : undefined)
  const load = (syscall: string, path: string): Libc => {
    try {
      return loadLibc()
    } catch (err) {
      throw new HostError('ENOTSUP', syscall, path, `the FFI library could not be loaded: ${(err as Error).message}`, { cause: err })
    }
  }
  return {
    libc: loadLibc,
    raw(syscall, path, run, options = NO_OPTIONS) {
      // A call the I/O worker refused before making it (a symlink beneath the root) rejects with a failure, mapped here.
      return runner.run(syscall, path, options.key ?? keys.keyOf(path), async (ctx) => run(load(syscall, path), ctx), refine(path, options), toHostError)
    },
    call(syscall, path, run, options = NO_OPTIONS) {
      return runner.run(
        syscall,
        path,
        options.key ?? keys.keyOf(path),
        async (ctx) => {
          const { ret, errno } = await run(load(syscall, path), ctx)
          if (ret < 0) throw errnoError(errno, syscall, path, typeof options.detail === 'function' ? options.detail() : options.detail)
          return ret
        },
        refine(path, options),
        toHostError,
      )
    },
    fs(syscall, path, run, options = NO_OPTIONS) {
      return runner.run(syscall, path, options.key ?? keys.keyOf(path), run, refine(path, options), toHostError)
    },
  }
}
