/**
 * Static mode's pod source and object reader: a directory of manifest files, watched with fs.watch
 * and read again periodically (a watch can miss events: network file systems, a directory replaced
 * by a ConfigMap mount's symlink swap).
 *
 * - Files ending in .yaml, .yml or .json, not starting with a dot, are read; each may hold several
 *   documents or a List.
 * - A pod without `spec.nodeName` is this node's; one naming another node is ignored.
 * - A pod without `metadata.uid` gets the kubelet's static pod UID: a hash of the pod, the node and
 *   the file, so editing a pod replaces it (its old volumes are unmounted, the new ones mounted).
 * - A file with an error keeps the objects of its last clean read, so a pod being edited is not torn
 *   down; a file never read cleanly contributes its valid documents. Every error names the file,
 *   the line and the reason.
 * - A removed file deletes its objects; its pods are gone, runtime included.
 */
import { type FSWatcher, watch as watchDir } from 'node:fs'
import {
  type CSIDriver,
  type ConfigMap,
  type Logger,
  NotFoundError,
  type ObjectReader,
  type PersistentVolume,
  type PersistentVolumeClaim,
  type Secret,
  errorMessage,
} from '@kubevol/core'
import { type FileState, NAMESPACED, indexManifests, keyOf, nameOf, readManifestFiles } from './manifest-files.js'
import type { ManifestError, ManifestKind } from './manifest-parser.js'
import { type PodStore, createPodStore } from './pod-store.js'

export { staticPodUID } from './manifest-files.js'

export interface ManifestSourceOptions {
  /**
   * The directory of manifests, or one manifest file (as the kubelet's --pod-manifest-path); a
   * missing path is an empty directory (and is watched for).
   */
  readonly dir: string
  readonly nodeName: string
  /** How often the directory is read again besides watching it. @default 20000 (the kubelet's) */
  readonly rescanMs?: number
  /** How long after a watch event the directory is read (events come in bursts). @default 25 */
  readonly debounceMs?: number
  readonly logger: Logger
}

/** What one manifest file contributes. */
export interface ManifestFileStatus {
  readonly file: string
  readonly objects: readonly { readonly kind: ManifestKind; readonly namespace?: string; readonly name: string; readonly line: number }[]
  readonly errors: readonly ManifestError[]
  /** The file has errors and its objects are those of its last clean read. */
  readonly heldFromLastCleanRead: boolean
}

export interface ManifestSource {
  readonly pods: PodStore
  readonly objects: ObjectReader & { subscribe(listener: () => void): () => void }
  /** Reads the directory once, then watches it. Resolves after the first read (the source is ready). */
  start(): Promise<void>
  stop(): void
  /** Reads the directory now (what the watcher and the timer call). */
  scan(): Promise<void>
  /** Every current error: broken documents and duplicate objects. */
  errors(): ManifestError[]
  files(): ManifestFileStatus[]
}

/** Creates the manifest-directory source. Nothing is read before `start()` or `scan()`. */
export function createManifestSource(options: ManifestSourceOptions): ManifestSource {
  return new ManifestDirectorySource(options)
}

class ManifestDirectorySource implements ManifestSource {
  readonly pods = createPodStore()
  readonly objects: ManifestSource['objects']
  readonly #dir: string
  readonly #nodeName: string
  readonly #logger: Logger
  readonly #rescanMs: number
  readonly #debounceMs: number
  readonly #files = new Map<string, FileState>()
  readonly #reading = { missingLogged: false }
  readonly #objectListeners = new Set<() => void>()
  #objects = new Map<string, Record<string, unknown>>()
  #objectsSignature = ''
  #conflicts: ManifestError[] = []
  #watcher: FSWatcher | undefined
  #rescanTimer: NodeJS.Timeout | undefined
  #debounceTimer: NodeJS.Timeout | undefined
  #stopped = true
  #scanning: Promise<void> | undefined
  #again = false

