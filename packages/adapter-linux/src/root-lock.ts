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

/** The lock file under `rootDir`. */
function rootLockPath(rootDir: string): string {
  return joinPath(rootDir, 'kubevol.lock')
}

/**
 * Takes the lock on `rootDir` (which must exist). Synchronous calls: flock with LOCK_NB and a
 * small write never wait on anything but the root's own filesystem.
 */
export function lockRoot(libc: Libc, rootDir: string, pid: number): RootLock {
  const path = rootLockPath(rootDir)
  let fd: number
  try {
    // O_NOFOLLOW: a symlink planted as the lock file does not make kubevol truncate its target.
    // (node:fs opens with O_CLOEXEC: a tool the agent spawns does not inherit the lock.)
    fd = openSync(path, constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW, 0o600)
  } catch (err) {
    throw toHostError(err, 'open', path)
  }
  try {
    if (!fstatSync(fd).isFile()) throw new HostError('EINVAL', 'open', path, 'not a regular file')
    const { ret, errno } = libc.sync.flock(fd, LOCK_EX | LOCK_NB)
    if (ret < 0) {
      if (errno !== EWOULDBLOCK) throw errnoError(errno, 'flock', path)
      closeSync(fd)
      const holder = Number.parseInt(readFileSync(path, 'utf8').trim(), 10)
      return { locked: false, ...(Number.isSafeInteger(holder) && holder > 0 ? { holderPid: holder } : {}) }
    }
    ftruncateSync(fd, 0)
    writeSync(fd, `${pid}\n`, 0)
  } catch (err) {
    closeSync(fd)
    throw err
  }
  let held = true
  return {
    locked: true,
    async release() {
      if (!held) return
      held = false
      // The pid goes first, then the lock: a reader never sees a free lock naming this process.
      ftruncateSync(fd, 0)
      libc.sync.flock(fd, LOCK_UN)
      closeSync(fd)
    },
  }
}
