/**
 * kubevol's lock on its root directory: flock(2) LOCK_EX|LOCK_NB on `<root>/kubevol.lock`, the
 * holder's pid written into the file for the message of whoever is refused. flock rather than a
 * pid file: the kernel drops the lock when the last descriptor closes, so a holder killed by
 * SIGKILL (or a crashed node) leaves nothing that blocks the next start, and no pid is ever
 * guessed to be stale.
 */
import { closeSync, constants, fstatSync, ftruncateSync, openSync, readFileSync, writeSync } from 'node:fs'
import type { RootLock } from '@kubevol/core'
import { HostError } from '@kubevol/core'
import { joinPath } from '@kubevol/core/host'
import { errnoError, toHostError } from './errno.js'
import type { Libc } from './libc.js'

const LOCK_EX = 2
const LOCK_NB = 4
const LOCK_UN = 8
const EWOULDBLOCK = 11
const O_PATH = 0o10000000

/** A held lock, with the root's directory descriptor it was taken through. */
export interface HeldRoot {
  readonly lock: RootLock & { readonly locked: true }
  /** O_PATH descriptor of the root directory; closed by the lock's release. */
  readonly fd: number
}

/**
 * Takes the lock on `rootDir` (which must exist). The root is opened once, as a directory
 * descriptor (O_PATH; the root itself may be reached through symlinks, the operator's choice), and
 * the lock file is opened in it with O_NOFOLLOW: a symlink planted as the lock file does not make
 * kubevol truncate its target. Synchronous calls: flock with LOCK_NB and a small write never wait on
 * anything but the root's own filesystem. Resolves with the lock and the descriptor, or the
 * refusal (the descriptor closed then).
 */
export function lockRoot(libc: Libc, rootDir: string, pid: number): HeldRoot | (RootLock & { readonly locked: false }) {
  const path = joinPath(rootDir, 'kubevol.lock')
  let rootFd: number
  try {
    rootFd = openSync(rootDir, O_PATH | constants.O_DIRECTORY)
  } catch (err) {
    throw toHostError(err, 'open', rootDir)
  }
  let fd: number
  try {
    // (node:fs opens with O_CLOEXEC: a tool the agent spawns does not inherit the lock.)
    fd = openSync(`/proc/self/fd/${rootFd}/kubevol.lock`, constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW, 0o600)
  } catch (err) {
    closeSync(rootFd)
    throw toHostError(err, 'open', path)
  }
  try {
    if (!fstatSync(fd).isFile()) throw new HostError('EINVAL', 'open', path, 'not a regular file')
    const { ret, errno } = libc.sync.flock(fd, LOCK_EX | LOCK_NB)
    if (ret < 0) {
      if (errno !== EWOULDBLOCK) throw errnoError(errno, 'flock', path)
      const holder = Number.parseInt(readFileSync(fd, 'utf8').trim(), 10)
      closeSync(fd)
      closeSync(rootFd)
      return { locked: false, ...(Number.isSafeInteger(holder) && holder > 0 ? { holderPid: holder } : {}) }
    }
    ftruncateSync(fd, 0)
    writeSync(fd, `${pid}\n`, 0)
  } catch (err) {
    closeSync(fd)
    closeSync(rootFd)
    throw err
  }
  let held = true
  return {
    fd: rootFd,
    lock: {
      locked: true,
      async release() {
        if (!held) return
        held = false
        // The pid goes first, then the lock: a reader never sees a free lock naming this process.
        ftruncateSync(fd, 0)
        libc.sync.flock(fd, LOCK_UN)
        closeSync(fd)
        closeSync(rootFd)
      },
    },
  }
}
