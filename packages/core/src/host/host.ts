/**
 * The Host port: everything kubevol asks of the operating system. Plugins and the manager call only
 * this; `@kubevol/adapter-linux` implements it on the kernel, `@kubevol/adapter-mock` in memory.
 *
 * All paths are absolute. Every method fails with a {@link HostError} whose code is the errno the
 * kernel would give (ENOENT, EEXIST, EBUSY, ...). Optional members are capabilities: a host that can
 * attach loop devices has `loopDevices`, one that cannot does not.
 *
 * **The root.** While a {@link Host.lockRoot} is held, its directory is the host's root, and every
 * path strictly beneath it, given to any member, is resolved from the root without following a
 * symlink at any level beneath it (the Linux host: `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`
 * from the root's descriptor, and the act made on what that resolution opened). A symlink:
 * - at a level above the last (a parent directory beneath the root) fails every member with ELOOP
 *   (`syscall` the member's usual call, `path` the path given, a message that a symlink beneath the
 *   root was refused, naming the level that is one when known);
 * - as the last component is acted on, never followed, by the members that act on an entry itself:
 *   `lstat` (reports it), `readlink`, `lchown`, `remove`, `removeAll` and `removeUnmounted` (unlink
 *   it as a file), `rename` (either end), `symlink` (EEXIST), `unmount` (EINVAL: not a mount point),
 *   `isMountPoint` (false);
 * - as the last component fails with ELOOP every member that would follow it: `stat`, `readFile`,
 *   `writeFile`, `appendFile`, `writeFileAt`, `syncFile`, `truncate`, `chmod`, `readdir`, `mkdir`
 *   (recursive or not; an existing directory with `recursive` is still no error), `mount` (its target,
 *   and a bind's source), `statfs`, `mountReferences`, each step of `fileSteps` as its member, and
 *   `subPaths.bind`'s volume path and target (its sub path is resolved inside the volume as before).
 *
 * A regular file at a level above the last is ENOTDIR, as the kernel; a mount point beneath the root
 * is crossed as usual. `..` never climbs above the root (EXDEV). Before a lock, after its release,
 * and for paths not strictly beneath the root (the root itself, paths elsewhere, paths that reach it
 * through another name), resolution is the kernel's usual one, symlinks followed.
 */

/** What `lstat`/`stat` report. */
export interface FileInfo {
  readonly type: 'file' | 'directory' | 'symlink' | 'block-device' | 'char-device' | 'socket' | 'fifo'
  /** Permission bits, including setuid/setgid/sticky (e.g. 0o2775). */
  readonly mode: number
  readonly uid: number
  readonly gid: number
  readonly size: number
  /** Device id of the filesystem the entry is on; differs across a mount point. */
  readonly dev: number
  readonly ino: number
  /** Modification time, milliseconds since the epoch. */
  readonly mtimeMs: number
  /** For block and character devices: the device number the node refers to. */
  readonly rdev?: number
}

/** One line of the mount table (`/proc/self/mountinfo`). */
export interface MountEntry {
  readonly id: number
  readonly parentId: number
  /** `major:minor` of the mounted filesystem. */
  readonly device: string
  /** The path inside the source filesystem that is mounted (`/` unless a bind of a subdirectory). */
  readonly root: string
  readonly target: string
  readonly fstype: string
  readonly source: string
  /** Per-mount options (`rw`, `ro`, `nosuid`, ...). */
  readonly options: readonly string[]
  /** Filesystem options (`size=...`, `context=...`). */
  readonly superOptions: readonly string[]
  /** `shared`, `slave`, `private` or `unbindable`. */
  readonly propagation: 'shared' | 'slave' | 'private' | 'unbindable'
}

/** What to mount. `bind` and `remount` may be combined to change the flags of a bind mount. */
export interface MountRequest {
  /** Device, directory (bind) or a name for pseudo filesystems (`tmpfs`). */
  readonly source: string
  readonly target: string
  /** Filesystem type; ignored for `bind` and `remount`. */
  readonly fstype?: string
  readonly bind?: boolean
  /** With `bind`: bind submounts too (`MS_REC`). */
  readonly recursive?: boolean
  readonly remount?: boolean
  readonly readOnly?: boolean
  /** Filesystem options joined with commas (`size=64m`, `context="..."`). */
  readonly options?: readonly string[]
  /** Mount propagation to set on `target` after mounting. */
  readonly propagation?: 'shared' | 'slave' | 'private'
}

