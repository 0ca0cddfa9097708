/**
 * emptyDir (`kubernetes.io/empty-dir`, SPEC §7.3): a directory that lives as long as the pod, on the
 * node's disk or, with `medium: Memory`, on tmpfs. HugePages media are not supported.
 */
import type { Pod } from '../api/kubernetes.js'
import { parseQuantity } from '../api/quantity.js'
import type { VolumeSpec } from '../api/volume-spec.js'
import { HostError, isHostError } from '../errors.js'
import type { FileStep, FsStats, Host } from '../host/host.js'
import { joinPath } from '../paths.js'
import type { Mounter, MounterArgs, VolumePlugin, VolumePluginContext } from './plugin.js'
import { stillMounted, unmountFailed, unmountMountPoint } from './util/cleanup-mount-point.js'
import { runFileSteps } from './util/file-steps.js'
import { applyFsGroup } from './util/fs-group.js'

export const EMPTY_DIR_PLUGIN_NAME = 'kubernetes.io/empty-dir'

export interface EmptyDirPluginOptions {
  /**
   * The node's allocatable memory, bytes: the size of a memory emptyDir whose pod sets no memory
   * limit and that has no sizeLimit, as the kubelet sizes it. The agent passes the node's memory;
   * core cannot read it.
   * @default 8 GiB
   */
  readonly nodeAllocatableMemoryBytes?: number
}

/** What a memory emptyDir is capped at when the host's memory was not given. */
const DEFAULT_NODE_ALLOCATABLE_MEMORY = 8 * 2 ** 30

/**
 * A quantity as a whole number of bytes, rounded up as Kubernetes' `Quantity.Value()` does: a
 * fractional count (`1.5`, `100m`, `0.1Ki`) would make tmpfs refuse `size=` with EINVAL.
 */
function wholeBytes(quantity: string | number): number {
  return Math.ceil(parseQuantity(quantity))
}

/**
 * Size of a memory-backed emptyDir, in whole bytes: the smallest of node allocatable memory, the
 * pod's memory limit and sizeLimit.
 */
export function memoryVolumeSize(pod: Pod, sizeLimit: string | number | undefined, nodeAllocatable: number): number {
  let size = Math.ceil(nodeAllocatable)
  let podLimit = 0
  let everyContainerLimited = true
  for (const c of pod.spec?.containers ?? []) {
    const limit = c.resources?.limits?.memory
    if (limit === undefined) everyContainerLimited = false
    else podLimit += wholeBytes(limit)
  }
  if (everyContainerLimited && podLimit > 0) size = Math.min(size, podLimit)
  const limit = sizeLimit === undefined ? 0 : wholeBytes(sizeLimit)
  if (limit > 0) size = Math.min(size, limit)
  return size
}

/** The tmpfs `size=` option: whole bytes in plain digits (never `1e+21`, which tmpfs refuses). */
function tmpfsSizeOption(bytes: number): string {
  return `size=${BigInt(Math.ceil(bytes))}`
}

/** Bytes used by the files under `dir` (a `du` that never leaves the directory's filesystem). */
async function diskUsage(context: VolumePluginContext, dir: string): Promise<{ bytes: number; inodes: number }> {
  const { host } = context
  const root = await host.lstat(dir)
  if (!root) return { bytes: 0, inodes: 0 }
  let bytes = 0
  let inodes = 0
  const walk = async (path: string): Promise<void> => {
    const info = await host.lstat(path)
    if (!info || info.dev !== root.dev) return
    bytes += info.size
    inodes++
    if (info.type === 'directory') for (const name of await host.readdir(path)) await walk(joinPath(path, name))
  }
  await walk(dir)
  return { bytes, inodes }
}

/** Steps around an emptyDir's own in {@link setUpEmptyDirAt}, made in the same host calls. */
export interface EmptyDirSteps {
  /** Before the directory is made; an `lstat` with `stopIfFound` that finds something ends the set-up there. */
  readonly before?: readonly FileStep[]
  /** After its mode is set. */
  readonly after?: readonly FileStep[]
}

