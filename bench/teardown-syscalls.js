// The system calls of one tear-down through the whole manager on the Linux host (root only), in a
// private mount namespace and on a fresh ext4: PODS pods × 10 emptyDir on disk are converged, then
// strace(1) is attached to this process (every thread) and every pod deleted; the counts of the
// tear-down alone are printed per call and per volume. KUBEVOL_BENCH_TEARDOWN_PODS sets the size
// (default 1,000), KUBEVOL_BENCH_TEARDOWN_MEMORY=1 makes the volumes tmpfs emptyDirs.
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { scratchFilesystem } from './scratch-fs.js'

const preload = fileURLToPath(new URL('../packages/adapter-linux/test/mount-namespace.cjs', import.meta.url))
if (process.getuid?.() !== 0 || spawnSync('strace', ['-V']).status !== 0) {
  console.log('teardown-syscalls skipped: it needs root and strace(1)')
  process.exit(0)
}
if (process.env.KUBEVOL_TEST_MOUNT_NAMESPACE !== 'private') {
  const child = spawnSync(process.execPath, ['--require', preload, fileURLToPath(import.meta.url)], { stdio: 'inherit' })
  process.exit(child.status ?? 1)
}

const { createLinuxHost } = await import('@kubevol/adapter-linux')
const { createVolumeManager } = await import('@kubevol/core')
const { createBuiltinPlugins } = await import('@kubevol/core/plugins')
const { buildPod, createMemoryObjectReader, createMemoryPodSource } = await import('@kubevol/core/testing')

const pods = Number(process.env.KUBEVOL_BENCH_TEARDOWN_PODS ?? 1000)
const medium = process.env.KUBEVOL_BENCH_TEARDOWN_MEMORY === '1' ? 'Memory' : ''
const scratch = scratchFilesystem('kubevol-bench-teardown-', '4G')
const host = createLinuxHost()
const source = createMemoryPodSource()
const vm = createVolumeManager({ host, plugins: createBuiltinPlugins(), podSource: source, objects: createMemoryObjectReader(), nodeName: 'bench', rootDir: `${scratch.dir}/root`, controllerAttachDetach: false })
const stop = new AbortController()
const running = vm.run(stop.signal)
const all = Array.from({ length: pods }, (_, p) => buildPod({ uid: `p${p}`, volumes: Array.from({ length: 10 }, (_, v) => ({ name: `v${v}`, emptyDir: medium ? { medium } : {} })) }))
for (const pod of all) source.setPod(pod)
await Promise.all(all.map((pod) => vm.waitForAttachAndMount(pod, { timeoutMs: 600_000 })))

const dir = mkdtempSync(join(tmpdir(), 'kubevol-strace-'))
const out = join(dir, 'counts')
const strace = spawn('strace', ['-f', '-c', '-o', out, '-p', String(process.pid)], { stdio: ['ignore', 'ignore', 'pipe'] })
const exited = new Promise((resolve) => strace.on('exit', resolve))
await new Promise((resolve) => {
  let said = ''
  strace.stderr.on('data', (chunk) => {
    said += chunk
    if (/Process \d+ attached/.test(said)) resolve()
  })
})
const t0 = performance.now()
for (const pod of all) source.deletePod(pod.metadata.uid)
await vm.waitForAllPodsUnmount(all, { timeoutMs: 600_000 })
const ms = performance.now() - t0
strace.kill('SIGINT')
await exited
const counts = new Map()
for (const line of readFileSync(out, 'utf8').split('\n')) {
  const f = line.trim().split(/\s+/)
  // % time, seconds, usecs/call, calls, [errors,] syscall
  if (f.length >= 5 && /^\d+$/.test(f[3] ?? '')) counts.set(f[f.length - 1], { calls: Number(f[3]), errors: f.length === 6 ? Number(f[4]) : 0 })
}
rmSync(dir, { recursive: true, force: true })
const volumes = pods * 10
console.log(`tear-down of ${volumes} emptyDir${medium ? ` (${medium})` : ' on disk'}: ${ms.toFixed(0)} ms under strace`)
console.log('| call | calls | failed | per volume |')
console.log('| --- | ---: | ---: | ---: |')
for (const name of ['statx', 'openat2', 'openat', 'newfstatat', 'unlink', 'rmdir', 'umount2', 'close', 'readlink', 'mkdir']) {
  const c = counts.get(name)
  if (c) console.log(`| ${name} | ${c.calls} | ${c.errors} | ${(c.calls / volumes).toFixed(2)} |`)
}
stop.abort()
await running
host.close()
scratch.remove()
