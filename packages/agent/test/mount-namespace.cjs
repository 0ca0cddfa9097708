// Preloaded (node --require) into every vitest fork of this package and of the integration project (test/),
// before any other code runs: when root on Linux and @kubevol/adapter-linux (and so koffi) is installed, the process moves into a
// new mount namespace whose mounts are all private, so the Linux-host test cannot touch the machine's
// mounts. It must run before libuv starts its threadpool: unshare(CLONE_NEWNS) moves only the calling
// thread, and threads created later are born in the new namespace.
// Anywhere else it does nothing, and the Linux-host test says why it skips.
'use strict'
const CLONE_NEWNS = 0x00020000
const MS_REC = 16384
const MS_PRIVATE = 1 << 18

if (typeof process.getuid === 'function' && process.getuid() === 0 && process.platform === 'linux') {
  let koffi
  try {
    // koffi is adapter-linux's dependency: load it from there, so the agent does not depend on it.
    const { createRequire } = require('node:module')
    const adapter = require.resolve('@kubevol/adapter-linux/package.json')
    koffi = createRequire(adapter)('koffi')
  } catch {
    process.env.KUBEVOL_TEST_MOUNT_NAMESPACE_SKIP = 'adapter-linux or koffi cannot be loaded'
  }
  if (koffi) {
    const lib = koffi.load('libc.so.6')
    const unshare = lib.func('int unshare(int flags)')
    const mount = lib.func('int mount(const char *source, const char *target, const char *fstype, unsigned long flags, const char *data)')
    if (unshare(CLONE_NEWNS) !== 0) throw new Error(`unshare(CLONE_NEWNS) failed: errno ${koffi.errno()}`)
    if (mount('none', '/', null, MS_REC | MS_PRIVATE, null) !== 0) throw new Error(`mount --make-rprivate / failed: errno ${koffi.errno()}`)
    process.env.KUBEVOL_TEST_MOUNT_NAMESPACE = 'private'
  }
}
