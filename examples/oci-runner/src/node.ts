/**
 * A node in one process: the Linux host, a volume manager on it with in-memory pod and object
 * sources, and the runner. What `kubevol-oci-runner` runs a manifest with.
 */
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { createLinuxHost } from '@kubevol/adapter-linux'
import { type Logger, type Pod, type StoredObject, createMemoryObjectReader, createMemoryPodSource, createVolumeManager, silentLogger } from '@kubevol/core'
import { createBuiltinPlugins } from '@kubevol/core/plugins'
import { parseAllDocuments } from 'yaml'
import type { ContainerExit, RuntimeOptions } from './container.js'
import { busyboxRootfs } from './rootfs.js'
import { runPod } from './run-pod.js'

export interface NodeOptions {
  /** The volume manager's root. @default '/var/lib/kubevol' */
  readonly rootDir?: string
  /** Bundles, the busybox root file system and the runtime's state. */
  readonly workDir: string
  /** @default '/bin/busybox' */
  readonly busybox?: string
  readonly runtime?: RuntimeOptions
  readonly logger?: Logger
}

const OBJECT_KINDS = ['ConfigMap', 'Secret', 'PersistentVolumeClaim', 'PersistentVolume'] as const

/**
 * Runs every Pod of a manifest (YAML, documents separated by `---`) one after the other, with the
 * ConfigMaps, Secrets, claims and volumes it holds; resolves with each pod's container exits once
 * its volumes are unmounted and detached again.
 */
export async function runManifest(manifest: string, options: NodeOptions): Promise<Map<string, ContainerExit[]>> {
  const rootDir = options.rootDir ?? '/var/lib/kubevol'
  const docs = parseAllDocuments(manifest).map((d) => d.toJS() as { kind?: string } | null)
  const objects = createMemoryObjectReader()
  for (const doc of docs) {
    const kind = OBJECT_KINDS.find((k) => k === doc?.kind)
    if (kind) objects.put(kind, doc as StoredObject)
  }
  const podsToRun = docs.filter((d): d is Pod & { kind: 'Pod' } => d?.kind === 'Pod')
  const host = createLinuxHost()
  // One manager per root: the lock is the kernel's, released when this process exits.
  const lock = await host.lockRoot(rootDir)
  if (!lock.locked) throw new Error(`${rootDir} is held by another process (pid ${lock.holderPid ?? 'unknown'})`)
  const pods = createMemoryPodSource()
  const manager = createVolumeManager({
    host,
    plugins: createBuiltinPlugins(),
    podSource: pods,
    objects,
    nodeName: 'oci-runner',
    rootDir,
    // No attach/detach controller: the manager attaches what it mounts (a fileDisk's loop device).
    controllerAttachDetach: false,
    logger: options.logger ?? silentLogger,
  })
  const stop = new AbortController()
  const running = manager.run(stop.signal)
  const rootfs = busyboxRootfs(join(options.workDir, 'rootfs'), options.busybox)
  const stateDir = join(options.workDir, 'state')
  mkdirSync(stateDir, { recursive: true })
  const results = new Map<string, ContainerExit[]>()
  try {
    for (const pod of podsToRun) {
      const exits = await runPod(pod, { manager, pods, rootfs, bundlesDir: join(options.workDir, 'bundles'), runtime: { stateDir, ...options.runtime } })
      results.set(`${pod.metadata.namespace ?? 'default'}/${pod.metadata.name}`, exits)
    }
    // The pods are gone: their devices are unmounted and detached before the manager stops.
    while (manager.snapshot().attached.length > 0) await new Promise((resolve) => setTimeout(resolve, 100))
  } finally {
    stop.abort()
    await running
    await lock.release()
    host.close()
  }
  return results
}
