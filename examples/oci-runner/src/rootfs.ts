/**
 * A root file system with one static busybox: every applet a link to it, and the directories a
 * container's mounts land in. Enough for a container that runs shell scripts.
 */
import { execFileSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, symlinkSync } from 'node:fs'
import { join } from 'node:path'

/**
 * Makes `dir` a busybox root file system (idempotent) and returns it. `busybox` must be a static
 * binary (Debian's `busybox-static`), since the root holds no libraries.
 */
export function busyboxRootfs(dir: string, busybox = '/bin/busybox'): string {
  for (const sub of ['bin', 'proc', 'dev', 'tmp', 'etc']) mkdirSync(join(dir, sub), { recursive: true })
  const target = join(dir, 'bin', 'busybox')
  if (!existsSync(target)) copyFileSync(busybox, target)
  const applets = execFileSync(busybox, ['--list'], { encoding: 'utf8' }).split('\n').filter((name) => /^[\w.[-]+$/.test(name) && name !== 'busybox')
  for (const applet of applets) {
    const link = join(dir, 'bin', applet)
    if (!existsSync(link)) symlinkSync('busybox', link)
  }
  return dir
}
