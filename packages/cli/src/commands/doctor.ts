/**
 * `kubevol doctor`: can this node run kubevol for real? Each check says what it found and, when it
 * fails, how to fix it. Read only.
 */
import { constants, accessSync, statSync } from 'node:fs'
import { release } from 'node:os'
import { delimiter, join } from 'node:path'
import { EXIT } from '../errors.js'
import { type LinuxAdapter, loadLinuxAdapter } from '../host-loader.js'
import { type Io, type OutputFormat, renderData, renderTable, tableOptions } from '../output.js'
import type { ParsedCommand } from '../parse.js'

/** One check's outcome. `warn` does not fail the command. */
export interface DoctorCheck {
  readonly name: string
  readonly status: 'ok' | 'warn' | 'fail'
  readonly message: string
  readonly fix?: string
}

/** What the checks read; tests replace it. */
export interface DoctorEnvironment {
  readonly uid: number
  readonly kernel: string
  readonly path: string
  readonly exists: (path: string) => 'file' | 'dir' | 'other' | undefined
  readonly loadAdapter: () => Promise<LinuxAdapter>
}

function defaultEnvironment(io: Io): DoctorEnvironment {
  return {
    uid: process.getuid?.() ?? -1,
    kernel: release(),
    path: io.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
    exists: (path) => {
      try {
        const s = statSync(path)
        return s.isDirectory() ? 'dir' : s.isFile() ? 'file' : 'other'
      } catch {
        return undefined
      }
    },
    loadAdapter: loadLinuxAdapter,
  }
}

function which(env: DoctorEnvironment, tool: string): string | undefined {
  for (const dir of [...env.path.split(delimiter), '/sbin', '/usr/sbin']) {
    const full = join(dir, tool)
    if (env.exists(full) !== 'file') continue
    try {
      accessSync(full, constants.X_OK)
      return full
    } catch {}
  }
  return undefined
}

/**
 * openat2 and the new mount API, each probed by a real call (a distribution may backport either,
 * a seccomp profile may hide it). Without them the agent refuses `--host linux` at start.
 */
function kernelFloorChecks(adapter: LinuxAdapter): DoctorCheck[] {
  let floor: ReturnType<LinuxAdapter['probeKernelFloor']>
  try {
    floor = adapter.probeKernelFloor()
  } catch (err) {
    const message = `cannot probe the kernel: ${(err as Error).message}`
    return ['openat2', 'mount-api'].map((name) => ({ name, status: 'fail', message, fix: 'run on Linux with koffi installed' }))
  }
  const upgrade = 'upgrade the kernel to 5.8 or later (and allow the call in a seccomp profile); kubevol refuses to start without it'
  return [
    floor.openat2
      ? { name: 'openat2', status: 'ok', message: 'openat2(2) is available: paths under the root are resolved beneath it by the kernel' }
      : { name: 'openat2', status: 'fail', message: `openat2(2) is missing on Linux ${floor.release} (ENOSYS; it came with 5.6)`, fix: upgrade },
    floor.newMountApi
      ? { name: 'mount-api', status: 'ok', message: 'the new mount API (open_tree, move_mount, fsopen) is available: mounts land on descriptors' }
      : { name: 'mount-api', status: 'fail', message: `the new mount API (open_tree, move_mount, fsopen) is missing on Linux ${floor.release} (ENOSYS; it came with 5.2)`, fix: upgrade },
  ]
}

