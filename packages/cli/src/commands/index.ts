/**
 * Command name → handler. Each handler resolves with the exit code, or throws a CliError.
 */
import type { Host } from '@kubevol/core'
import type { Io } from '../output.js'
import type { ParsedCommand } from '../parse.js'
import { CLI_VERSION } from '../version.js'
import { renderCompletion } from '../completion.js'
import { type StatusDependencies, explainCommand, statusCommand } from './status.js'
import { gcCommand } from './gc.js'
import { type DoctorEnvironment, doctorCommand } from './doctor.js'
import { mountsCommand } from './mounts.js'
import { planCommand } from './plan.js'
import { reconstructCommand } from './reconstruct.js'
import { type RunDependencies, runCommand } from './run.js'
import { simulateCommand } from './simulate.js'

/** What tests and embedders can give the commands. */
export interface CommandDependencies extends RunDependencies, StatusDependencies {
  /** The host of plan, reconstruct and gc, instead of `--host`. */
  readonly host?: Host
  /** What doctor's checks read. */
  readonly doctorEnvironment?: DoctorEnvironment
}

export type CommandHandler = (parsed: ParsedCommand, io: Io, deps: CommandDependencies) => Promise<number>

export const COMMAND_HANDLERS: Readonly<Record<string, CommandHandler>> = {
  run: runCommand,
  status: statusCommand,
  explain: explainCommand,
  mounts: mountsCommand,
  plan: planCommand,
  reconstruct: reconstructCommand,
  gc: gcCommand,
  doctor: doctorCommand,
  simulate: simulateCommand,
  completion: async (p, io) => {
    io.stdout.write(renderCompletion(p.args[0] as 'bash' | 'zsh'))
    return 0
  },
  version: async (_p, io) => {
    io.stdout.write(`${CLI_VERSION}\n`)
    return 0
  },
}