/** Options of {@link Host.removeUnmounted}. */
export interface RemoveUnmountedOptions {
  /** Unmount the last path first when it is a mount point. */
  readonly unmountLast?: boolean
}

export interface UnmountOptions {
  /** `MNT_DETACH`: lazy unmount. */
  readonly lazy?: boolean
  /** `UMOUNT_NOFOLLOW`: do not follow a symlink at `target`. @default true */
  readonly noFollow?: boolean
}

/** Capacity and usage of the filesystem a path is on (`statfs`). */
export interface FsStats {
  readonly capacityBytes: number
  readonly availableBytes: number
  readonly usedBytes: number
  readonly inodes: number
  readonly inodesFree: number
  readonly inodesUsed: number
}

/**
 * What uses an attached loop device: enough to tell an attachment kubevol made, and mounted only
 * where it mounts, from one someone else made or uses.
 */
export interface LoopDeviceStatus {
  /**
   * This attachment of the device: a value the host gives each attach anew, so that a record of an
   * earlier attach never matches a later attach of the same device (Linux: the boot id and the
   * device's `diskseq`, kernel 5.15 and later; before it, the backing file's identity, which a later
   * attach of the same file repeats).
   */
  readonly attachment: string
  /** Where the filesystem on the device is mounted in this mount namespace (binds of it included), in mount order. */
  readonly mountPoints: readonly string[]
  /**
   * True when something holds the device open exclusively: its filesystem mounted (here or in
   * another mount namespace), a device mapper on it, an O_EXCL opener.
   */
  readonly held: boolean
}

/** Loop devices: a file presented as a block device. */
export interface LoopDevices {
  /**
   * Attaches `file` to a free loop device and returns its path (`/dev/loop3`); a file a loop device
   * already serves gives that device. A block device is opened exclusively (O_EXCL): EBUSY while it
   * is mounted or held exclusively elsewhere. With `regularFile` (a disk image) the path is opened
   * once without following a symlink at any level (a symlinked directory, `/proc/self/...`: ELOOP);
   * the opened file must be a regular file that stores data (anything else, a file of a kernel
   * pseudo-filesystem such as `/proc/<pid>/mem` or sysfs included: EINVAL), and that same descriptor
   * is what the loop device serves, so a swap between a caller's check and the attach cannot slip
   * anything else in.
   */
  attach(file: string, options?: { readonly readOnly?: boolean; readonly regularFile?: boolean }): Promise<string>
  /** Detaches `device`. ENXIO when it is not attached. */
  detach(device: string): Promise<void>
  /** The loop devices backed by `file` (empty when none). */
  find(file: string): Promise<readonly string[]>
  /** Re-reads the size of the backing file (`LOOP_SET_CAPACITY`). */
  refreshCapacity(device: string): Promise<void>
  /** What uses `device`; null when it is not attached (any more). */
  status(device: string): Promise<LoopDeviceStatus | null>
}

/** Block devices the host knows. */
export interface BlockDevices {
  /** Size in bytes; ENOENT when the device does not exist. */
  size(device: string): Promise<number>
  /** True when something holds the device open exclusively (a mounted filesystem, a mapper). */
  isOpen(device: string): Promise<boolean>
}

/** The size of a filesystem as its own tools report it. */
export interface FilesystemSize {
  /** Blocks × block size: what the filesystem spans on its device. */
  readonly sizeBytes: number
  readonly blockSize: number
}

