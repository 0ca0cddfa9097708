/**
 * Shared test setup for the agent's tests: polling with a deadline (never a fixed sleep), HTTP reads
 * of the status endpoints, temporary manifest directories, and a fake attach/detach controller.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { MemoryHost } from '@kubevol/adapter-mock'
import type { FakeApiServer } from '../src/testing/index.js'

/** Whether @kubevol/adapter-linux (an optional peer of the agent) is installed, for the Linux-host tests. */
export function adapterLinuxInstalled(): boolean {
  try {
    createRequire(import.meta.url).resolve('@kubevol/adapter-linux/package.json')
    return true
  } catch {
    return false
  }
}

/** Resolves once `check()` holds (checked every 10 ms), failing after `timeoutMs` with `what`. */
export async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await check()) return
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

/** GET of a status endpoint: the status and the body (JSON when it is). */
export async function get(url: string, token?: string): Promise<{ status: number; text: string; json: () => unknown }> {
  const res = await fetch(url, token ? { headers: { authorization: `Bearer ${token}` } } : {})
  const text = await res.text()
  return { status: res.status, text, json: () => JSON.parse(text) }
}

/** A temporary directory, removed by `cleanup()`. */
export function tempDir(prefix = 'kubevol-agent-'): { dir: string; write(name: string, text: string): void; cleanup(): void } {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  return {
    dir,
    write: (name, text) => writeFileSync(join(dir, name), text),
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  }
}

/** Paths under the root directory that are mount points of pod volumes. */
export function podMounts(host: MemoryHost, root = '/var/lib/kubevol'): string[] {
  return host.mountTargets().filter((t) => t.startsWith(`${root}/pods/`))
}

/**
 * The attach/detach controller's part, for controller-attach tests: a fileDisk volume reported in
 * `volumesInUse` is attached on the (memory) host and listed in `volumesAttached`; one no longer in
 * use is detached and unlisted.
 */
export function startFakeAttachDetachController(api: FakeApiServer, host: MemoryHost, nodeName: string): () => void {
  let busy = false
  let again = false
  const images = (): Map<string, string> => {
    const byHandle = new Map<string, string>()
    for (const pv of api.list('PersistentVolume')) {
      const csi = (pv.spec as { csi?: { driver?: string; volumeHandle?: string } } | undefined)?.csi
      if (csi?.driver === 'filedisk.kubevol.io' && csi.volumeHandle) byHandle.set(csi.volumeHandle, csi.volumeHandle)
    }
    return byHandle
  }
  const sync = async (): Promise<void> => {
    if (busy) {
      again = true
      return
    }
    busy = true
    try {
      do {
        again = false
        const node = api.get('Node', undefined, nodeName)
        const status = (node?.status ?? {}) as { volumesInUse?: string[]; volumesAttached?: { name: string; devicePath: string }[] }
        const inUse = status.volumesInUse ?? []
        const attached = status.volumesAttached ?? []
        const next = attached.filter((a) => inUse.includes(a.name))
        for (const gone of attached.filter((a) => !inUse.includes(a.name))) {
          const image = [...images().keys()].find((h) => gone.name.endsWith(h))
          for (const device of image ? ((await host.loopDevices?.find(image)) ?? []) : []) await host.loopDevices?.detach(device)
        }
        for (const name of inUse.filter((n) => !attached.some((a) => a.name === n))) {
          const image = [...images().keys()].find((h) => name.endsWith(h))
          if (!image) continue
          const [existing] = (await host.loopDevices?.find(image)) ?? []
          next.push({ name, devicePath: existing ?? ((await host.loopDevices?.attach(image)) as string) })
        }
        if (JSON.stringify(next) !== JSON.stringify(attached)) api.patch('Node', undefined, nodeName, { status: { volumesAttached: next } }, { subresource: 'status' })
      } while (again)
    } finally {
      busy = false
    }
  }
  return api.store.subscribe((change) => {
    if (change.resource.plural === 'nodes' && change.object.metadata.name === nodeName) void sync()
  })
}
