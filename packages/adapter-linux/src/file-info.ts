/** node:fs `Stats` → the Host port's `FileInfo`. */
import type { Stats } from 'node:fs'
import type { FileInfo } from '@kubevol/core'

function typeOf(stats: Stats): FileInfo['type'] {
  if (stats.isFile()) return 'file'
  if (stats.isDirectory()) return 'directory'
  if (stats.isSymbolicLink()) return 'symlink'
  if (stats.isBlockDevice()) return 'block-device'
  if (stats.isCharacterDevice()) return 'char-device'
  if (stats.isSocket()) return 'socket'
  return 'fifo'
}

/** The port's view of a `Stats`: permission bits only in `mode`, `rdev` for device nodes. */
export function toFileInfo(stats: Stats): FileInfo {
  const type = typeOf(stats)
  const info: FileInfo = {
    type,
    mode: stats.mode & 0o7777,
    uid: stats.uid,
    gid: stats.gid,
    size: stats.size,
    dev: stats.dev,
    ino: stats.ino,
    mtimeMs: stats.mtimeMs,
  }
  return type === 'block-device' || type === 'char-device' ? { ...info, rdev: stats.rdev } : info
}