/** Filesystem tools: detect, format, check, resize, and the size query a resize decision needs. */
export interface Filesystems {
  /** The filesystem type found on the device, or null when the device is blank. */
  detect(device: string): Promise<string | null>
  /** Creates a filesystem. Never called on a device whose `detect` is not null. */
  format(device: string, fstype: string, options?: readonly string[]): Promise<void>
  /**
   * Checks and repairs what can be repaired without asking (`fsck -a`, whatever the type). Fails
   * with EIO, fsck's output as the detail, only when errors were left uncorrected (exit status 4);
   * a missing fsck, a reboot advised (2), an operational error (8 and above) pass, as in mount-utils.
   */
  check(device: string, fstype: string): Promise<void>
  /** Grows the filesystem to fill the device; `mountPath` when it is mounted (online resize). */
  resize(device: string, fstype: string, mountPath?: string): Promise<void>
  /**
   * The size of the `fstype` filesystem on `device` (ext2/3/4: `dumpe2fs -h` block count × block
   * size; xfs: `xfs_io -c statfs` on `mountPath`, which xfs needs, else EINVAL). ENOTSUP for
   * another type.
   */
  size(device: string, fstype: string, mountPath?: string): Promise<FilesystemSize>
  /**
   * True when growing the filesystem on `device` would gain something (mount-utils `NeedResize`):
   * the device is larger than the filesystem by more than one block. False for a read-only device
   * and for a blank one; ENOTSUP for a type {@link Filesystems.size} cannot measure.
   */
  needResize(device: string, mountPath?: string): Promise<boolean>
}

/**
 * Safe subPath binds (the kubelet's answer to its subPath CVEs). `bind` resolves `subPath` inside
 * `volumePath` (symlinks that stay inside the volume are allowed), then opens every component of the
 * resolved path from `volumePath` without following symlinks and binds the opened descriptor onto
 * `target`. A symlink swapped in between the check and the bind therefore fails the call (ELOOP)
 * instead of pointing the bind outside the volume. A path that resolves outside the volume fails
 * with EACCES ("subpath ... not within volume path ..."). `target` is created (a file or a directory,
 * matching the source) when absent. A missing sub path is created first as the kubelet's
 * `doSafeMakeDir` does: its existing prefix must resolve inside the volume (else EACCES, "path ... is
 * outside of allowed base ..."), each missing directory is made relative to the one before without
 * following a symlink (a symlink in the way: EEXIST or ELOOP), with the volume root's permission
 * bits and setgid.
 */
export interface SubPaths {
  bind(volumePath: string, subPath: string, target: string, options?: { readonly readOnly?: boolean }): Promise<void>
}

/** What keeps a path busy: mounts below it and processes using it (cwd, root or an open file). */
export interface PathHolders {
  readonly mounts: readonly string[]
  readonly processes: readonly { readonly pid: number; readonly command: string }[]
}

/** The outcome of {@link Host.lockRoot}: held (release it at shutdown), or held by another process. */
export type RootLock =
  | { readonly locked: true; release(): Promise<void> }
  | { readonly locked: false; readonly holderPid?: number }

/** What {@link Host.openRoot} gives: the root held until `close()`. */
export interface RootHandle {
  close(): Promise<void>
}

/** SELinux on the host. */
export interface SELinux {
  /** True when the host enforces or permits SELinux labels (mount `context=` options apply). */
  enabled(): Promise<boolean>
}

/**
 * One step of {@link Host.fileSteps}: what the Host member of the same name does, with its options,
 * its system calls and its errors.
 */
export type FileStep =
  /**
   * {@link Host.lstat}. With `stopIfFound`, something at `path` (a symlink included) ends the
   * sequence there, as a result and not an error: the steps after it are not made.
   */
  | { readonly op: 'lstat'; readonly path: string; readonly stopIfFound?: boolean }
  /** {@link Host.mkdir}. */
  | { readonly op: 'mkdir'; readonly path: string; readonly recursive?: boolean; readonly mode?: number }
  /**
   * {@link Host.stat} of `path`, then, when it is there and its permission bits (0o777) are not
   * `permissions`, {@link Host.chmod} to them, keeping setuid, setgid and sticky: what the kubelet
   * does after a `mkdir` whose mode the umask cut. A missing `path` is no error (nothing to change).
   */
  | { readonly op: 'setPermissions'; readonly path: string; readonly permissions: number }
  /** {@link Host.writeFile}. */
  | { readonly op: 'writeFile'; readonly path: string; readonly data: Uint8Array | string; readonly mode?: number }
  /**
   * {@link Host.isMountPoint} of `path`, then, when it is not one, {@link Host.mount} of `mount`
   * onto it: a memory volume's tmpfs, made in the same call as its directory, its mode and its
   * marker. A host may make the separate calls for a mount it cannot make within the sequence.
   */
  | { readonly op: 'mountUnlessMountPoint'; readonly path: string; readonly mount: Omit<MountRequest, 'target'> }

