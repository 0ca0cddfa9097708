/**
 * Parses a command line against the command table with node:util parseArgs, as kubectl's flags read:
 * `--flag value`, `--flag=value`, `-v 4`, a boolean alone or as `--flag=true|false`, and `--no-FLAG`
 * (Node 20's parseArgs has no allowNegative). Deprecated spellings are read under the flag's name with
 * a warning; choices, numbers and durations are checked here, so a command receives values of the
 * right type.
 */
import { parseArgs } from 'node:util'
import { parseDuration as parseGoDuration } from '@kubevol/agent'
import { type CommandSpec, type FlagAlias, type FlagSpec, commandOf } from './command-table.js'
import { UsageError } from './errors.js'

/** A parsed command line. */
export interface ParsedCommand {
  readonly command: CommandSpec
  readonly args: readonly string[]
  /** Flag name (kebab) → value; only flags given or with a default. A duration is in milliseconds. */
  readonly flags: Readonly<Record<string, string | number | boolean | undefined>>
  /** Flag names given on the command line (not defaulted). */
  readonly given: ReadonlySet<string>
  readonly help: boolean
  /** `Flag --root has been deprecated, use --root-dir instead`: one line each, for stderr. */
  readonly warnings: readonly string[]
}

/** What the argv asks for: a command, the command list, or the version. */
export type ParseResult =
  | { readonly kind: 'command'; readonly parsed: ParsedCommand }
  | { readonly kind: 'help'; readonly command?: CommandSpec }
  | { readonly kind: 'version' }

const DURATION_WORDS = 'a duration such as 60s, 500ms or 2m'
const invalid = (command: CommandSpec, text: string, flag: string, allowed: string) =>
  new UsageError(`invalid argument "${text}" for "--${flag}" flag: ${allowed}`, command.name)

/** Milliseconds of a duration (`60s`, `500ms`, `2m`, `1h30m`, `0`). Throws {@link UsageError} naming the flag. */
export function parseDuration(flag: string, text: string): number {
  const ms = parseGoDuration(text)
  if (ms === undefined) throw new UsageError(`invalid argument "${text}" for "--${flag}" flag: not ${DURATION_WORDS}`)
  return ms
}

function convert(command: CommandSpec, flag: FlagSpec, raw: string | boolean, alias: FlagAlias | undefined): string | number | boolean {
  if (flag.type === 'boolean') return raw
  const text = String(raw)
  switch (flag.type) {
    case 'integer':
      if (!/^-?\d+$/.test(text)) throw invalid(command, text, flag.name, 'not an integer')
      return Number(text)
    case 'number': {
      const n = Number(text)
      if (text.trim() === '' || !Number.isFinite(n)) throw invalid(command, text, flag.name, 'not a number')
      return n
    }
    case 'duration': {
      // The old `--*-ms` spellings took bare milliseconds.
      if (alias?.unit === 'ms' && /^\d+$/.test(text)) return Number(text)
      const ms = parseGoDuration(text)
      if (ms === undefined) throw invalid(command, text, flag.name, `not ${DURATION_WORDS}`)
      return ms
    }
    default:
      if (flag.choices && !flag.choices.includes(text)) throw invalid(command, text, flag.name, `allowed: ${flag.choices.join(', ')}`)
      return text
  }
}

const TRUE = new Set(['true', '1', 't'])
const FALSE = new Set(['false', '0', 'f'])

/** parseArgs' error as kubectl (cobra) words it. */
function usageOf(err: unknown, command: CommandSpec): UsageError {
  const e = err as { code?: string; message: string }
  const option = /'(-{1,2}[^' ]+)/.exec(e.message)?.[1]
  if (e.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && option) {
    return new UsageError(option.startsWith('--') ? `unknown flag: ${option}` : `unknown shorthand flag: '${option.slice(1)}' in ${option}`, command.name)
  }
  if (e.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && option) {
    const long = /--([a-z0-9-]+)/.exec(e.message)?.[0]
    return new UsageError(`flag needs an argument: ${long ?? option}`, command.name)
  }
  return new UsageError(e.message.split('. ')[0] as string, command.name)
}

