/**
 * Runs one container with an OCI runtime (`crun run`), in the foreground: its output is collected,
 * and it is deleted by the runtime once it exits.
 */
import { spawn } from 'node:child_process'

export interface RuntimeOptions {
  /** The runtime's binary. @default 'crun' */
  readonly runtime?: string
  /** The runtime's state directory (`--root`). @default the runtime's own (`/run/crun`) */
  readonly stateDir?: string
}

/** How a container ended. */
export interface ContainerExit {
  readonly id: string
  readonly exitCode: number | null
  readonly stdout: string
  readonly stderr: string
}

/** A running container: `exited` settles when its process (and the runtime) ended. */
export interface RunningContainer {
  readonly id: string
  readonly exited: Promise<ContainerExit>
  /** Sends SIGKILL to the container's process through the runtime. */
  kill(): Promise<void>
}

function runtimeArgs(options: RuntimeOptions, ...args: string[]): string[] {
  return [...(options.stateDir ? ['--root', options.stateDir] : []), ...args]
}

/** `crun run --bundle <bundle> <id>`: starts the container and follows it until it exits. */
export function startContainer(id: string, bundle: string, options: RuntimeOptions = {}): RunningContainer {
  const runtime = options.runtime ?? 'crun'
  const child = spawn(runtime, runtimeArgs(options, 'run', '--bundle', bundle, id), { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk))
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
  const exited = new Promise<ContainerExit>((resolve, reject) => {
    child.once('error', reject)
    child.once('close', (exitCode) => resolve({ id, exitCode, stdout, stderr }))
  })
  return {
    id,
    exited,
    kill: () =>
      new Promise<void>((resolve) => {
        spawn(runtime, runtimeArgs(options, 'kill', id, 'KILL'), { stdio: 'ignore' }).once('close', () => resolve())
      }),
  }
}