/** Files: the subset of POSIX the plugins need. */
export interface Host {
  /** Information about `path` itself (a symlink is reported as a symlink). Null when absent. */
  lstat(path: string): Promise<FileInfo | null>
  /** Information about what `path` resolves to. Null when absent or a dangling link (ENOENT); ENOTDIR and ELOOP throw. */
  stat(path: string): Promise<FileInfo | null>
  /** Creates a directory; with `recursive` its parents too, and no error when it exists. */
  mkdir(path: string, options?: { readonly recursive?: boolean; readonly mode?: number }): Promise<void>
  /** Names in a directory, sorted. ENOENT, ENOTDIR. */
  readdir(path: string): Promise<readonly string[]>
  readFile(path: string): Promise<Uint8Array>
  /** Creates or replaces a regular file. */
  writeFile(path: string, data: Uint8Array | string, options?: { readonly mode?: number }): Promise<void>
  /** Atomic rename; replaces a file or a symlink at `to`. */
  rename(from: string, to: string): Promise<void>
  symlink(target: string, path: string): Promise<void>
  readlink(path: string): Promise<string>
  /** Removes a file, a symlink, or an empty directory. EBUSY when `path` is a mount point. ENOTEMPTY. */
  remove(path: string): Promise<void>
  /**
   * Removes `path` and everything under it, never crossing into another filesystem (a mount point
   * below `path` is an error, EBUSY, and nothing at all is removed). A missing `path` is not an error.
   */
  removeAll(path: string): Promise<void>
  chmod(path: string, mode: number): Promise<void>
  /** Changes owner and group of `path` itself (not following a symlink). -1 keeps a value. */
  lchown(path: string, uid: number, gid: number): Promise<void>

  /**
   * Mounts. EBUSY, ENOENT (target or source missing), ENOTDIR, EINVAL, ENOTBLK, EPERM as the kernel.
   * `bind` with `readOnly` gives a read-only bind (on Linux: a bind, then a read-only remount).
   */
  mount(request: MountRequest): Promise<void>
  /** Unmounts the topmost mount at `target`. EINVAL when `target` is not a mount point; EBUSY when busy. */
  unmount(target: string, options?: UnmountOptions): Promise<void>
  /** The whole mount table, in mount order. */
  mounts(): Promise<readonly MountEntry[]>
  /**
   * True when `path` is a mount point. Answers from the mount table where it can, so a hung
   * filesystem at `path` is not touched. ENOENT when `path` does not exist.
   */
  isMountPoint(path: string): Promise<boolean>
  /**
   * The other mount points that show what is at `path` (mount-utils `GetMountRefs`): `path` is
   * resolved (symlinks followed), the mount holding it found (the latest mounted one that contains
   * it), and every other mount of the same filesystem whose root is the same place inside it is
   * listed, in mount order. So a directory that is not itself a mount point but is bind-mounted
   * elsewhere has those binds as references. Empty when `path` does not exist, or is a mount whose
   * filesystem no longer answers.
   */
  mountReferences(path: string): Promise<readonly string[]>