/** Parses `argv` (after the program name). Throws {@link UsageError}. */
export function parseCommandLine(argv: readonly string[]): ParseResult {
  const [name, ...rest] = argv
  if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
    const target = name === 'help' && rest[0] ? commandOf(rest[0]) : undefined
    if (name === 'help' && rest[0] && !target) throw new UsageError(`unknown command "${rest[0]}" for "kubevol"`)
    return { kind: 'help', ...(target ? { command: target } : {}) }
  }
  if (name === '--version') return { kind: 'version' }
  if (name.startsWith('-')) throw new UsageError(`unknown flag: ${name.split('=')[0]} (a flag goes after the command)`)
  const command = commandOf(name)
  if (!command) throw new UsageError(`unknown command "${name}" for "kubevol"`)

  // Every spelling of a flag (its name and deprecated aliases) → the flag.
  const byName = new Map<string, { flag: FlagSpec; alias?: FlagAlias }>()
  for (const f of command.flags) {
    byName.set(f.name, { flag: f })
    for (const a of f.aliases ?? []) byName.set(a.name, { flag: f, alias: a })
  }
  const tokens: string[] = []
  const negated = new Set<string>()
  for (const arg of rest) {
    if (arg === '--') {
      tokens.push(arg)
      continue
    }
    // `--flag=false` and `--no-flag` for a boolean; parseArgs itself takes only `--flag`.
    const withValue = /^--([a-z0-9-]+)=(.*)$/.exec(arg)
    const boolWithValue = withValue ? byName.get(withValue[1] as string) : undefined
    if (withValue && boolWithValue?.flag.type === 'boolean') {
      const value = (withValue[2] as string).toLowerCase()
      if (TRUE.has(value)) tokens.push(`--${withValue[1]}`)
      else if (FALSE.has(value)) negated.add(withValue[1] as string)
      else throw invalid(command, withValue[2] as string, boolWithValue.flag.name, 'true or false')
      continue
    }
    const m = /^--no-([a-z0-9-]+)$/.exec(arg)
    if (m && !byName.has(`no-${m[1]}`) && byName.get(m[1] as string)?.flag.type === 'boolean') negated.add(m[1] as string)
    else tokens.push(arg)
  }
  const options: Record<string, { type: 'string' | 'boolean'; short?: string }> = { help: { type: 'boolean', short: 'h' } }
  for (const [spelling, { flag }] of byName) {
    options[spelling] = { type: flag.type === 'boolean' ? 'boolean' : 'string', ...(flag.short && spelling === flag.name ? { short: flag.short } : {}) }
  }
  let values: Record<string, string | boolean | undefined>
  let positionals: string[]
  try {
    ;({ values, positionals } = parseArgs({ args: tokens, options, allowPositionals: true, strict: true }) as {
      values: Record<string, string | boolean | undefined>
      positionals: string[]
    })
  } catch (err) {
    throw usageOf(err, command)
  }
  for (const n of negated) values[n] = false
  const help = values.help === true
  const flags: Record<string, string | number | boolean | undefined> = {}
  const given = new Set<string>()
  const warnings: string[] = []
  for (const [spelling, { flag, alias }] of byName) {
    const raw = values[spelling]
    if (raw === undefined) continue
    if (alias) warnings.push(`Flag --${alias.name} has been deprecated, use --${flag.name} instead`)
    flags[flag.name] = convert(command, flag, raw, alias)
    given.add(flag.name)
  }
  for (const f of command.flags) if (!given.has(f.name) && f.defaultValue !== undefined) flags[f.name] = f.defaultValue
  if (!help) {
    const required = command.args.filter((a) => a.required)
    if (positionals.length < required.length) throw new UsageError(`${command.name}: missing ${required[positionals.length]?.name}`, command.name)
    if (positionals.length > command.args.length) throw new UsageError(`${command.name}: unexpected argument "${positionals[command.args.length]}"`, command.name)
    const first = positionals[0]
    if (command.argChoices && first !== undefined && !command.argChoices.includes(first)) {
      throw new UsageError(`${command.name}: "${first}" is not supported; supported: ${command.argChoices.join(', ')}`, command.name)
    }
  }
  return { kind: 'command', parsed: { command, args: positionals, flags, given, help, warnings } }
}
