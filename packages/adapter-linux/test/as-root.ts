/**
 * Tests that need root: skipped with a printed reason when not root, and failing instead of
 * skipping when CI=true (CI runs as root; a skip there would hide a broken setup).
 */
import { describe, it } from 'vitest'

const isRoot = typeof process.getuid === 'function' && process.getuid() === 0 && process.platform === 'linux'
const inPrivateNamespace = process.env.KUBEVOL_TEST_MOUNT_NAMESPACE === 'private'

/** `describe` for tests that mount, attach loop devices or format: root in a private mount namespace. */
export function describeAsRoot(name: string, body: () => void): void {
  if (isRoot && inPrivateNamespace) {
    describe(name, body)
    return
  }
  const reason = !isRoot
    ? `needs root on Linux (uid ${process.getuid?.() ?? 'unknown'})`
    : 'the test process is not in a private mount namespace (test/mount-namespace.cjs did not run)'
  if (process.env.CI === 'true') {
    describe(name, () => {
      it(`cannot run: ${reason}`, () => {
        throw new Error(`${name}: ${reason}; CI must run these tests as root`)
      })
    })
    return
  }
  console.warn(`[adapter-linux] skipping "${name}": ${reason}`)
  describe.skip(name, body)
}