  constructor(options: ManifestSourceOptions) {
    this.#dir = options.dir
    this.#nodeName = options.nodeName
    this.#logger = options.logger
    this.#rescanMs = options.rescanMs ?? 20_000
    this.#debounceMs = options.debounceMs ?? 25
    const get = <T>(kind: ManifestKind, namespace: string | undefined, name: string, resource: string): Promise<T> => this.#get<T>(kind, namespace, name, resource)
    this.objects = {
      getPersistentVolumeClaim: (ns, name) => get<PersistentVolumeClaim>('PersistentVolumeClaim', ns, name, 'persistentvolumeclaims'),
      getPersistentVolume: (name) => get<PersistentVolume>('PersistentVolume', undefined, name, 'persistentvolumes'),
      getConfigMap: (ns, name) => get<ConfigMap>('ConfigMap', ns, name, 'configmaps'),
      getSecret: (ns, name) => get<Secret>('Secret', ns, name, 'secrets'),
      getCSIDriver: (name) => get<CSIDriver>('CSIDriver', undefined, name, 'csidrivers.storage.k8s.io'),
      // Every change the directory's files make is announced once a scan finds it.
      announcesChanges: true,
      subscribe: (listener) => {
        this.#objectListeners.add(listener)
        return () => this.#objectListeners.delete(listener)
      },
    }
  }

  async start(): Promise<void> {
    this.#stopped = false
    await this.scan()
    this.#startWatch()
    this.#tick()
  }

  stop(): void {
    this.#stopped = true
    this.#watcher?.close()
    this.#watcher = undefined
    if (this.#rescanTimer) clearTimeout(this.#rescanTimer)
    if (this.#debounceTimer) clearTimeout(this.#debounceTimer)
    this.#rescanTimer = this.#debounceTimer = undefined
  }

  scan(): Promise<void> {
    // Reads never overlap: a request during a read runs one more read after it.
    if (this.#scanning) {
      this.#again = true
      return this.#scanning
    }
    const run = async (): Promise<void> => {
      do {
        this.#again = false
        await readManifestFiles(this.#dir, this.#files, this.#reading, this.#logger)
        this.#rebuild()
      } while (this.#again)
    }
    this.#scanning = run().finally(() => {
      this.#scanning = undefined
    })
    return this.#scanning
  }

  errors(): ManifestError[] {
    return [...[...this.#files.values()].flatMap((f) => f.errors), ...this.#conflicts]
  }

  files(): ManifestFileStatus[] {
    return [...this.#files.entries()].map(([file, state]) => ({
      file,
      objects: state.objects.map((o) => ({ kind: o.kind, ...nameOf(o), line: o.line })),
      errors: state.errors,
      heldFromLastCleanRead: state.errors.length > 0 && state.lastClean !== undefined,
    }))
  }

  /** The periodic read, which also restarts a watch that failed. */
  #tick(): void {
    this.#rescanTimer = setTimeout(() => {
      this.#startWatch()
      void this.scan().finally(() => {
        if (!this.#stopped) this.#tick()
      })
    }, this.#rescanMs)
    this.#rescanTimer.unref?.()
  }

  #startWatch(): void {
    if (this.#watcher || this.#stopped) return
    const dir = this.#dir
    try {
      this.#watcher = watchDir(dir, { persistent: false }, () => this.#scheduleScan())
      this.#watcher.on('error', (err) => {
        this.#logger.warn('Watching the manifest directory failed; reading it periodically', { dir, err: errorMessage(err) })
        this.#watcher?.close()
        this.#watcher = undefined
      })
    } catch {
      // The directory does not exist (yet): the periodic read finds it.
    }
  }

  #scheduleScan(): void {
    if (this.#stopped || this.#debounceTimer) return
    this.#debounceTimer = setTimeout(() => {
      this.#debounceTimer = undefined
      void this.scan()
    }, this.#debounceMs)
    this.#debounceTimer.unref?.()
  }

  #rebuild(): void {
    const next = indexManifests(this.#files, this.#nodeName)
    this.#conflicts = next.conflicts
    const signature = JSON.stringify([...next.objects.entries()])
    this.#objects = next.objects
    if (signature !== this.#objectsSignature) {
      this.#objectsSignature = signature
      for (const listener of [...this.#objectListeners]) listener()
    }
    this.pods.replaceAll(next.pods)
    this.pods.setReady(true)
  }

  async #get<T>(kind: ManifestKind, namespace: string | undefined, name: string, resource: string): Promise<T> {
    const object = this.#objects.get(keyOf(kind, NAMESPACED.has(kind) ? (namespace ?? 'default') : undefined, name))
    if (!object) throw new NotFoundError(resource, name)
    return object as T
  }
}
