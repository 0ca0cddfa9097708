/**
 * The CLI's errors: each carries the exit code the top-level catch in `cli.ts` maps it to. Any other
 * error exits 1 with its message.
 */

/** Exit codes, as `--help` documents them. */
export const EXIT = {
  ok: 0,
  /** A command ran and found a problem: not converged, a check failed, a cleanup refused. */
  failed: 1,
  /** Bad usage: an unknown flag or command, a missing or invalid value. */
  usage: 2,
  /** The agent could not be reached. */
  unreachable: 3,
} as const

/** An error the CLI expected; `exitCode` says how the process ends. */
export class CliError extends Error {
  readonly exitCode: number
  constructor(message: string, exitCode: number = EXIT.failed, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'CliError'
    this.exitCode = exitCode
  }
}

/** Bad usage: exit 2 with a hint to `--help` (the command's, when `command` is given). */
export class UsageError extends CliError {
  /** The command whose `--help` the hint names. */
  readonly command: string | undefined
  constructor(message: string, command?: string) {
    super(message, EXIT.usage)
    this.name = 'UsageError'
    this.command = command
  }
}

/** A command finished and reports failure (the report is already printed). */
export class CommandFailed extends CliError {
  constructor(message: string) {
    super(message, EXIT.failed)
    this.name = 'CommandFailed'
  }
}
