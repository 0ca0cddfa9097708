/**
 * Issue 36, the journal and the plugins trees symlinked: before `kubevol run` starts, `<root>/journal`
 * is a symlink to an outside directory holding a `volumes.log` canary (and, as the same class, the
 * journal file and the root lock are symlinks to outside files), and each level of the fileDisk
 * plugin's tree (`plugins`, `plugins/kubevol.io`, `.../file-disk`, `.../mounts`, `.../mounts/<pv>`,
 * `.../loops`) and `plugins_registry` (plugin registration on) is a symlink to a decoy outside R,
 * one level per attack. A pod with every volume type (a fileDisk claim among them) comes and goes,
 * `kubevol gc` runs, the agent starts again. Promise: no journal, lock, record, loop device or global
 * mount is written, placed or removed through the symlink; refusing to start is fine.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { it } from 'vitest'
import type { Attack } from './common.js'
import { ROOT_LEVELS, slug } from './levels.js'
import { plantedRun } from './planted-symlinks.js'

/** The levels: the shared ones but `pods` (planted-symlinks.ts), then the journal file, the lock and the registration directory. */
const TREES: readonly { template: string; file?: string; extra?: readonly string[] }[] = [
  ...ROOT_LEVELS.filter((t) => t !== 'pods').map((template) => ({ template })),
  { template: 'journal/volumes.log', file: `${'{"looks":"like a journal record"}\n'.repeat(64)}` },
  { template: 'kubevol.lock', file: 'not the lock: an outside file\n' },
  { template: 'plugins_registry', extra: ['--plugin-registration=true'] },
]

export const symlinkedTrees: Attack = (node) => {
  for (const { template, file, extra } of TREES) {
    it(`issue 36: <root>/${template} a symlink to ${file !== undefined ? 'a file' : 'a directory'} outside R before start: no state or mount goes through it, through kubevol run`, async () => {
      const n = node()
      let target: string | undefined
      if (file !== undefined) {
        target = join(n.outside, `decoy-${slug(template)}`)
        writeFileSync(target, file)
      }
      await plantedRun(n, [{ template, w: { uid: 'tree', pv: 'pv-tree', disk: true }, ...(target ? { target } : {}) }], extra)
    }, 90_000)
  }
}
