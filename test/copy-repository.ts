/** A copy of the repository for tests that run the project's own tools on it (changesets, turbo). */
import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { cp, mkdir, symlink } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

export const run = promisify(execFile)
export const repoRoot = fileURLToPath(new URL('..', import.meta.url))

/**
 * Copies the tracked files, as they are in the work tree, into `into`, links the repository's
 * node_modules, and commits them in a new git repository on `main` (changesets diffs against it,
 * turbo hashes through git).
 */
export async function copyRepository(into: string): Promise<void> {
  const { stdout } = await run('git', ['ls-files', '-z'], { cwd: repoRoot, maxBuffer: 64 * 1024 * 1024 })
  for (const path of stdout.split('\0').filter(Boolean)) {
    if (!existsSync(join(repoRoot, path))) continue // deleted in the work tree, not yet committed
    await mkdir(dirname(join(into, path)), { recursive: true })
    await cp(join(repoRoot, path), join(into, path))
  }
  await symlink(join(repoRoot, 'node_modules'), join(into, 'node_modules'))
  const git = (...args: string[]) => run('git', ['-c', 'user.name=copy', '-c', 'user.email=copy@localhost', ...args], { cwd: into })
  await git('init', '-q', '-b', 'main')
  await git('add', '--', '.')
  await git('commit', '-q', '--no-verify', '-m', 'copy')
}
