/**
 * Shared test setup: an Io that captures output, runCli in-process, and temporary manifest dirs.
 */
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { runCli } from '../src/cli.js'
import type { CommandDependencies } from '../src/commands/index.js'
import type { Io } from '../src/output.js'

/** The repository's examples/manifests. */
export const EXAMPLES = fileURLToPath(new URL('../../../examples/manifests', import.meta.url))

/** The outcome of one command line. */
export interface CliResult {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

/** Runs `argv` in-process with captured output. */
export async function cli(argv: readonly string[], deps: CommandDependencies = {}, env: Record<string, string> = {}): Promise<CliResult> {
  let stdout = ''
  let stderr = ''
  const io: Io = {
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: (t: string) => (stderr += t) },
    isTTY: false,
    env,
    cwd: process.cwd(),
  }
  const code = await runCli(argv, io, deps)
  return { code, stdout, stderr }
}

/** A temporary copy of examples/manifests (or an empty dir), removed by `cleanup()`. */
export function manifestDir(copyExamples = true): { dir: string; write(name: string, text: string): void; cleanup(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'kubevol-cli-'))
  if (copyExamples) cpSync(EXAMPLES, dir, { recursive: true })
  return { dir, write: (name, text) => writeFileSync(join(dir, name), text), cleanup: () => rmSync(dir, { recursive: true, force: true }) }
}
