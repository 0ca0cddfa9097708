/**
 * Spawning the filesystem tools (blkid, mkfs.*, fsck, resize2fs, xfs_growfs): the only processes
 * the Linux host starts. Everything else is a system call.
 */
import { spawn } from 'node:child_process'
import { HostError } from '@kubevol/core'

/** How a tool ended. `code` is null when it was killed by a signal. */
export interface ToolResult {
  readonly code: number | null
  readonly signal: string | null
  /** stdout and stderr interleaved as they arrived (mount-utils' `CombinedOutput`). */
  readonly output: string
  readonly stdout: string
}

/** Runs one tool. */
export type ToolRunner = (command: string, args: readonly string[], path: string) => Promise<ToolResult>

/** Cap on kept output: a tool that floods stdout cannot grow the agent's memory. */
const MAX_OUTPUT = 1 << 20

/**
 * A {@link ToolRunner} over `child_process.spawn` with a deadline. A tool that is not installed
 * fails with ENOTSUP. On timeout the call fails with ETIMEDOUT and the tool is left running: killing
 * mkfs or resize2fs half-way would leave the device worse than letting it finish.
 */
export function spawnTools(timeoutMs: number, env: NodeJS.ProcessEnv = process.env): ToolRunner {
  return (command, args, path) =>
    new Promise<ToolResult>((resolve, reject) => {
      const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...env, LC_ALL: 'C' } })
      let output = ''
      let stdout = ''
      const append = (chunk: Buffer, isStdout: boolean): void => {
        const text = chunk.toString('utf8')
        if (output.length < MAX_OUTPUT) output += text
        if (isStdout && stdout.length < MAX_OUTPUT) stdout += text
      }
      child.stdout.on('data', (chunk: Buffer) => append(chunk, true))
      child.stderr.on('data', (chunk: Buffer) => append(chunk, false))
      const timer = setTimeout(() => {
        reject(new HostError('ETIMEDOUT', command, path, `${[command, ...args].join(' ')} did not finish within ${timeoutMs} ms; it is left to finish`))
      }, timeoutMs)
      timer.unref()
      child.on('error', (err: NodeJS.ErrnoException) => {
        clearTimeout(timer)
        if (err.code === 'ENOENT') reject(new HostError('ENOTSUP', command, path, `${command} is not installed (not found in PATH)`, { cause: err }))
        else reject(new HostError('EIO', command, path, err.message, { cause: err }))
      })
      child.on('close', (code, signal) => {
        clearTimeout(timer)
        resolve({ code, signal, output: output.trim(), stdout })
      })
    })
}

/** The tool's failure as a HostError: `EIO: mkfs.ext4 /dev/loop3: exit status 1: <output>`. */
export function toolError(command: string, path: string, result: ToolResult, what?: string): HostError {
  const status = result.code === null ? `killed by ${result.signal}` : `exit status ${result.code}`
  return new HostError('EIO', command, path, [what, status, result.output].filter(Boolean).join(': '))
}
