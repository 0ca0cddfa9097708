/**
 * Numbers from the Linux UAPI headers (`linux/mount.h`, `linux/fs.h`, `linux/loop.h`, `fcntl.h`).
 * They are the same on every 64-bit architecture Linux runs on (x86_64, arm64, riscv64, ppc64le).
 */

// mount(2) flags
export const MS_RDONLY = 1
export const MS_NOSUID = 2
export const MS_NODEV = 4
export const MS_NOEXEC = 8
export const MS_SYNCHRONOUS = 16
export const MS_REMOUNT = 32
export const MS_MANDLOCK = 64
export const MS_DIRSYNC = 128
export const MS_NOSYMFOLLOW = 256
export const MS_NOATIME = 1024
export const MS_NODIRATIME = 2048
export const MS_BIND = 4096
export const MS_REC = 16384
export const MS_SILENT = 32768
export const MS_PRIVATE = 1 << 18
export const MS_SLAVE = 1 << 19
export const MS_SHARED = 1 << 20
export const MS_RELATIME = 1 << 21
export const MS_STRICTATIME = 1 << 24
export const MS_LAZYTIME = 1 << 25

// umount2(2) flags
export const MNT_DETACH = 2
export const UMOUNT_NOFOLLOW = 8

// statfs f_flags (ST_*): the per-mount flags a read-only bind remount must keep (locked in user namespaces)
export const ST_RDONLY = 1
export const ST_NOSUID = 2
export const ST_NODEV = 4
export const ST_NOEXEC = 8
export const ST_NOATIME = 1024
export const ST_NODIRATIME = 2048
export const ST_RELATIME = 4096

// open(2) flags
export const O_RDONLY = 0
export const O_RDWR = 2
export const O_EXCL = 0o200
export const O_DIRECTORY = 0o200000
export const O_CLOEXEC = 0o2000000
export const O_PATH = 0o10000000
export const AT_SYMLINK_NOFOLLOW = 0x100
// openat2(2) RESOLVE_* flags (linux/openat2.h)
export const RESOLVE_NO_MAGICLINKS = 0x02
export const RESOLVE_NO_SYMLINKS = 0x04
export const RESOLVE_BENEATH = 0x08
export const AT_EMPTY_PATH = 0x1000
/** statx: answer from cached attributes, never revalidate with a (network) filesystem. */
export const AT_STATX_DONT_SYNC = 0x4000

// statx(2)
export const STATX_TYPE = 0x1
export const STATX_MODE = 0x2
export const STATX_ATTR_MOUNT_ROOT = 0x2000
export const S_IFMT = 0o170000
export const S_IFDIR = 0o040000
export const S_IFREG = 0o100000
export const S_IFLNK = 0o120000
export const S_IFBLK = 0o060000
export const S_IFCHR = 0o020000
export const S_IFSOCK = 0o140000

// poll(2)
export const POLLPRI = 0x2
export const POLLERR = 0x8

// loop devices (linux/loop.h)
export const LOOP_SET_FD = 0x4c00
export const LOOP_CLR_FD = 0x4c01
export const LOOP_SET_STATUS64 = 0x4c04
export const LOOP_GET_STATUS64 = 0x4c05
export const LOOP_SET_CAPACITY = 0x4c07
export const LOOP_CONFIGURE = 0x4c0a
export const LOOP_CTL_GET_FREE = 0x4c82
export const LO_FLAGS_READ_ONLY = 1
export const LO_NAME_SIZE = 64
export const LOOP_MAJOR = 7

// block devices (linux/fs.h): _IOR(0x12, 114, size_t)
export const BLKGETSIZE64 = 0x80081272

