/**
 * Parses a command line against the command table with node:util parseArgs. `--no-FLAG` negates a
 * boolean flag (Node 20's parseArgs has no allowNegative), and choices and numbers are checked here,
 * so a command receives values of the right type.
 */
import { parseArgs } from 'node:util'
import { type CommandSpec, type FlagSpec, commandOf } from './command-table.js'
import { UsageError } from './errors.js'

/** A parsed command line. */
export interface ParsedCommand {
  readonly command: CommandSpec
  readonly args: readonly string[]
  /** Flag name (kebab) → value; only flags given or with a default. */
  readonly flags: Readonly<Record<string, string | number | boolean | undefined>>
  /** Flag names given on the command line (not defaulted). */
  readonly given: ReadonlySet<string>
  readonly help: boolean
}

/** What the argv asks for: a command, the command list, or the version. */
export type ParseResult =
  | { readonly kind: 'command'; readonly parsed: ParsedCommand }
  | { readonly kind: 'help'; readonly command?: CommandSpec }
  | { readonly kind: 'version' }

function convert(flag: FlagSpec, raw: string | boolean): string | number | boolean {
  if (flag.type === 'boolean') return raw
  const text = String(raw)
  if (flag.type === 'integer') {
    if (!/^-?\d+$/.test(text)) throw new UsageError(`--${flag.name}: "${text}" is not an integer`)
    return Number(text)
  }
  if (flag.type === 'number') {
    const n = Number(text)
    if (text.trim() === '' || !Number.isFinite(n)) throw new UsageError(`--${flag.name}: "${text}" is not a number`)
    return n
  }
  if (flag.choices && !flag.choices.includes(text)) {
    throw new UsageError(`--${flag.name}: "${text}" is not allowed; allowed: ${flag.choices.join(', ')}`)
  }
  return text
}

/** Parses `argv` (after the program name). Throws {@link UsageError}. */
export function parseCommandLine(argv: readonly string[]): ParseResult {
  const [name, ...rest] = argv
  if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
    const target = name === 'help' && rest[0] ? commandOf(rest[0]) : undefined
    if (name === 'help' && rest[0] && !target) throw new UsageError(`unknown command "${rest[0]}"`)
    return { kind: 'help', ...(target ? { command: target } : {}) }
  }
  if (name === '--version' || name === 'version') return { kind: 'version' }
  const command = commandOf(name)
  if (!command) throw new UsageError(`unknown command "${name}"`)

  const booleans = new Set(command.flags.filter((f) => f.type === 'boolean').map((f) => f.name))
  const tokens: string[] = []
  const negated = new Set<string>()
  for (const arg of rest) {
    const m = /^--no-([a-z0-9-]+)$/.exec(arg)
    if (m && booleans.has(m[1] as string)) negated.add(m[1] as string)
    else tokens.push(arg)
  }
  const options: Record<string, { type: 'string' | 'boolean'; short?: string }> = { help: { type: 'boolean', short: 'h' } }
  for (const f of command.flags) options[f.name] = { type: f.type === 'boolean' ? 'boolean' : 'string', ...(f.short ? { short: f.short } : {}) }
  let values: Record<string, string | boolean | undefined>
  let positionals: string[]
  try {
    ;({ values, positionals } = parseArgs({ args: tokens, options, allowPositionals: true, strict: true }) as {
      values: Record<string, string | boolean | undefined>
      positionals: string[]
    })
  } catch (err) {
    // parseArgs' messages are good but long; keep the first sentence.
    throw new UsageError(`${command.name}: ${(err as Error).message.split('. ')[0]}`)
  }
  const help = values.help === true
  const flags: Record<string, string | number | boolean | undefined> = {}
  const given = new Set<string>()
  for (const f of command.flags) {
    const raw = negated.has(f.name) ? false : values[f.name]
    if (raw !== undefined) {
      flags[f.name] = convert(f, raw)
      given.add(f.name)
    } else if (f.defaultValue !== undefined) {
      flags[f.name] = f.defaultValue
    }
  }
  if (!help) {
    const required = command.args.filter((a) => a.required)
    if (positionals.length < required.length) throw new UsageError(`${command.name}: missing ${required[positionals.length]?.name}`)
    if (positionals.length > command.args.length) throw new UsageError(`${command.name}: unexpected argument "${positionals[command.args.length]}"`)
  }
  return { kind: 'command', parsed: { command, args: positionals, flags, given, help } }
}

/** Milliseconds of a duration: `60s`, `500ms`, `2m`, `1h`, or a bare number of seconds. */
export function parseDuration(flag: string, text: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim())
  if (!m) throw new UsageError(`--${flag}: "${text}" is not a duration (like 60s, 500ms, 2m)`)
  const unit = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 }[(m[2] ?? 's') as 'ms' | 's' | 'm' | 'h']
  return Math.round(Number(m[1]) * unit)
}
