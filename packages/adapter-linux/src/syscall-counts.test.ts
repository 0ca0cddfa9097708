// The system calls of the Linux host's hottest paths, counted on the real kernel with strace(1):
// what the benchmarks and the documentation promise a call makes, held here.
import { expect, it } from 'vitest'
import { describeAsRoot } from '../test/as-root.js'
import { useLinuxHost } from '../test/harness.js'
import { straceMissing, traceSelf } from '../test/strace.js'
import type { LinuxHost } from './linux-host.js'

const missing = straceMissing()

/**
 * An emptyDir on disk (its ready marker, the marker's directory, the volume's directory) and one in
 * memory (the same, its volume a tmpfs) below `at`; the I/O worker started and koffi loaded, so a
 * trace begun after holds only the calls made after it. The paths as a tear-down removes them.
 */
async function emptyDirs(host: LinuxHost, at: (...parts: string[]) => string) {
  for (const kind of ['disk', 'mem']) {
    await host.mkdir(at(kind, 'meta'), { recursive: true })
    await host.mkdir(at(kind, 'vol'))
    await host.writeFile(at(kind, 'meta', 'ready'), '')
  }
  await host.mount({ source: 'tmpfs', target: at('mem', 'vol'), fstype: 'tmpfs' })
  await host.lstat(at('disk'))
  const paths = (kind: string) => [at(kind, 'meta', 'ready'), at(kind, 'meta'), at(kind, 'vol')]
  return { disk: paths('disk'), mem: paths('mem') }
}

describeAsRoot('linux host: system calls counted with strace', () => {
  const h = useLinuxHost()

  // Without strace, CI fails here rather than skipping (CI installs it: see .ci/run).
  if (missing && process.env.CI === 'true') {
    it(`cannot run: ${missing}`, () => {
      throw new Error(missing)
    })
    return
  }

  it.skipIf(missing !== undefined)('removeUnmounted makes one statx a path, the last one unmounted or not (an emptyDir’s tear-down on disk and in memory)', async () => {
    const { host, p } = h()
    const { disk, mem } = await emptyDirs(host, p)
    const trace = await traceSelf('statx,unlinkat,umount2')
    await host.removeUnmounted?.(disk, { unmountLast: true })
    await host.removeUnmounted?.(mem, { unmountLast: true })
    const lines = await trace.stop()
    // unlink and rmdir are unlinkat(2), rmdir with AT_REMOVEDIR.
    const calls = (name: string, path: string) =>
      lines.filter((line) => {
        if (!line.includes(`"${path}"`)) return false
        if (name === 'unlink') return line.includes('unlinkat(') && !line.includes('AT_REMOVEDIR')
        if (name === 'rmdir') return line.includes('unlinkat(') && line.includes('AT_REMOVEDIR')
        return line.includes(`${name}(`)
      }).length
    for (const path of [...disk, ...mem]) expect(calls('statx', path), path).toBe(1)
    expect([disk[0], mem[0]].map((path) => calls('unlink', path))).toEqual([1, 1])
    expect([disk[1], disk[2], mem[1], mem[2]].map((path) => calls('rmdir', path))).toEqual([1, 1, 1, 1])
    expect(calls('umount2', mem[2] as string)).toBe(1)
    for (const path of [...disk, ...mem]) expect(await host.lstat(path)).toBeNull()
  })
  it.skipIf(missing !== undefined)('beneath a locked root: each directory opened once (openat2, no symlink at any level), one statx a path, acts on names in those descriptors', async () => {
    const { host, p } = h()
    const lock = await host.lockRoot(p('root'))
    if (!lock.locked) throw new Error('root not locked')
    const { disk, mem } = await emptyDirs(host, (...parts) => p('root', ...parts))
    const trace = await traceSelf('openat2,statx,unlinkat,umount2')
    await host.removeUnmounted?.(disk, { unmountLast: true })
    await host.removeUnmounted?.(mem, { unmountLast: true })
    const lines = await trace.stop()
    const count = (name: string) => lines.filter((line) => line.includes(`${name}(`)).length
    // Each path's directory opened from the root's descriptor, once a batch (`disk/meta` for the
    // marker, `disk` for the marker's directory and the volume's: two per volume), then one statx
    // of each name in it.
    expect(lines.filter((line) => line.includes('openat2(') && line.includes('RESOLVE_NO_SYMLINKS')).length).toBe(4)
    expect(count('statx')).toBe(6)
    // The removes are unlinkat(2) on the directory's descriptor (rmdir: AT_REMOVEDIR), no walk through /proc.
    const removes = lines.filter((line) => line.includes('unlinkat('))
    expect([removes.filter((line) => !line.includes('AT_REMOVEDIR')).length, removes.filter((line) => line.includes('AT_REMOVEDIR')).length, count('umount2')]).toEqual([2, 4, 1])
    for (const path of [...disk, ...mem]) expect(await host.lstat(path)).toBeNull()
    await lock.release()
  })
})