/** Runs every check. */
export async function runDoctorChecks(options: { root: string; csiDir: string }, env: DoctorEnvironment): Promise<DoctorCheck[]> {
  const checks: DoctorCheck[] = []
  checks.push(
    env.uid === 0
      ? { name: 'root', status: 'ok', message: 'running as root' }
      : { name: 'root', status: 'fail', message: `running as uid ${env.uid}; mount(2) and loop devices need root`, fix: 'run kubevol as root (sudo), or as the privileged DaemonSet in deploy/' },
  )
  const [major = 0, minor = 0] = env.kernel.split(/[.-]/).map(Number)
  const kernelOk = major > 5 || (major === 5 && minor >= 8)
  checks.push(
    kernelOk
      ? { name: 'kernel', status: 'ok', message: `Linux ${env.kernel}` }
      : { name: 'kernel', status: 'fail', message: `Linux ${env.kernel}; kubevol needs 5.8 or later (LOOP_CONFIGURE)`, fix: 'upgrade the kernel to 5.8 or later' },
  )
  let adapter: LinuxAdapter | undefined
  try {
    adapter = await env.loadAdapter()
    adapter.createLinuxHost()
    checks.push({ name: 'ffi', status: 'ok', message: '@kubevol/adapter-linux and its FFI library (koffi) load' })
  } catch (err) {
    checks.push({ name: 'ffi', status: 'fail', message: (err as Error).message, fix: 'npm install @kubevol/adapter-linux (koffi ships prebuilt binaries for linux x64 and arm64)' })
  }
  if (adapter) {
    checks.push(...kernelFloorChecks(adapter))
    try {
      const ns = await adapter.checkMountNamespace()
      // Not a failure: kubevol enters no other namespace; it mounts in its own, and its volumes reach
      // the host through the root's shared mount (a DaemonSet's Bidirectional hostPath), which
      // root-propagation checks. hostPID would not help: PID 1 would then be the host's init, in
      // another mount namespace than any container's, and this check would warn all the same.
      checks.push({ name: 'mount-namespace', status: ns.ok ? 'ok' : 'warn', message: ns.message, ...(ns.ok ? {} : { fix: 'fine in a container whose root directory is a Bidirectional hostPath mount (deploy/daemonset.yaml; hostPID is not needed), as root-propagation checks; on a plain host run kubevol in the host mount namespace (nsenter -t 1 -m)' }) })
    } catch (err) {
      checks.push({ name: 'mount-namespace', status: 'fail', message: (err as Error).message, fix: 'run as root on Linux' })
    }
    try {
      const prop = await adapter.checkRootPropagation(adapter.createLinuxHost(), options.root)
      checks.push({ name: 'root-propagation', status: prop.ok ? 'ok' : 'fail', message: prop.message, ...(prop.ok ? {} : { fix: `mount --make-rshared / (or bind ${options.root} onto itself and make it rshared)` }) })
    } catch (err) {
      checks.push({ name: 'root-propagation', status: 'fail', message: (err as Error).message, fix: `create ${options.root} and run as root` })
    }
  }
  checks.push(
    env.exists('/dev/loop-control')
      ? { name: 'loop-devices', status: 'ok', message: '/dev/loop-control is present' }
      : { name: 'loop-devices', status: 'fail', message: '/dev/loop-control is missing: fileDisk volumes cannot attach', fix: 'modprobe loop' },
  )
  const tools = ['mkfs.ext4', 'blkid', 'fsck', 'e2fsck', 'resize2fs']
  const missing = tools.filter((t) => which(env, t) === undefined)
  checks.push(
    missing.length === 0
      ? { name: 'filesystem-tools', status: 'ok', message: `${tools.join(', ')} found` }
      : { name: 'filesystem-tools', status: 'fail', message: `missing: ${missing.join(', ')}`, fix: 'apt-get install -y e2fsprogs util-linux (dnf install e2fsprogs util-linux)' },
  )
  if (!which(env, 'mkfs.xfs')) checks.push({ name: 'xfs-tools', status: 'warn', message: 'mkfs.xfs not found: xfs volumes cannot be formatted', fix: 'apt-get install -y xfsprogs' })
  else checks.push({ name: 'xfs-tools', status: 'ok', message: 'mkfs.xfs found' })
  const csi = env.exists(options.csiDir)
  checks.push(
    csi === 'dir'
      ? { name: 'csi-sockets', status: 'ok', message: `${options.csiDir} exists` }
      : { name: 'csi-sockets', status: 'warn', message: `${options.csiDir} ${csi ? 'is not a directory' : 'does not exist'}: no CSI driver can register`, fix: `mkdir -p ${options.csiDir} (CSI drivers put their sockets there)` },
  )
  return checks
}

/** `kubevol doctor`. */
export async function doctorCommand(p: ParsedCommand, io: Io, deps: { doctorEnvironment?: DoctorEnvironment }): Promise<number> {
  const checks = await runDoctorChecks({ root: String(p.flags['root-dir']), csiDir: String(p.flags['csi-dir'] ?? `${String(p.flags['root-dir']).replace(/\/+$/, '')}/plugins`) }, deps.doctorEnvironment ?? defaultEnvironment(io))
  const format = p.flags.output as OutputFormat
  if (format === 'json' || format === 'yaml') io.stdout.write(renderData(format, checks))
  else {
    const mark = (s: DoctorCheck['status']): string => {
      const text = s === 'ok' ? 'ok' : s === 'warn' ? 'WARN' : 'FAIL'
      if (!io.isTTY) return text
      return s === 'ok' ? `\x1b[32m${text}\x1b[0m` : s === 'warn' ? `\x1b[33m${text}\x1b[0m` : `\x1b[31m${text}\x1b[0m`
    }
    io.stdout.write(renderTable(['check', 'status', 'found', 'fix'], checks.map((c) => [c.name, mark(c.status), c.message, c.fix && c.status !== 'ok' ? c.fix : '']), tableOptions(p)))
  }
  const failed = checks.filter((c) => c.status === 'fail')
  if (failed.length > 0) {
    io.stderr.write(`error: ${failed.length} checks failed: ${failed.map((c) => c.name).join(', ')}\n`)
    return EXIT.failed
  }
  return EXIT.ok
}
