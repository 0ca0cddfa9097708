/** A file's stat fields → the Host port's `FileInfo`. */
import type { FileInfo } from '@kubevol/core'
import * as c from './constants.js'
import type { FileFields } from './io-workers.js'

const TYPES = new Map<number, FileInfo['type']>([
  [c.S_IFREG, 'file'],
  [c.S_IFDIR, 'directory'],
  [c.S_IFLNK, 'symlink'],
  [c.S_IFBLK, 'block-device'],
  [c.S_IFCHR, 'char-device'],
  [c.S_IFSOCK, 'socket'],
])

/** The port's view of a file's stat fields: permission bits only in `mode`, `rdev` for device nodes. */
export function toFileInfo([mode, uid, gid, size, dev, ino, mtimeMs, rdev]: FileFields): FileInfo {
  const type = TYPES.get(mode & c.S_IFMT) ?? 'fifo'
  const info: FileInfo = { type, mode: mode & 0o7777, uid, gid, size, dev, ino, mtimeMs }
  return type === 'block-device' || type === 'char-device' ? { ...info, rdev } : info
}
