/**
 * Ending a process that has a thread blocked in the kernel. node's own exit (process.exit, or the
 * event loop running dry) joins the I/O workers and libuv's threads, and a thread blocked on a hung
 * FUSE or NFS call never comes back: the process stays, measured here, forever. _exit(2) ends every
 * thread of the process at once and leaves the blocked calls to the kernel.
 */
import { createRequire } from 'node:module'

/** Ends the process now with `code` through _exit(2): no exit handlers run, no thread is joined. */
export function exitNow(code: number): never {
  try {
    const koffi = createRequire(import.meta.url)('koffi') as typeof import('koffi')
    koffi.load('libc.so.6').func('void _exit(int)')(code)
  } catch {
    // Without the FFI library, the only way out that joins no thread.
    process.kill(process.pid, 'SIGKILL')
  }
  throw new Error('unreachable: _exit(2) returned')
}
