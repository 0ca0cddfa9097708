/**
 * What keeps a path busy on Linux: the mounts below it (from the mount table) and the processes
 * whose working directory, root or an open file is under it (from /proc/<pid>/{cwd,root,fd}).
 */
import { readFile, readdir, readlink } from 'node:fs/promises'
import type { MountEntry, PathHolders } from '@kubevol/core'

/** At most this many processes are named: the message is for a person. */
const MAX_PROCESSES = 10

function under(path: string, base: string): boolean {
  return path === base || path.startsWith(base.endsWith('/') ? base : `${base}/`)
}

export async function findHolders(path: string, mounts: readonly MountEntry[]): Promise<PathHolders> {
  const processes: { pid: number; command: string }[] = []
  const pids = (await readdir('/proc').catch(() => [] as string[])).filter((name) => /^\d+$/.test(name))
  for (const pid of pids) {
    if (Number(pid) === process.pid || processes.length >= MAX_PROCESSES) continue
    const links: string[] = []
    for (const link of ['cwd', 'root']) links.push(await readlink(`/proc/${pid}/${link}`).catch(() => ''))
    for (const fd of await readdir(`/proc/${pid}/fd`).catch(() => [] as string[])) {
      links.push(await readlink(`/proc/${pid}/fd/${fd}`).catch(() => ''))
    }
    // A process whose root is / is not holding `path` through its root.
    if (links.some((target, i) => target !== '' && !(i === 1 && target === '/') && under(target, path))) {
      const command = (await readFile(`/proc/${pid}/comm`, 'utf8').catch(() => '?')).trim()
      processes.push({ pid: Number(pid), command })
    }
  }
  return { mounts: mounts.map((m) => m.target).filter((t) => t !== path && under(t, path)), processes }
}