/**
 * An emptyDir's set-up at `dir` (the kubelet's wrapper volume that configMap, secret, downwardAPI and
 * projected volumes live in, too): a 0777 directory (`mkdir -p`, then a chmod when the umask took
 * bits), with a tmpfs of `tmpfsBytes` mounted on it when given (unless one is mounted there
 * already). Idempotent. The steps, `around`'s and the tmpfs's mount included, are one host call
 * where the host has `fileSteps`. False when a `before` step stopped it (nothing after that step
 * was made).
 */
export async function setUpEmptyDirAt(host: Host, dir: string, tmpfsBytes: number | undefined, around: EmptyDirSteps = {}): Promise<boolean> {
  const before = around.before ?? []
  const after = around.after ?? []
  const make: FileStep = { op: 'mkdir', path: dir, recursive: true, mode: 0o777 }
  const mode: FileStep = { op: 'setPermissions', path: dir, permissions: 0o777 }
  if (tmpfsBytes === undefined) return (await runFileSteps(host, [...before, make, mode, ...after])) >= before.length
  const tmpfs: FileStep = { op: 'mountUnlessMountPoint', path: dir, mount: { source: 'tmpfs', fstype: 'tmpfs', options: [tmpfsSizeOption(tmpfsBytes)] } }
  return (await runFileSteps(host, [...before, make, tmpfs, mode, ...after])) >= before.length
}

/**
 * Unmounts `dir` when it is a mount point (a memory volume's tmpfs; what is below is the empty
 * directory), then removes it and what it holds, never crossing into another mount. A missing `dir`
 * is done.
 */
export async function tearDownEmptyDirAt(host: Host, dir: string, found: { readonly mounted?: boolean } = {}): Promise<void> {
  // One mount-point check (ENOENT: done), none when the caller's call just found one there; a
  // broken mount is unmounted without a look. A mount still there after the unmount (stacked)
  // makes removeAll refuse (EBUSY) before removing anything.
  if (!(await unmountMountPoint(host, dir, { recheck: false, mounted: found.mounted === true }))) return
  await host.removeAll(dir)
}

export function createEmptyDirPlugin(options: EmptyDirPluginOptions = {}): VolumePlugin {
  const nodeAllocatable = options.nodeAllocatableMemoryBytes ?? DEFAULT_NODE_ALLOCATABLE_MEMORY
  let context: VolumePluginContext

  return {
    name: EMPTY_DIR_PLUGIN_NAME,
    init(ctx) {
      context = ctx
    },
    canSupport: (spec) => spec.volume?.emptyDir !== undefined,
    getVolumeName: (spec) => spec.name,
    requiresRemount: () => false,
    // Its directory under the pod's volumes first, its tmpfs and ready marker at or beside it.
    setUpFoundOnDisk: true,
    supportsMountOption: () => false,
    supportsSELinuxContextMount: () => false,
    newMounter: (spec, pod) => createEmptyDirMounter(context, spec, pod, nodeAllocatable),
    newUnmounter(innerName, podUID) {
      const dir = volumeDir(context, podUID, innerName)
      return {
        getPath: () => dir,
        async tearDown() {
          const { host } = context
          const plugin = pluginDir(context, podUID, innerName)
          const marker = joinPath(plugin, 'ready')
          // The ready marker first (a crash from here on sets the volume up again), then what is
          // left of its directory, then the volume's directory, unmounted first if it is a mount
          // point (a memory volume's tmpfs). Usually all three are a file and two empty
          // directories, the last one with a tmpfs or none: then one call where the host can make
          // it one, which stops at anything in the way.
          if (host.removeUnmounted) {
            try {
              await host.removeUnmounted([marker, plugin, dir], { unmountLast: true })
              return
            } catch (err) {
              // The tmpfs could not be unmounted (busy): the tear-down fails as its unmount's would.
              if (err instanceof HostError && err.path === dir && err.syscall === 'umount') throw unmountFailed(dir, err)
              // Still a mount point after its one unmount (another mount was stacked there): this
              // attempt ends, as the kubelet's, with one unmount made; a retry makes the next.
              if (err instanceof HostError && err.path === dir && err.code === 'EBUSY') throw stillMounted(dir)
              // Stopped at the volume's directory (files left in it, below the tmpfs or without
              // one): the marker and its directory are gone; the long way from there.
              if (err instanceof HostError && err.path === dir) {
                await tearDownEmptyDirAt(host, dir)
                return
              }
              // Stopped earlier (the fsGroup record left in the marker's directory): every step again.
            }
          }
          await host.remove(marker).catch((err: unknown) => {
            if (!isHostError(err, 'ENOENT')) throw err
          })
          await host.removeAll(plugin)
          await tearDownEmptyDirAt(host, dir)
        },
      }
    },
    async constructVolumeSpec(innerName) {
      return { name: innerName, volume: { name: innerName, emptyDir: {} }, readOnly: false }
    },
  }
}

