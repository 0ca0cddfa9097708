/**
 * A temporary root directory for one test and its cleanup: lazy unmount of everything mounted below
 * it (deepest first), detach of the loop devices backed by files below it, then rm -rf.
 */
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseMountInfo } from '../src/mountinfo.js'

export function makeTempRoot(prefix = 'kubevol-linux-'): string {
  return realpathSync(mkdtempSync(join(tmpdir(), prefix)))
}

function mountsUnder(root: string): string[] {
  return parseMountInfo(readFileSync('/proc/self/mountinfo', 'utf8'))
    .map((e) => e.target)
    .filter((t) => t === root || t.startsWith(`${root}/`))
}

/** The loop devices whose backing file is below `root` (from sysfs). */
function loopDevicesUnder(root: string): string[] {
  const found: string[] = []
  for (const name of readdirSync('/sys/block').filter((n) => n.startsWith('loop'))) {
    try {
      const file = readFileSync(`/sys/block/${name}/loop/backing_file`, 'utf8').trim()
      if (file.startsWith(`${root}/`)) found.push(`/dev/${name}`)
    } catch {}
  }
  return found
}

export function cleanupTempRoot(root: string): void {
  for (let round = 0; round < 5; round++) {
    const targets = mountsUnder(root).reverse()
    if (targets.length === 0) break
    for (const target of targets) {
      try {
        execFileSync('umount', ['-l', target], { stdio: 'ignore' })
      } catch {}
    }
  }
  for (const device of loopDevicesUnder(root)) {
    try {
      execFileSync('losetup', ['-d', device], { stdio: 'ignore' })
    } catch {}
  }
  rmSync(root, { recursive: true, force: true })
}
