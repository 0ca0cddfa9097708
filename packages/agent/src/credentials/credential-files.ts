/**
 * Reads and atomic writes of the node's credential files: beneath the agent's root through the Host
 * (so the root's rule holds: no symlink followed at any level beneath it), elsewhere through node:fs.
 * A write goes to a temporary file beside the target, mode 0600, flushed, then renamed over it: a
 * reader sees the old file or the new one, never half of one.
 */
import { mkdir, open, readFile, rename, rm } from 'node:fs/promises'
import { dirname } from 'node:path'
import type { Host } from '@kubevol/core'

/** Reads and writes of files that hold keys. */
export interface CredentialFiles {
  /** The file's bytes, or `undefined` when it does not exist. */
  read(path: string): Promise<Uint8Array | undefined>
  /** Replaces `path` atomically with a file of mode 0600; its directory is made (0700) when missing. */
  writeAtomic(path: string, data: string): Promise<void>
}

const isMissing = (err: unknown): boolean => (err as { code?: unknown } | null)?.code === 'ENOENT'

/** The credential files of an agent whose root is `rootDir`, reached through `host` beneath it. */
export function createCredentialFiles(host: Host, rootDir: string): CredentialFiles {
  const root = rootDir.replace(/\/+$/, '')
  const beneathRoot = (path: string): boolean => path.startsWith(`${root}/`)
  return {
    async read(path) {
      try {
        return beneathRoot(path) ? await host.readFile(path) : new Uint8Array(await readFile(path))
      } catch (err) {
        if (isMissing(err)) return undefined
        throw err
      }
    },
    async writeAtomic(path, data) {
      const tmp = `${dirname(path)}/.${path.slice(dirname(path).length + 1)}.tmp`
      if (beneathRoot(path)) {
        await host.mkdir(dirname(path), { recursive: true, mode: 0o700 })
        // A temporary file left by a crash may have another mode: start from none.
        if ((await host.lstat(tmp)) !== null) await host.remove(tmp)
        await host.writeFile(tmp, data, { mode: 0o600 })
        await host.chmod(tmp, 0o600)
        await host.syncFile?.(tmp)
        await host.rename(tmp, path)
        return
      }
      await mkdir(dirname(path), { recursive: true, mode: 0o700 })
      await rm(tmp, { force: true })
      const file = await open(tmp, 'wx', 0o600)
      try {
        await file.writeFile(data)
        await file.sync()
      } finally {
        await file.close()
      }
      await rename(tmp, path)
    },
  }
}
