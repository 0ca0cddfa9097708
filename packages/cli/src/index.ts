/**
 * @kubevol/cli: the `kubevol` command. The command table drives parsing, help and the docs reference
 * page; `runCli` runs a command line in-process.
 *
 * The front door, small on purpose since the package is mostly its `kubevol` bin: `runCli` with
 * what it is given, the command table and the reference pages rendered from it (the docs site
 * uses them), the exit codes and errors, and the version. The command handlers, output renderers
 * and the read-only host are not public.
 */
export { runCli } from './cli.js'
export type { CommandDependencies } from './commands/index.js'
export type { Io, OutputFormat } from './output.js'
export type { ArgSpec, CommandSpec, FlagAlias, FlagSpec, FlagType } from './command-table.js'
export { COMMANDS } from './command-table.js'
export type { ParsedCommand, ParseResult } from './parse.js'
export { parseCommandLine } from './parse.js'
export { renderConfigurationReference, renderReference } from './reference.js'
export { CliError, CommandFailed, EXIT, UsageError } from './errors.js'
export type { OnceReport, RunDependencies, VolumeSummary } from './commands/run.js'
export { CLI_VERSION } from './version.js'
