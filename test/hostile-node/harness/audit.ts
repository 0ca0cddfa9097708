/**
 * What the after-each audit measures, from the kernel and the disk, never from the agent: the
 * files outside kubevol's root (by content), the mounts of this mount namespace, and the loop
 * devices of the machine.
 */
import { createHash } from 'node:crypto'
import { existsSync, lstatSync, readFileSync, readdirSync, readlinkSync } from 'node:fs'
import { join } from 'node:path'

/** One entry of a tree: its type, and for a file its size and content hash, for a symlink its target. */
export interface Entry {
  readonly type: 'file' | 'directory' | 'symlink' | 'other'
  readonly size: number
  readonly hash?: string
  readonly target?: string
  readonly mode: number
}

export type Snapshot = Map<string, Entry>

const sha256 = (data: Buffer | string): string => createHash('sha256').update(data).digest('hex')

/** One file, symlink or directory as an {@link Entry} (undefined when it is gone). */
export function entryOf(path: string): Entry | undefined {
  let st: ReturnType<typeof lstatSync>
  try {
    st = lstatSync(path)
  } catch {
    return undefined
  }
  const mode = st.mode & 0o7777
  if (st.isSymbolicLink()) return { type: 'symlink', size: 0, target: readlinkSync(path), mode }
  if (st.isDirectory()) return { type: 'directory', size: 0, mode }
  if (st.isFile()) return { type: 'file', size: st.size, hash: sha256(readFileSync(path)), mode }
  return { type: 'other', size: 0, mode }
}

/**
 * Every entry under `dir` (relative paths), not following symlinks, not entering `skip` (exact
 * paths: kubevol's root, FUSE mounts that may hang, directories pods may write) and not entering a
 * mount point (what is mounted there is not the tree's own content).
 */
export function snapshot(dir: string, skip: ReadonlySet<string>, mountPoints: ReadonlySet<string>): Snapshot {
  const out: Snapshot = new Map()
  const walk = (path: string, rel: string): void => {
    for (const name of readdirSync(path).sort()) {
      const full = join(path, name)
      if (skip.has(full)) continue
      const e = entryOf(full)
      if (!e) continue
      out.set(join(rel, name), e)
      if (e.type === 'directory' && !mountPoints.has(full)) walk(full, join(rel, name))
    }
  }
  walk(dir, '')
  return out
}

/** Entries added (escapes), and the bytes of files removed or changed (losses), from `before` to `after`. */
export function compareSnapshots(before: Snapshot, after: Snapshot): { added: string[]; lost: string[]; lostBytes: number } {
  const added = [...after.keys()].filter((k) => !before.has(k))
  const lost: string[] = []
  let lostBytes = 0
  for (const [path, was] of before) {
    const now = after.get(path)
    const same = now !== undefined && now.type === was.type && now.hash === was.hash && now.target === was.target && now.size === was.size
    if (same) continue
    lost.push(`${path} (${now ? `changed: ${was.type} → ${now.type}` : 'gone'})`)
    // A changed directory's files are counted one by one; a removed symlink costs nothing but is listed.
    if (was.type === 'file') lostBytes += Math.max(was.size, 1)
  }
  return { added, lost, lostBytes }
}

/** One line of /proc/self/mountinfo. */
export interface MountLine {
  readonly id: string
  readonly device: string
  /** The path inside its file system that is mounted. */
  readonly root: string
  readonly target: string
  readonly fsType: string
  readonly source: string
}

const unoctal = (s: string): string => s.replace(/\\([0-7]{3})/g, (_m, o: string) => String.fromCharCode(Number.parseInt(o, 8)))

/** The mounts of this process's mount namespace. */
export function mountTable(): MountLine[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const f = line.split(' ')
      const dash = f.indexOf('-')
      return {
        id: f[0] as string,
        device: f[2] as string,
        root: unoctal(f[3] as string),
        target: unoctal(f[4] as string),
        fsType: f[dash + 1] as string,
        source: unoctal(f[dash + 2] ?? ''),
      }
    })
}

const under = (path: string, dir: string): boolean => path === dir || path.startsWith(`${dir}/`)

/**
 * Mounts that concern `dir`: mounted at or under it, or (a bind elsewhere) showing a part of it,
 * found by the file system and the path within it that `dir` has.
 */
export function mountsConcerning(dir: string, table = mountTable()): MountLine[] {
  const holder = table.filter((m) => under(dir, m.target)).sort((a, b) => b.target.length - a.target.length)[0]
  const inFs = holder ? join(holder.root, dir.slice(holder.target.length)) : dir
  return table.filter((m) => under(m.target, dir) || (holder !== undefined && m.device === holder.device && under(m.root, inFs) && !under(dir, m.target)))
}

/** Loop devices whose backing file is under one of `dirs` or is one of `files`: `/dev/loopN → backing file`. */
export function loopsBackedBy(dirs: readonly string[], files: readonly string[] = []): string[] {
  const found: string[] = []
  if (!existsSync('/sys/block')) return found
  for (const name of readdirSync('/sys/block').filter((n) => n.startsWith('loop'))) {
    let backing: string
    try {
      backing = readFileSync(`/sys/block/${name}/loop/backing_file`, 'utf8').trim()
    } catch {
      continue
    }
    const file = backing.replace(/ \(deleted\)$/, '')
    if (dirs.some((d) => under(file, d)) || files.includes(file)) found.push(`/dev/${name} → ${backing}`)
  }
  return found
}
