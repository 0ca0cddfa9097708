/** `statfs(2)` → the port's FsStats, computed as the kubelet's `fs.Info` does. */
import type { FsStats } from '@kubevol/core'
import type { StatfsResult } from './libc.js'

/** Capacity = blocks × fragment size, available = blocks free to unprivileged users, used = blocks − free. */
export function toFsStats(s: Partial<StatfsResult>): FsStats {
  const unit = Number(s.f_frsize || s.f_bsize || 0)
  const blocks = Number(s.f_blocks ?? 0)
  const free = Number(s.f_bfree ?? 0)
  const files = Number(s.f_files ?? 0)
  const filesFree = Number(s.f_ffree ?? 0)
  return {
    capacityBytes: blocks * unit,
    availableBytes: Number(s.f_bavail ?? 0) * unit,
    usedBytes: (blocks - free) * unit,
    inodes: files,
    inodesFree: filesFree,
    inodesUsed: files - filesFree,
  }
}
