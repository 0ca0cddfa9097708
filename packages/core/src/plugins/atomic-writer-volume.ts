/**
 * What configMap, secret, downwardAPI and projected volumes share (SPEC §7.6): a per-pod directory
 * backed by an emptyDir-like wrapper (a plain directory, or tmpfs so secret material never touches
 * the disk), filled by the AtomicWriter with a payload each plugin builds, set up again on every pod
 * re-sync (`requiresRemount`), torn down by unmounting and removing the directory.
 */
import type { Pod, VolumeSource } from '../api/kubernetes.js'
import { parseQuantity } from '../api/quantity.js'
import type { VolumeSpec } from '../api/volume-spec.js'
import { ConfigError, KubevolError, NotFoundError, errorMessage } from '../errors.js'
import { joinPath } from '../paths.js'
import { DATA_DIR_NAME, writeAtomically } from './atomic-writer.js'
import { memoryVolumeSize, setUpEmptyDirAt, tearDownEmptyDirAt } from './empty-dir.js'
import type { Payload } from './payload.js'
import type { Mounter, MounterArgs, Unmounter, VolumePlugin, VolumePluginContext } from './plugin.js'

/** Where the volume's files live: the node's disk, or tmpfs (the kubelet's `medium: Memory` wrapper). */
export type VolumeMedium = 'disk' | 'memory'

/** Node allocatable resources (`cpu`, `memory`, `ephemeral-storage`), as quantities. */
export type ResourceList = Readonly<Record<string, string | number>>

/** Options of the secret, downwardAPI and projected plugins. */
export interface AtomicWriterPluginOptions {
  /**
   * The node's allocatable resources (the kubelet reads them from the node). `memory` bounds the
   * size of tmpfs-backed volumes (default 8 GiB, as emptyDir); `cpu`, `memory` and
   * `ephemeral-storage` stand in for a container limit that is not set in downward API
   * `resourceFieldRef` files. Without them such a file fails to build.
   */
  readonly nodeAllocatable?: ResourceList
}

/** What a plugin's payload builder is given on each set-up. */
export interface PayloadRequest {
  readonly spec: VolumeSpec
  readonly pod: Pod
  readonly args: MounterArgs
  readonly context: VolumePluginContext
}

/** One AtomicWriter volume type. */
export interface AtomicWriterVolumeDefinition {
  readonly name: string
  /** The key of the pod volume source this plugin serves. */
  readonly sourceKey: keyof VolumeSource
  readonly medium: VolumeMedium
  /** Node allocatable resources: the tmpfs size bound and the downward API's default limits. */
  readonly nodeAllocatable?: ResourceList
  /** Builds the payload; runs before anything is made on disk, so its errors leave no trace. */
  buildPayload(request: PayloadRequest): Promise<Payload>
  /**
   * The payload depends only on the pod and on objects the ObjectReader serves (see
   * {@link VolumePlugin.refreshOnEvents}). @default false: set up again every remount period
   */
  refreshOnEvents?(spec: VolumeSpec): boolean
  /** Called after a pod's volume was torn down. */
  onTearDown?(podUID: string): void
}

/** The kubelet's default node allocatable memory when none is given (as emptyDir). */
const DEFAULT_ALLOCATABLE_MEMORY = 8 * 2 ** 30

/**
 * A VolumePlugin from a definition: inline volumes with `sourceKey` only, `requiresRemount` true,
 * no mount options, not attachable, volume name = spec name, attributes read-only and managed.
 *
 * SetUp: build the payload, make the directory (0777; on tmpfs when `medium` is memory and it is not
 * a mount point yet), write the payload atomically with the pod's fsGroup. When the write fails on
 * a volume that held no data yet, the directory is torn down again; a failed refresh leaves the
 * previous content in place. TearDown: unmount when it is a mount point, then `removeAll` (which
 * never crosses a mount point: EBUSY). Both are idempotent.
 */
export function createAtomicWriterVolumePlugin(definition: AtomicWriterVolumeDefinition): VolumePlugin {
  let context: VolumePluginContext | undefined
  const started = (): VolumePluginContext => {
    if (!context) throw new ConfigError(`volume plugin ${definition.name} used before init`)
    return context
  }
  const volumeDir = (podUID: string, name: string): string => started().paths.podVolumeDir(podUID, definition.name, name)

  return {
    name: definition.name,
    init(ctx) {
      context = ctx
    },
    canSupport: (spec) => spec.volume?.[definition.sourceKey] !== undefined,
    getVolumeName: (spec) => spec.name,
    requiresRemount: () => true,
    // Its first change is the volume's directory under the pod's volumes; its tmpfs and files are
    // at and below it (the payload is built before anything is made).
    setUpFoundOnDisk: true,
    refreshOnEvents: (spec) => definition.refreshOnEvents?.(spec) ?? false,
    supportsMountOption: () => false,
    supportsSELinuxContextMount: () => false,
    newMounter(spec, pod): Mounter {
      const ctx = started()
      const podUID = pod.metadata.uid ?? ''
      const dir = volumeDir(podUID, spec.name)
      return {
        getPath: () => dir,
        getAttributes: () => ({ readOnly: true, managed: true, seLinuxRelabel: true }),
        async setUp(args) {
          const payload = await definition.buildPayload({ spec, pod, args, context: ctx })
          const fresh = !(await ctx.host.lstat(joinPath(dir, DATA_DIR_NAME)))
          const allocatable = definition.nodeAllocatable?.memory
          const memoryBytes = allocatable === undefined ? DEFAULT_ALLOCATABLE_MEMORY : parseQuantity(allocatable)
          await setUpEmptyDirAt(ctx.host, dir, definition.medium === 'memory' ? memoryVolumeSize(pod, undefined, memoryBytes) : undefined)
          try {
            const { written, dataDir } = await writeAtomically(ctx.host, dir, payload, {
              clock: ctx.clock,
              logger: ctx.logger,
              readOnly: true,
              fsGroup: args.fsGroup,
            })
            if (written) ctx.logger.debug('Wrote a new version of the volume', { plugin: definition.name, dir, dataDir })
          } catch (err) {
            if (fresh) {
              await tearDownEmptyDirAt(ctx.host, dir).catch((e: unknown) => ctx.logger.error('Could not clean up after a failed set-up', { dir, err: errorMessage(e) }))
            }
            throw err
          }
        },
      }
    },
    newUnmounter(innerName, podUID): Unmounter {
      const dir = volumeDir(podUID, innerName)
      return {
        getPath: () => dir,
        async tearDown() {
          await tearDownEmptyDirAt(started().host, dir)
          definition.onTearDown?.(podUID)
        },
      }
    },
  }
}

/**
 * Reads a ConfigMap or Secret a volume references. A missing object is `undefined` when `optional`,
 * else the kubelet's error, `configmap "name" not found` / `secret "name" not found`: the kubelet's
 * configMap and secret managers name their resource in the singular, so its text is not the API
 * server's `configmaps "name" not found`. Other read errors are thrown as they are.
 */
export async function readReferencedObject<T>(
  read: ((namespace: string, name: string) => Promise<T>) | undefined,
  resource: 'configmap' | 'secret',
  namespace: string,
  name: string,
  optional: boolean,
): Promise<T | undefined> {
  if (!read) throw new KubevolError('Unsupported', `cannot read ${resource}s "${name}": the object reader does not serve ${resource}s`)
  try {
    return await read(namespace, name)
  } catch (err) {
    if (!(err instanceof NotFoundError)) throw err
    if (optional) return undefined
    throw new NotFoundError(resource, name, { cause: err })
  }
}
