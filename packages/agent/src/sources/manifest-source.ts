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
import { createHash } from 'node:crypto'
import { type FSWatcher, watch as watchDir } from 'node:fs'
import { readFile, readdir, stat } from 'node:fs/promises'
import { extname, join } from 'node:path'
import {
  type CSIDriver,
  type ConfigMap,
  type Logger,
  NotFoundError,
  type ObjectReader,
  type PersistentVolume,
  type PersistentVolumeClaim,
  type Pod,
  type Secret,
  errorMessage,
} from '@kubevol/core'
import { type ManifestError, type ManifestKind, type ManifestObject, parseManifests } from './manifest-parser.js'
import { type PodStore, createPodStore } from './pod-store.js'

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

interface FileState {
  text: string
  objects: ManifestObject[]
  errors: ManifestError[]
  lastClean: ManifestObject[] | undefined
}

const EXTENSIONS = new Set(['.yaml', '.yml', '.json'])
/** The largest manifest file read: 4 MiB (the API server's largest object is 1.5 MiB). */
const MAX_MANIFEST_BYTES = 4 * 1024 * 1024
const NAMESPACED = new Set<ManifestKind>(['Pod', 'PersistentVolumeClaim', 'ConfigMap', 'Secret'])

function nameOf(o: ManifestObject): { namespace?: string; name: string } {
  const meta = o.object.metadata as { name: string; namespace?: string }
  return NAMESPACED.has(o.kind) ? { namespace: meta.namespace ?? 'default', name: meta.name } : { name: meta.name }
}

function keyOf(kind: string, namespace: string | undefined, name: string): string {
  return `${kind}/${namespace ?? ''}/${name}`
}

/** The kubelet's static pod UID: md5 of the pod, the host and the source file. */
export function staticPodUID(pod: unknown, nodeName: string, file: string): string {
  return createHash('md5').update(JSON.stringify(pod)).update(`host:${nodeName}`).update(`file:${file}`).digest('hex')
}

