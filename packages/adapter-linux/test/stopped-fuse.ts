/**
 * A real FUSE filesystem whose daemon can be stopped: `bindfs -f SRC MNT` as a child process. With
 * the daemon stopped (SIGSTOP) every call that reaches it (a lookup of a name not seen before, a
 * read) blocks in the kernel, as on a dead network filesystem. Run it in the test's private mount
 * namespace (the child inherits it). `cleanup` unmounts lazily and kills the daemon: the calls
 * blocked on it then return (ENOTCONN), so the process can exit.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { parseMountInfo } from '../src/mountinfo.js'

export interface StoppedFuse {
  readonly mountPoint: string
  readonly pid: number
  /** SIGSTOP: every new call on the filesystem hangs. */
  stop(): void
  /** Lazy unmount, then SIGCONT and SIGKILL of the daemon. */
  cleanup(): void
}

const mounted = (target: string) => parseMountInfo(readFileSync('/proc/self/mountinfo', 'utf8')).some((e) => e.target === target)

/** Mounts `source` on `mountPoint` (both existing directories) through bindfs and waits for the mount. */
export async function startBindfs(source: string, mountPoint: string): Promise<StoppedFuse> {
  // No attribute or entry cache: every call is a request to the daemon.
  const child: ChildProcess = spawn('bindfs', ['-f', '-o', 'attr_timeout=0,entry_timeout=0,negative_timeout=0', source, mountPoint], { stdio: 'ignore' })
  const pid = child.pid
  if (pid === undefined) throw new Error('bindfs did not start')
  let exited = false
  child.on('exit', () => (exited = true))
  const deadline = Date.now() + 10_000
  while (!mounted(mountPoint)) {
    if (exited || Date.now() > deadline) throw new Error(`bindfs ${source} ${mountPoint} did not mount`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  let done = false
  return {
    mountPoint,
    pid,
    stop: () => process.kill(pid, 'SIGSTOP'),
    cleanup: () => {
      if (done) return
      done = true
      try {
        execFileSync('umount', ['-l', mountPoint], { stdio: 'ignore' })
      } catch {}
      for (const signal of ['SIGCONT', 'SIGKILL'] as const) {
        try {
          process.kill(pid, signal)
        } catch {}
      }
    },
  }
}