const volumeDir = (context: VolumePluginContext, podUID: string, name: string): string => context.paths.podVolumeDir(podUID, EMPTY_DIR_PLUGIN_NAME, name)
const pluginDir = (context: VolumePluginContext, podUID: string, name: string): string => joinPath(context.paths.podPluginDir(podUID, EMPTY_DIR_PLUGIN_NAME), name)

/** The mounter of one pod's emptyDir; refuses a medium other than the default and Memory. */
function createEmptyDirMounter(context: VolumePluginContext, spec: VolumeSpec, pod: Pod, nodeAllocatable: number): Mounter {
  const kind = spec.volume?.emptyDir?.medium ?? ''
  if (kind !== '' && kind !== 'Memory') {
    throw new Error(kind.startsWith('HugePages') ? `emptyDir medium "${kind}" is not supported by kubevol` : `unknown storage medium "${kind}"`)
  }
  const podUID = pod.metadata.uid ?? ''
  const dir = volumeDir(context, podUID, spec.name)
  const marker = joinPath(pluginDir(context, podUID, spec.name), 'ready')
  return {
    getPath: () => dir,
    getAttributes: () => ({ readOnly: false, managed: true, seLinuxRelabel: true }),
    async setUp(args: MounterArgs) {
      const { host } = context
      const plugin = pluginDir(context, podUID, spec.name)
      const size = kind === 'Memory' ? memoryVolumeSize(pod, spec.volume?.emptyDir?.sizeLimit, nodeAllocatable) : undefined
      // The kubelet's order: the ready marker looked at; the directory, its tmpfs, its mode; fsGroup;
      // the marker's directory and the marker last (a crash before them sets the volume up again).
      // With no fsGroup to apply, a disk volume's whole set-up is one host call where the host has
      // `fileSteps`.
      const markerSteps: FileStep[] = [
        { op: 'mkdir', path: plugin, recursive: true, mode: 0o750 },
        { op: 'writeFile', path: marker, data: '' },
      ]
      const after = args.fsGroup === undefined ? markerSteps : []
      if (!(await setUpEmptyDirAt(host, dir, size, { before: [{ op: 'lstat', path: marker, stopIfFound: true }], after }))) {
        // Marked ready: done while what it marks is there; else set up anew.
        if (kind === 'Memory' && (await host.isMountPoint(dir).catch(() => false))) return
        if (kind === '' && (await host.lstat(dir))) return
        await host.removeAll(plugin)
        await setUpEmptyDirAt(host, dir, size, { after })
      }
      if (after.length > 0) return
      await applyFsGroup(context, {
        dir,
        fsGroup: args.fsGroup,
        policy: args.fsGroupChangePolicy,
        readOnly: false,
        recordPath: joinPath(plugin, 'fsgroup'),
        pod,
        pluginName: EMPTY_DIR_PLUGIN_NAME,
      })
      await runFileSteps(host, markerSteps)
    },
    async getMetrics(): Promise<FsStats> {
      if (kind === 'Memory' && context.host.statfs) return context.host.statfs(dir)
      const { bytes, inodes } = await diskUsage(context, dir)
      const limit = spec.volume?.emptyDir?.sizeLimit
      const capacity = limit === undefined ? 0 : parseQuantity(limit)
      return {
        capacityBytes: capacity,
        usedBytes: bytes,
        availableBytes: capacity > 0 ? Math.max(0, capacity - bytes) : 0,
        inodes: 0,
        inodesUsed: inodes,
        inodesFree: 0,
      }
    },
  }
}
