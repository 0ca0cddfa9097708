/**
 * Reading a manifest directory into files, and the files into pods and objects: the parts of the
 * manifest source that do not watch or schedule.
 */
import { createHash } from 'node:crypto'
import { readFile, readdir, stat } from 'node:fs/promises'
import { extname, join } from 'node:path'
import { type Logger, type Pod, errorMessage } from '@kubevol/core'
import { type ManifestError, type ManifestKind, type ManifestObject, parseManifests } from './manifest-parser.js'

/** What the source keeps of one file between reads. */
export interface FileState {
  text: string
  objects: ManifestObject[]
  errors: ManifestError[]
  lastClean: ManifestObject[] | undefined
}

const EXTENSIONS = new Set(['.yaml', '.yml', '.json'])
/** The largest manifest file read: 4 MiB (the API server's largest object is 1.5 MiB). */
const MAX_MANIFEST_BYTES = 4 * 1024 * 1024
export const NAMESPACED = new Set<ManifestKind>(['Pod', 'PersistentVolumeClaim', 'ConfigMap', 'Secret'])

export function nameOf(o: ManifestObject): { namespace?: string; name: string } {
  const meta = o.object.metadata as { name: string; namespace?: string }
  return NAMESPACED.has(o.kind) ? { namespace: meta.namespace ?? 'default', name: meta.name } : { name: meta.name }
}

export function keyOf(kind: string, namespace: string | undefined, name: string): string {
  return `${kind}/${namespace ?? ''}/${name}`
}

/** The kubelet's static pod UID: md5 of the pod, the host and the source file. */
export function staticPodUID(pod: unknown, nodeName: string, file: string): string {
  return createHash('md5').update(JSON.stringify(pod)).update(`host:${nodeName}`).update(`file:${file}`).digest('hex')
}

/**
 * Reads the files of `dir` (or `dir` itself when it is a file) into `files`: a file unchanged since
 * the last read is not parsed again, a file with errors keeps the objects of its last clean read,
 * a file gone is dropped. `reading.missingLogged` keeps an unreadable directory to one warning.
 */
export async function readManifestFiles(dir: string, files: Map<string, FileState>, reading: { missingLogged: boolean }, logger: Logger): Promise<void> {
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
    reading.missingLogged = false
  } catch (err) {
    if (!reading.missingLogged) logger.warn('Cannot read the manifest directory; no static pods', { dir, err: errorMessage(err) })
    reading.missingLogged = true
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

/** The pods and objects the files define, first definition wins (by file name); later ones are conflicts. */
export function indexManifests(
  files: ReadonlyMap<string, FileState>,
  nodeName: string,
): { pods: Pod[]; objects: Map<string, Record<string, unknown>>; conflicts: ManifestError[] } {
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
  return { pods: nextPods, objects: nextObjects, conflicts: nextConflicts }
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
