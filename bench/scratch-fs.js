// A filesystem of its own for a benchmark on the real kernel: a fresh ext4 (mkfs.ext4's defaults,
// journal included, as a node's /var/lib/kubelet would have) in an image file on the machine's
// disk, mounted through a loop device. Call it inside the benchmark's private mount namespace.
//
// Why not a directory under /tmp: these machines' root filesystem is an ext4 without a journal,
// and there the kernel passes over every inode freed in the last minute (five, while the inode's
// table block is dirty) when it allocates a new one. After a few thousand directories made and
// removed, each mkdir(2) took 0.3-1 ms instead of 30-40 µs, growing run after run, so whichever
// loop ran later paid for the inodes the earlier ones had freed. The image's blocks are on the same
// disk, so fsync still reaches it.
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'

/** Makes and mounts a fresh ext4; returns its mount point and a function that removes it all. */
export function scratchFilesystem(prefix, size = '4G') {
  const scratch = mkdtempSync(`/tmp/${prefix}`)
  const dir = `${scratch}/fs`
  mkdirSync(dir)
  execFileSync('truncate', ['-s', size, `${scratch}/fs.img`])
  execFileSync('mkfs.ext4', ['-q', '-F', `${scratch}/fs.img`])
  execFileSync('mount', ['-o', 'loop', `${scratch}/fs.img`, dir])
  return {
    dir,
    remove() {
      // Whatever a run left mounted below it first; the loop device goes with the last unmount.
      execFileSync('umount', ['-R', dir], { stdio: 'ignore' })
      rmSync(scratch, { recursive: true, force: true })
    },
  }
}
