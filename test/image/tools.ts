/**
 * What the image test needs from the machine, and the commands it runs: buildah, podman (with crun),
 * debootstrap, as root, in the private mount namespace the integration project's preload made.
 * podman and buildah run here as on a node with hybrid cgroups: `/sys/fs/cgroup/unified` is unmounted
 * in this namespace only (crun refuses hybrid mode), containers run with `--cgroups=disabled`, and a
 * containers.conf sets `default_ulimits = []` (the default asks for a higher RLIMIT_NPROC and NOFILE
 * than a test machine may allow).
 */
import { execFile, execFileSync, spawnSync } from 'node:child_process'
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

const TOOLS = ['buildah', 'podman', 'crun', 'debootstrap'] as const
// Beside them: the node's network namespace needs `ip` (iproute2) to bring its loopback up.
const HELPERS = { ip: 'iproute2', unshare: 'util-linux', losetup: 'util-linux', mount: 'mount' } as const

/** Why the image test cannot run on this machine, or undefined. */
export function whyNot(): string | undefined {
  if (process.platform !== 'linux' || process.getuid?.() !== 0) return `needs root on Linux (uid ${process.getuid?.() ?? 'unknown'})`
  if (process.env.KUBEVOL_TEST_MOUNT_NAMESPACE !== 'private') return `the test process is not in a private mount namespace (${process.env.KUBEVOL_TEST_MOUNT_NAMESPACE_SKIP ?? 'the preload did not run'})`
  const missing = TOOLS.filter((tool) => spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0)
  if (missing.length > 0) return `${missing.join(', ')} not installed (Debian: apt-get install ${missing.join(' ')})`
  const helpers = Object.entries(HELPERS).filter(([tool]) => spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0)
  if (helpers.length > 0) return `${helpers.map(([tool]) => tool).join(', ')} not installed (Debian: apt-get install ${[...new Set(helpers.map(([, pkg]) => pkg))].join(' ')})`
  return undefined
}

/** A command's result; `run` throws on a non-zero exit, `attempt` returns it. */
export interface Ran {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

export interface RunOptions {
  readonly cwd?: string
  readonly env?: NodeJS.ProcessEnv
  readonly timeoutMs?: number
}

export function attempt(command: string, args: readonly string[], options: RunOptions = {}): Promise<Ran> {
  return new Promise((resolve) => {
    execFile(command, args, { cwd: options.cwd, env: options.env ?? process.env, timeout: options.timeoutMs ?? 120_000, maxBuffer: 256 * 1024 * 1024, encoding: 'utf8' }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0
      resolve({ code, stdout, stderr: error && code === -1 ? `${stderr}${error.message}` : stderr })
    })
  })
}

export async function run(command: string, args: readonly string[], options: RunOptions = {}): Promise<string> {
  const ran = await attempt(command, args, options)
  if (ran.code !== 0) throw new Error(`${command} ${args.join(' ')} exited ${ran.code}:\n${ran.stdout.slice(-3000)}\n${ran.stderr.slice(-3000)}`)
  return ran.stdout
}

/**
 * Prepares this namespace and returns the environment for buildah and podman: the unified cgroup
 * hierarchy unmounted (hybrid machines) and a containers.conf in `dir` with no default ulimits.
 */
export function containerEnvironment(dir: string): NodeJS.ProcessEnv {
  const unified = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .some((line) => line.split(' ')[4] === '/sys/fs/cgroup/unified')
  if (unified) execFileSync('umount', ['/sys/fs/cgroup/unified'])
  const conf = join(dir, 'containers.conf')
  writeFileSync(conf, '[containers]\ndefault_ulimits = []\n')
  return { ...process.env, CONTAINERS_CONF: conf }
}

/** Mount points at or under `dir` in this namespace, deepest first. */
export function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter((target) => target === dir || target.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length)
}

/**
 * Removes a work folder, never through a mount: whatever is still mounted under it (a failed
 * debootstrap's /proc, a volume a failed test left) is unmounted first, and if anything stays
 * mounted the folder is kept and that is an error.
 */
export function removeWorkDir(dir: string): void {
  for (const target of mountsUnder(dir)) spawnSync('umount', ['-l', target])
  const left = mountsUnder(dir)
  if (left.length > 0) throw new Error(`${dir} kept: still mounted ${left.join(', ')}`)
  rmSync(dir, { recursive: true, force: true })
}
