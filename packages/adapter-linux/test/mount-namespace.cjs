// Preloaded (node --require) into every vitest fork of this package, before any other code runs:
// moves the process into a new mount namespace whose mounts are all private, so no mount a test
// makes can reach the machine, and none of the machine's can change under a test.
//
// It must run first: unshare(CLONE_NEWNS) moves only the calling thread. Run here, on the main
// thread before libuv has started its threadpool, every thread created later (the pool threads that
// carry koffi's async calls and node:fs) is born in the new namespace. Calling it from a test file
// would leave the pool threads, and so every mount, in the machine's namespace.
'use strict'
const CLONE_NEWNS = 0x00020000
const MS_REC = 16384
const MS_PRIVATE = 1 << 18

// Not in worker threads, which inherit the process's --require: unshare there would give the
// worker a mount namespace of its own, away from the process's.
const { isMainThread } = require('node:worker_threads')

if (isMainThread && typeof process.getuid === 'function' && process.getuid() === 0 && process.platform === 'linux') {
  const koffi = require('koffi')
  const lib = koffi.load('libc.so.6')
  const unshare = lib.func('int unshare(int flags)')
  const mount = lib.func('int mount(const char *source, const char *target, const char *fstype, unsigned long flags, const char *data)')
  if (unshare(CLONE_NEWNS) !== 0) throw new Error(`unshare(CLONE_NEWNS) failed: errno ${koffi.errno()}`)
  if (mount('none', '/', null, MS_REC | MS_PRIVATE, null) !== 0) throw new Error(`mount --make-rprivate / failed: errno ${koffi.errno()}`)
  process.env.KUBEVOL_TEST_MOUNT_NAMESPACE = 'private'
}
