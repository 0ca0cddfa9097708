/**
 * Fixtures an attacker on the node would have: a FUSE file system (bindfs) whose daemon can be
 * stopped (every call on it hangs) or killed (every call fails with ENOTCONN), a loop device with
 * ext4 mounted somewhere, and pod manifests.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { mountTable } from './audit.js'
import type { HostileNode } from './node.js'

const run = (cmd: string, args: string[]): string => execFileSync(cmd, args, { encoding: 'utf8', timeout: 30_000 })
const quiet = (cmd: string, args: string[]): void => {
  try {
    execFileSync(cmd, args, { stdio: 'ignore', timeout: 10_000 })
  } catch {}
}

/** A bindfs mount of `source` at `mountPoint`, and its daemon. */
export interface Fuse {
  readonly source: string
  readonly mountPoint: string
  readonly pid: number
  /** SIGSTOP: every call on the mount hangs until {@link resume}. */
  freeze(): void
  resume(): void
  /** SIGKILL: the mount stays, every call on it fails with ENOTCONN. */
  kill(): void
}

/** The pid of the bindfs daemon serving `mountPoint`, from /proc (bindfs forks into the background). */
function daemonOf(mountPoint: string): number {
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')
      if (cmd[0]?.endsWith('bindfs') && cmd.includes(mountPoint)) return Number(pid)
    } catch {}
  }
  throw new Error(`no bindfs daemon found for ${mountPoint}`)
}

/**
 * Mounts `source` (made, with `files`) at `mountPoint` with bindfs. The mount point is kept out of
 * the audit's reads (a frozen daemon would hang them); the teardown resumes, unmounts and kills.
 */
export function startFuse(node: HostileNode, name: string, files: Record<string, string> = {}, at?: string): Fuse {
  const source = join(node.outside, `${name}-source`)
  const mountPoint = at ?? join(node.outside, `${name}-mnt`)
  mkdirSync(mountPoint, { recursive: true })
  for (const [rel, content] of Object.entries(files)) {
    mkdirSync(join(source, rel, '..'), { recursive: true })
    writeFileSync(join(source, rel), content)
  }
  mkdirSync(source, { recursive: true })
  node.exclude(mountPoint)
  node.outsideChanged(source)
  run('bindfs', ['--no-allow-other', source, mountPoint])
  const pid = daemonOf(mountPoint)
  let killed = false
  const fuse: Fuse = {
    source,
    mountPoint,
    pid,
    freeze: () => process.kill(pid, 'SIGSTOP'),
    resume: () => {
      if (!killed) process.kill(pid, 'SIGCONT')
    },
    kill: () => {
      killed = true
      process.kill(pid, 'SIGKILL')
    },
  }
  node.beforeTeardown(() => fuse.resume())
  node.onCleanup(() => {
    // Lazily, without resolving the path (a dead daemon answers ENOTCONN to any lookup). A mount
    // made inside R is the agent's to clean: left for the audit to find.
    if (at === undefined && mountTable().some((m) => m.target === mountPoint)) quiet('umount', ['-l', '-c', mountPoint])
    if (!killed) {
      try {
        process.kill(pid, 'SIGKILL')
      } catch {}
    }
  })
  return fuse
}

/** A 64 MiB image with ext4 attached to a loop device and mounted at `mountPoint` (outside R), with a file written. */
export function startInUseDevice(node: HostileNode, name: string): { device: string; image: string; mountPoint: string } {
  const image = join(node.outside, `${name}.img`)
  const mountPoint = join(node.outside, `${name}-mnt`)
  mkdirSync(mountPoint, { recursive: true })
  run('truncate', ['-s', '64M', image])
  run('mkfs.ext4', ['-q', '-F', image])
  const device = run('losetup', ['-f', '--show', image]).trim()
  node.onCleanup(() => quiet('losetup', ['-d', device]))
  run('mount', ['-t', 'ext4', device, mountPoint])
  node.onCleanup(() => {
    if (mountTable().some((m) => m.target === mountPoint)) quiet('umount', [mountPoint])
  })
  writeFileSync(join(mountPoint, 'owner-data'), 'written by the device owner\n')
  node.exclude(mountPoint)
  node.exclude(image)
  node.watchLoopBacking(device)
  node.outsideChanged(mountPoint)
  return { device, image, mountPoint }
}

/** `e2fsck -fn` on `target`: its exit code and output (0: clean). */
export function fsck(target: string): { code: number; output: string } {
  try {
    return { code: 0, output: execFileSync('e2fsck', ['-fn', target], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }) }
  } catch (err) {
    const e = err as { status?: number; stdout?: string; stderr?: string }
    return { code: e.status ?? -1, output: `${e.stdout ?? ''}${e.stderr ?? ''}` }
  }
}

/** A pod manifest: `uid` given (static mode UIDs are written by people), one container with `mounts`. */
export function podYaml(o: { name: string; uid?: string; container?: string; volumes: unknown[]; mounts: unknown[] }): string {
  return `${JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: o.name, namespace: 'default', ...(o.uid !== undefined ? { uid: o.uid } : {}) },
    spec: { containers: [{ name: o.container ?? 'main', image: 'busybox', volumeMounts: o.mounts }], volumes: o.volumes },
  })}\n`
}

/** A good pod beside the bad ones: a disk emptyDir and a Memory emptyDir (a tmpfs mount). */
export function goodPod(uid: string): string {
  return podYaml({
    name: `good-${uid}`,
    uid,
    volumes: [{ name: 'scratch', emptyDir: {} }, { name: 'shm', emptyDir: { medium: 'Memory', sizeLimit: '8Mi' } }],
    mounts: [
      { name: 'scratch', mountPath: '/scratch' },
      { name: 'shm', mountPath: '/shm' },
    ],
  })
}