  /**
   * Appends to a regular file (creating it, mode 0600), and with `sync` waits until the data is on
   * stable storage (fdatasync). Present where kubevol can keep its journal.
   */
  appendFile?(path: string, data: Uint8Array | string, options?: { readonly sync?: boolean }): Promise<void>
  /**
   * Writes `data` into an existing regular file at byte `offset` (pwrite(2)), leaving every other
   * byte of it as it is (the file grows only if `offset` plus the data passes its end); with `sync`,
   * returns once the data is on stable storage (fdatasync). ENOENT when the file is missing. For a
   * log written into room made for it beforehand: rewriting blocks the file already has changes
   * neither its size nor its extents, so the sync waits for the data alone, not for the
   * filesystem's own journal.
   */
  writeFileAt?(path: string, offset: number, data: Uint8Array, options?: { readonly sync?: boolean }): Promise<void>
  /** Flushes a file's data and metadata to stable storage (fsync). */
  syncFile?(path: string): Promise<void>
  /**
   * Removes each path in order as {@link Host.remove} does, unless it is a mount point, in one call
   * where the host can make it one (a volume's mount directory, the file beside it, their parent).
   * A missing path is skipped. A mount point ends it with EBUSY before any remove is tried on it;
   * any other failure (ENOTEMPTY) ends it too. The error names the path it ended at, and the paths
   * after it are left as they are. With `unmountLast`, the last path, when it is a mount point (a
   * corrupted one included: its check fails with EIO, EACCES or ENODEV), is unmounted first as
   * {@link Host.unmount} does (once, not following a symlink; one that is gone by then is no
   * error), then removed: a failed unmount ends it with the unmount's error, and a
   * mount point still there after it with EBUSY (a memory emptyDir: its marker, the marker's
   * directory, then its tmpfs and directory).
   */
  removeUnmounted?(paths: readonly string[], options?: RemoveUnmountedOptions): Promise<void>
  /**
   * Makes `steps` in order, each one as its Host member would, as one call where the host can make
   * it one (an emptyDir's set-up: its directory, its mode, its marker's directory, the marker).
   * Resolves with the index of the `lstat` step with `stopIfFound` that found something, or
   * `steps.length` when every step was made. The first step that fails ends it with that step's
   * own error (code, call and path as the member gives them); the steps after it are not made.
   * Not atomic: another call may run between two steps, as between separate calls.
   */
  fileSteps?(steps: readonly FileStep[]): Promise<number>
  /** What holds `path` busy, for the message of an unmount that failed with EBUSY. */
  holders?(path: string): Promise<PathHolders>
  /**
   * Takes kubevol's exclusive lock on `rootDir` (`<rootDir>/kubevol.lock`, the directory made when
   * missing), so that one process at a time manages the root: an agent holds it while it runs, and
   * `kubevol gc` takes it before removing anything. Held by another process, the answer says which
   * (`holderPid`). On Linux a flock(2) the kernel drops when the holder dies, even by SIGKILL: a
   * stale lock file never blocks a restart.
   *
   * `{ locked: true }` also makes `rootDir` the host's root until `release()`: every path strictly
   * beneath it is then resolved without following a symlink at any level (see the Host port's
   * comment for each member). `rootDir` itself may be reached through symlinks, the operator's
   * choice: they are resolved once, here, and the directory found then stands for `rootDir` until the
   * release (the Linux host holds it open), whatever is renamed or linked at its name later.
   */
  lockRoot?(rootDir: string): Promise<RootLock>
  /**
   * Makes `rootDir` the host's root, as a held {@link Host.lockRoot} does, without taking the lock:
   * the volume manager does it for the whole of its `run()`, so the rule holds for an embedder that
   * takes no lock too. The directory is made when missing. Asking for the root the host already has
   * (locked or opened) gives a handle whose `close()` leaves it in place; otherwise `close()` ends it.
   * A host with this member enforces the rule, so the engine makes no checks of its own on the names
   * beneath the root before it acts.
   */
  openRoot?(rootDir: string): Promise<RootHandle>
  /** Sets the size of a regular file (extends sparsely or cuts). Present where disk images can grow. */
  truncate?(path: string, size: number): Promise<void>
  /** Filesystem usage of the filesystem `path` is on. */
  statfs?(path: string): Promise<FsStats>
  readonly loopDevices?: LoopDevices
  readonly blockDevices?: BlockDevices
  readonly filesystems?: Filesystems
  readonly subPaths?: SubPaths
  readonly selinux?: SELinux
}