/** Creates the manifest-directory source. Nothing is read before `start()` or `scan()`. */
export function createManifestSource(options: ManifestSourceOptions): ManifestSource {
  const { dir, nodeName, logger } = options
  const rescanMs = options.rescanMs ?? 20_000
  const debounceMs = options.debounceMs ?? 25
  const pods = createPodStore()
  const files = new Map<string, FileState>()
  let objects = new Map<string, Record<string, unknown>>()
  let objectsSignature = ''
  let conflicts: ManifestError[] = []
  const objectListeners = new Set<() => void>()
  let watcher: FSWatcher | undefined
  let rescanTimer: NodeJS.Timeout | undefined
  let debounceTimer: NodeJS.Timeout | undefined
  let stopped = true
  let scanning: Promise<void> | undefined
  let again = false
  let missingLogged = false

  const startWatch = (): void => {
    if (watcher || stopped) return
    try {
      watcher = watchDir(dir, { persistent: false }, () => scheduleScan())
      watcher.on('error', (err) => {
        logger.warn('Watching the manifest directory failed; reading it periodically', { dir, err: errorMessage(err) })
        watcher?.close()
        watcher = undefined
      })
    } catch {
      // The directory does not exist (yet): the periodic read finds it.
    }
  }

  const scheduleScan = (): void => {
    if (stopped || debounceTimer) return
    debounceTimer = setTimeout(() => {
      debounceTimer = undefined
      void source.scan()
    }, debounceMs)
    debounceTimer.unref?.()
  }

  const readFiles = async (): Promise<void> => {
    let paths: string[]
    try {
      // One file is read as it is, whatever its name, as the kubelet reads a --pod-manifest-path file.
      if ((await stat(dir)).isFile()) paths = [dir]
      else {
        const entries = await readdir(dir, { withFileTypes: true })
        paths = entries
          .filter((e) => (e.isFile() || e.isSymbolicLink()) && !e.name.startsWith('.') && EXTENSIONS.has(extname(e.name).toLowerCase()))
          .map((e) => join(dir, e.name))
          .sort()
      }
      missingLogged = false
    } catch (err) {
      if (!missingLogged) logger.warn('Cannot read the manifest directory; no static pods', { dir, err: errorMessage(err) })
      missingLogged = true
      paths = []
    }
    const seen = new Set<string>()
    for (const file of paths) {
      let text: string
      try {
        // A manifest is small (the API server refuses objects over 1.5 MiB): a huge file is refused
        // before it is read, so that it cannot exhaust the agent's memory.
        const size = (await stat(file)).size
        if (size > MAX_MANIFEST_BYTES) {
          seen.add(file)
          const reason = `the file is ${size} bytes, more than the ${MAX_MANIFEST_BYTES} a manifest file may have`
          if (files.get(file)?.errors[0]?.reason !== reason) logger.warn('Invalid manifest', { file, line: 1, reason })
          const prev = files.get(file)
          // No text was read: a marker no file read as UTF-8 holds, so the next read parses again.
          files.set(file, { text: '\u0000', objects: prev?.lastClean ?? [], errors: [{ file, line: 1, reason }], lastClean: prev?.lastClean })
          continue
        }
        text = await readFile(file, 'utf8')
      } catch (err) {
        // Removed between readdir and read, or a dangling symlink: it is not there.
        logger.debug('Cannot read manifest file', { file, err: errorMessage(err) })
        continue
      }
      seen.add(file)
      const prev = files.get(file)
      if (prev && prev.text === text) continue
      const parsed = parseManifests(text, file)
      for (const error of parsed.errors) logger.warn('Invalid manifest', { file: error.file, line: error.line, reason: error.reason })
      if (parsed.errors.length === 0) {
        files.set(file, { text, objects: parsed.objects, errors: [], lastClean: parsed.objects })
      } else {
        files.set(file, { text, objects: prev?.lastClean ?? parsed.objects, errors: parsed.errors, lastClean: prev?.lastClean })
      }
    }
    for (const file of [...files.keys()]) if (!seen.has(file)) files.delete(file)
  }

  const rebuild = (): void => {
    const nextPods: Pod[] = []
    const nextObjects = new Map<string, Record<string, unknown>>()
    const defined = new Map<string, ManifestObject>()
    const nextConflicts: ManifestError[] = []
    for (const [file, state] of [...files.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      for (const o of state.objects) {
        const { namespace, name } = nameOf(o)
        const key = keyOf(o.kind, namespace, name)
        const first = defined.get(key)
        if (first) {
          nextConflicts.push({ file, line: o.line, reason: `${o.kind} ${namespace ? `${namespace}/` : ''}${name} is already defined in ${first.file}:${first.line}; this one is ignored` })
          continue
        }
        defined.set(key, o)
        if (o.kind !== 'Pod') {
          nextObjects.set(key, withNamespace(o.object, namespace))
          continue
        }
        const pod = toStaticPod(o.object, nodeName, file, namespace ?? 'default')
        if (pod) nextPods.push(pod)
      }
    }
    conflicts = nextConflicts
    const signature = JSON.stringify([...nextObjects.entries()])
    objects = nextObjects
    if (signature !== objectsSignature) {
      objectsSignature = signature
      for (const listener of [...objectListeners]) listener()
    }
    pods.replaceAll(nextPods)
    pods.setReady(true)
  }

  const get = async <T>(kind: ManifestKind, namespace: string | undefined, name: string, resource: string): Promise<T> => {
    const object = objects.get(keyOf(kind, NAMESPACED.has(kind) ? (namespace ?? 'default') : undefined, name))
    if (!object) throw new NotFoundError(resource, name)
    return object as T
  }

  const source: ManifestSource = {
    pods,
    objects: {
      getPersistentVolumeClaim: (ns, name) => get<PersistentVolumeClaim>('PersistentVolumeClaim', ns, name, 'persistentvolumeclaims'),
      getPersistentVolume: (name) => get<PersistentVolume>('PersistentVolume', undefined, name, 'persistentvolumes'),
      getConfigMap: (ns, name) => get<ConfigMap>('ConfigMap', ns, name, 'configmaps'),
      getSecret: (ns, name) => get<Secret>('Secret', ns, name, 'secrets'),
      getCSIDriver: (name) => get<CSIDriver>('CSIDriver', undefined, name, 'csidrivers.storage.k8s.io'),
      // Every change the directory's files make is announced once a scan finds it.
      announcesChanges: true,
      subscribe(listener) {
        objectListeners.add(listener)
        return () => objectListeners.delete(listener)
      },
    },
    async start() {
      stopped = false
      await source.scan()
      startWatch()
      const tick = (): void => {
        rescanTimer = setTimeout(() => {
          startWatch()
          void source.scan().finally(() => {
            if (!stopped) tick()
          })
        }, rescanMs)
        rescanTimer.unref?.()
      }
      tick()
    },
    stop() {
      stopped = true
      watcher?.close()
      watcher = undefined
      if (rescanTimer) clearTimeout(rescanTimer)
      if (debounceTimer) clearTimeout(debounceTimer)
      rescanTimer = debounceTimer = undefined
    },
    scan() {
      // Reads never overlap: a request during a read runs one more read after it.
      if (scanning) {
        again = true
        return scanning
      }
      const run = async (): Promise<void> => {
        do {
          again = false
          await readFiles()
          rebuild()
        } while (again)
      }
      scanning = run().finally(() => {
        scanning = undefined
      })
      return scanning
    },
    errors() {
      return [...[...files.values()].flatMap((f) => f.errors), ...conflicts]
    },
    files() {
      return [...files.entries()].map(([file, state]) => ({
        file,
        objects: state.objects.map((o) => ({ kind: o.kind, ...nameOf(o), line: o.line })),
        errors: state.errors,
        heldFromLastCleanRead: state.errors.length > 0 && state.lastClean !== undefined,
      }))
    },
  }
  return source
}

function withNamespace(object: Record<string, unknown>, namespace: string | undefined): Record<string, unknown> {
  if (namespace === undefined) return object
  const metadata = object.metadata as Record<string, unknown>
  return { ...object, metadata: { ...metadata, namespace } }
}

/** The pod as this node runs it, or undefined when it names another node. */
function toStaticPod(object: Record<string, unknown>, nodeName: string, file: string, namespace: string): Pod | undefined {
  const pod = object as unknown as Pod
  const boundTo = pod.spec?.nodeName
  if (boundTo && boundTo !== nodeName) return undefined
  const uid = pod.metadata.uid ?? staticPodUID(object, nodeName, file)
  return {
    ...pod,
    metadata: {
      ...pod.metadata,
      namespace,
      uid,
      annotations: { ...pod.metadata.annotations, 'kubernetes.io/config.source': 'file', 'kubernetes.io/config.hash': uid },
    },
    spec: { ...pod.spec, nodeName },
  }
}
