/**
 * The `kubevol` program: parse against the command table, dispatch, and the one top-level catch that
 * maps every error to an exit code and a one-line message.
 */
import { AgentConfigError } from '@kubevol/agent'
import { CLI_VERSION } from './version.js'
import { COMMAND_HANDLERS, type CommandDependencies } from './commands/index.js'
import { CliError, EXIT, UsageError } from './errors.js'
import type { Io } from './output.js'
import { parseCommandLine } from './parse.js'
import { renderCommandHelp, renderMainHelp } from './reference.js'

/** Runs the command line `argv` (after the program name). Resolves with the exit code; never throws. */
export async function runCli(argv: readonly string[], io: Io, deps: CommandDependencies = {}): Promise<number> {
  try {
    const result = parseCommandLine(argv)
    if (result.kind === 'help') {
      io.stdout.write(result.command ? renderCommandHelp(result.command) : renderMainHelp())
      return EXIT.ok
    }
    if (result.kind === 'version') {
      io.stdout.write(`${CLI_VERSION}\n`)
      return EXIT.ok
    }
    const { parsed } = result
    for (const w of parsed.warnings) io.stderr.write(`${w}\n`)
    if (parsed.help) {
      io.stdout.write(renderCommandHelp(parsed.command))
      return EXIT.ok
    }
    const handler = COMMAND_HANDLERS[parsed.command.name]
    if (!handler) throw new CliError(`command ${parsed.command.name} is not implemented yet`)
    return await handler(parsed, io, deps)
  } catch (err) {
    // As kubectl: `error: ...`, and after bad usage the help to read.
    const { code, message } = describeError(err)
    io.stderr.write(`error: ${message}\n`)
    if (err instanceof UsageError) io.stderr.write(`See 'kubevol ${err.command ? `${err.command} ` : ''}--help' for usage.\n`)
    return code
  }
}

/** The exit code and message of an error. */
export function describeError(err: unknown): { code: number; message: string } {
  if (err instanceof CliError) return { code: err.exitCode, message: err.message }
  if (err instanceof AgentConfigError) return { code: EXIT.usage, message: err.message }
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code
    if (code === 'EADDRINUSE') return { code: EXIT.failed, message: `${err.message} (another agent is running? pick another --port, or --port 0 for any free one)` }
    if (code === 'EACCES' || code === 'EPERM') return { code: EXIT.failed, message: `${err.message} (this needs root: run with sudo)` }
    return { code: EXIT.failed, message: err.message }
  }
  return { code: EXIT.failed, message: String(err) }
}
