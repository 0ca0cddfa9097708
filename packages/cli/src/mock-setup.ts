/**
 * The in-memory host of `run --host mock` and `plan --host mock`, prepared from the manifests so that
 * what a real node would already have exists in memory: the disk image of every fileDisk PV (a sparse
 * file of the PV's capacity) and the directory of every local PV.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { type MemoryHost, createMemoryHost } from '@kubevol/adapter-mock'
import { type ManifestObject, parseManifests } from '@kubevol/agent'
import { FILE_DISK_DRIVER, parseQuantity } from '@kubevol/core/plugins'

const MANIFEST_FILE = /\.(ya?ml|json)$/

/** Every object of the manifest files in `dir`, or of the file `dir` (errors are the agent's to report). */
export function readManifestObjects(dir: string): ManifestObject[] {
  let files: string[]
  try {
    files = statSync(dir).isFile()
      ? [dir]
      : readdirSync(dir)
          .filter((n) => MANIFEST_FILE.test(n) && !n.startsWith('.'))
          .sort()
          .map((n) => join(dir, n))
  } catch {
    return []
  }
  return files.flatMap((file) => {
    try {
      return parseManifests(readFileSync(file, 'utf8'), file).objects
    } catch {
      return []
    }
  })
}

interface PvSpec {
  capacity?: { storage?: string }
  csi?: { driver?: string; volumeHandle?: string }
  local?: { path?: string; fsType?: string }
}

function sizeOf(spec: PvSpec): number {
  try {
    const bytes = Number(parseQuantity(spec.capacity?.storage ?? '1Gi'))
    return Number.isFinite(bytes) && bytes > 0 ? bytes : 1 << 30
  } catch {
    return 1 << 30
  }
}

/** Prepares `host` for the PVs among `objects`. Idempotent. Returns what it created. */
export async function prepareMemoryHost(host: MemoryHost, objects: readonly ManifestObject[]): Promise<string[]> {
  const created: string[] = []
  for (const o of objects) {
    if (o.kind !== 'PersistentVolume') continue
    const spec = (o.object.spec ?? {}) as PvSpec
    if (spec.csi?.driver === FILE_DISK_DRIVER && spec.csi.volumeHandle?.startsWith('/') && !host.exists(spec.csi.volumeHandle)) {
      host.allocateFile(spec.csi.volumeHandle, sizeOf(spec))
      created.push(spec.csi.volumeHandle)
    }
    if (spec.local?.path?.startsWith('/') && !spec.local.fsType && !host.exists(spec.local.path)) {
      await host.mkdir(spec.local.path, { recursive: true })
      created.push(spec.local.path)
    }
  }
  return created
}

/** A memory host prepared for the manifests in `dir`. */
export async function createPreparedMemoryHost(dir: string | undefined): Promise<MemoryHost> {
  const host = createMemoryHost()
  if (dir) await prepareMemoryHost(host, readManifestObjects(dir))
  return host
}
