/**
 * @kubevol/cli: the `kubevol` command. The command table drives parsing, help and the docs reference
 * page; `runCli` runs a command line in-process.
 *
 * The front door: every public name is listed here.
 */
export type { ArgSpec, CommandSpec, FlagAlias, FlagSpec, FlagType } from './command-table.js'
export { COMMANDS, commandOf } from './command-table.js'
export { describeError, runCli } from './cli.js'
export type { CommandDependencies, CommandHandler } from './commands/index.js'
export { COMMAND_HANDLERS } from './commands/index.js'
export { CliError, CommandFailed, EXIT, UsageError } from './errors.js'
export type { Io, OutputFormat, TableOptions } from './output.js'
export { renderData, renderTable } from './output.js'
export type { ParsedCommand, ParseResult } from './parse.js'
export { parseCommandLine, parseDuration } from './parse.js'
export { renderCommandHelp, renderConfigurationReference, renderMainHelp, renderReference } from './reference.js'
export type { CompletionShell } from './completion.js'
export { renderCompletion } from './completion.js'
export { createReadOnlyHost, MUTATING_HOST_METHODS, ReadOnlyHostError } from './read-only-host.js'
export type { OnceReport, RunDependencies, VolumeSummary } from './commands/run.js'
export { CLI_VERSION } from './version.js'
