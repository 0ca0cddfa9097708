/**
 * Configuration from defaults, an optional file, the environment and flags (each later one wins),
 * validated against the option table. A bad value fails with the key, the value, where it came from
 * and what is allowed.
 */
import { ConfigError } from '@kubevol/core'
import { parse as parseYaml } from 'yaml'
import type * as z from 'zod/mini'
import {
  AGENT_OPTIONS,
  type AgentConfigInput,
  type AgentOption,
  type ResolvedAgentConfig,
  type OptionAlias,
  agentConfigSchema,
  optionOf,
  optionOfFlag,
  resolveModeDefaults,
} from './options.js'

/** One refused value. */
export interface ConfigProblem {
  /** The option key (`mode`), or the flag or variable when it names no option. */
  readonly key: string
  readonly value: unknown
  /** `--mode`, `KUBEVOL_MODE`, `config file /etc/kubevol/agent.yaml`, or `startAgent`. */
  readonly source: string
  /** What is allowed, in words. */
  readonly allowed: string
}

/** The configuration is invalid; `problems` lists every refused value. */
export class AgentConfigError extends ConfigError {
  readonly problems: readonly ConfigProblem[]
  constructor(problems: readonly ConfigProblem[]) {
    super(`invalid configuration:\n${problems.map((p) => `  ${formatProblem(p)}`).join('\n')}`)
    this.problems = problems
  }
}

function formatProblem(p: ConfigProblem): string {
  return `${p.key}: ${JSON.stringify(p.value) ?? String(p.value)} (from ${p.source}) is not allowed; allowed: ${p.allowed}`
}

/** Where each key's value came from, for error messages. */
type Sources = Map<string, string>

/**
 * Validates a configuration object and fills in the defaults. Throws {@link AgentConfigError}.
 * `sources` says where each key came from (default: `startAgent`).
 */
export function resolveAgentConfig(input: AgentConfigInput, sources: Sources = new Map()): ResolvedAgentConfig {
  const result = agentConfigSchema.safeParse(input)
  if (!result.success) throw new AgentConfigError(problemsOf(result.error.issues, input as Record<string, unknown>, sources))
  return resolveModeDefaults(result.data)
}

function problemsOf(issues: readonly z.core.$ZodIssue[], input: Record<string, unknown>, sources: Sources): ConfigProblem[] {
  const problems: ConfigProblem[] = []
  for (const issue of issues) {
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) {
        problems.push({ key, value: input[key], source: sources.get(key) ?? 'startAgent', allowed: `one of the keys ${AGENT_OPTIONS.map((o) => o.key).join(', ')}` })
      }
      continue
    }
    const key = String(issue.path[0] ?? '')
    const option = optionOf(key)
    problems.push({
      key,
      value: input[key],
      source: sources.get(key) ?? 'startAgent',
      allowed: option ? option.allowed : issue.message,
    })
  }
  return problems
}

/** What {@link loadAgentConfig} reads. */
export interface LoadConfigOptions {
  /** Command-line arguments after the program name. */
  readonly argv?: readonly string[]
  /** @default {} (pass `process.env` in a process) */
  readonly env?: Readonly<Record<string, string | undefined>>
  /** Reads the config file. @default node:fs readFileSync */
  readonly readFile?: (path: string) => string
  /** The node name when none is configured. @default os.hostname() */
  readonly hostname?: () => string
  /** Told of each deprecated flag used (`Flag --root has been deprecated, use --root-dir instead`). @default nothing */
  readonly warn?: (message: string) => void
}

/**
 * Builds the configuration from an optional file (`--config` / `KUBEVOL_CONFIG`), the environment
 * (`KUBEVOL_*`, plus `NODE_NAME` as the DaemonSet sets it) and flags (`--node-name=n1` or
 * `--node-name n1`; `--flag` / `--no-flag` for booleans). Throws {@link AgentConfigError}.
 */
export async function loadAgentConfig(options: LoadConfigOptions = {}): Promise<ResolvedAgentConfig> {
  const env = options.env ?? {}
  const problems: ConfigProblem[] = []
  const fromFlags = parseFlags(options.argv ?? [], problems, options.warn)
  const fromEnv = parseEnv(env, problems)
  const configPath = (fromFlags.values.config ?? fromEnv.values.config) as string | undefined
  const merged: Record<string, unknown> = {}
  const sources: Sources = new Map()
  if (configPath !== undefined) {
    const file = await readConfigFile(configPath, options.readFile, problems)
    for (const [key, value] of Object.entries(file)) {
      merged[key] = value
      sources.set(key, `config file ${configPath}`)
    }
  }
  for (const layer of [fromEnv, fromFlags]) {
    for (const [key, value] of Object.entries(layer.values)) {
      merged[key] = value
      sources.set(key, layer.sources.get(key) ?? '')
    }
  }
  if (merged.nodeName === undefined) {
    const hostname = options.hostname ?? (await import('node:os')).hostname
    merged.nodeName = hostname().toLowerCase()
    sources.set('nodeName', 'the host name')
  }
  if (problems.length > 0) throw new AgentConfigError(problems)
  return resolveAgentConfig(merged as AgentConfigInput, sources)
}

interface Layer {
  readonly values: Record<string, unknown>
  readonly sources: Map<string, string>
}

/** A flag's or variable's text as the option's type; what cannot be read is passed on for the schema to refuse. */
function convert(option: AgentOption, raw: string, bareMillis = false): unknown {
  switch (option.kind) {
    case 'integer':
      return /^-?\d+$/.test(raw.trim()) ? Number(raw) : raw
    case 'duration':
      // The old `--*-ms` flags and the `KUBEVOL_*_MS` variables take bare milliseconds.
      return bareMillis && /^\d+$/.test(raw.trim()) ? Number(raw) : raw
    case 'boolean': {
      const lower = raw.trim().toLowerCase()
      if (['true', '1', 't', 'yes', 'on'].includes(lower)) return true
      if (['false', '0', 'f', 'no', 'off'].includes(lower)) return false
      return raw
    }
    default:
      return raw
  }
}

/**
 * Flags as the kubelet's (pflag): `--name=value`, `--name value`, `-v 4`, `-v=4`, `-v4`; a boolean
 * alone is true and takes `--name=false`; `--no-name` also negates a boolean. Deprecated spellings
 * (`--root`, `--manifest-dir`, `--*-ms`) are still read.
 */
function parseFlags(argv: readonly string[], problems: ConfigProblem[], warn?: (message: string) => void): Layer {
  const values: Record<string, unknown> = {}
  const sources = new Map<string, string>()
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string
    const short = /^-([A-Za-z])(=?)(.*)$/.exec(arg)
    if (!arg.startsWith('--') && !short) {
      problems.push({ key: arg, value: arg, source: 'the command line', allowed: 'flags of the form --name=value' })
      continue
    }
    const eq = arg.indexOf('=')
    let name = short ? `-${short[1]}` : eq >= 0 ? arg.slice(0, eq) : arg
    let raw: string | undefined = short ? (short[2] !== '' || short[3] !== '' ? short[3] : undefined) : eq >= 0 ? arg.slice(eq + 1) : undefined
    let negated = false
    let found: { option: AgentOption; alias?: OptionAlias } | undefined = optionOfFlag(name)
    if (!found && name.startsWith('--no-')) {
      const positive = optionOfFlag(`--${name.slice(5)}`)
      if (positive?.option.kind === 'boolean' && raw === undefined) {
        found = positive
        negated = true
        name = `--${name.slice(5)}`
      }
    }
    if (!found) {
      problems.push({ key: name, value: raw ?? true, source: 'the command line', allowed: `one of the flags ${AGENT_OPTIONS.map((o) => o.flag).join(', ')}` })
      continue
    }
    const { option, alias } = found
    // pflag's words for a deprecated flag, as the kubelet prints them.
    if (alias) warn?.(`Flag ${alias.flag} has been deprecated, use ${option.flag} instead`)
    if (option.kind === 'boolean' && raw === undefined) {
      raw = negated ? 'false' : 'true'
    } else if (raw === undefined) {
      const next = argv[i + 1]
      if (next === undefined || next.startsWith('--')) {
        problems.push({ key: option.key, value: undefined, source: name, allowed: option.allowed })
        continue
      }
      raw = next
      i++
    }
    values[option.key] = convert(option, raw, alias?.unit === 'ms')
    sources.set(option.key, name)
  }
  return { values, sources }
}

function parseEnv(env: Readonly<Record<string, string | undefined>>, _problems: ConfigProblem[]): Layer {
  const values: Record<string, unknown> = {}
  const sources = new Map<string, string>()
  // NODE_NAME is what a DaemonSet's downward API usually sets; KUBEVOL_NODE_NAME wins over it.
  if (env.NODE_NAME) {
    values.nodeName = env.NODE_NAME
    sources.set('nodeName', 'NODE_NAME')
  }
  for (const option of AGENT_OPTIONS) {
    const raw = env[option.env]
    if (raw === undefined || raw === '') continue
    // The variables keep their names (`KUBEVOL_STATS_PERIOD_MS`): a bare number there is milliseconds.
    values[option.key] = convert(option, raw, true)
    sources.set(option.key, option.env)
  }
  return { values, sources }
}

async function readConfigFile(path: string, readFile: LoadConfigOptions['readFile'], problems: ConfigProblem[]): Promise<Record<string, unknown>> {
  let text: string
  try {
    text = readFile ? readFile(path) : (await import('node:fs')).readFileSync(path, 'utf8')
  } catch (err) {
    problems.push({ key: 'config', value: path, source: 'the config path', allowed: `a readable file (${err instanceof Error ? err.message : String(err)})` })
    return {}
  }
  let parsed: unknown
  try {
    parsed = parseYaml(text)
  } catch (err) {
    problems.push({ key: 'config', value: path, source: 'the config path', allowed: `a YAML or JSON file (${err instanceof Error ? err.message.split('\n')[0] : String(err)})` })
    return {}
  }
  if (parsed === null || parsed === undefined) return {}
  if (typeof parsed !== 'object' || Array.isArray(parsed)) {
    problems.push({ key: 'config', value: path, source: 'the config path', allowed: 'a file holding one mapping of option keys to values' })
    return {}
  }
  return parsed as Record<string, unknown>
}

/** `-v, --v N`: how help shows an option's flag. */
export function optionUsage(o: AgentOption): string {
  const name = `${o.short ? `-${o.short}, ` : ''}${o.flag}`
  return o.value ? `${name} ${o.value}` : name
}

/** A flag as help lists it: `kubevol-agent --help` and `kubevol CMD --help` print every flag so. */
export interface FlagHelp {
  /** `-v, --v N` */
  readonly usage: string
  /** What it does, in a sentence or two. */
  readonly description: string
  /** Values it takes, listed as `one of a, b`. */
  readonly choices?: readonly string[]
  /** The default, in words (`20s`, `the host name`). */
  readonly defaultText?: string
  /** The environment variable it is also read from. */
  readonly env?: string
}

/** One flag's help: its usage, then its meaning with its choices, default and variable, indented. */
export function flagHelp(f: FlagHelp): string {
  const notes = [...(f.choices ? [`one of ${f.choices.join(', ')}`] : []), ...(f.defaultText ? [`default ${f.defaultText}`] : []), ...(f.env ? [`env ${f.env}`] : [])]
  return `  ${f.usage}\n      ${f.description}${notes.length > 0 ? ` (${notes.join('; ')})` : ''}`
}

/**
 * An agent option as help lists it. An enum's values come from its words (`"static" or "api"`); what
 * else is allowed is said after the meaning unless the kind says it (a boolean, a duration).
 */
export function optionHelp(o: AgentOption): FlagHelp {
  const choices = o.kind === 'enum' ? [...o.allowed.matchAll(/"([^"]+)"/g)].map((m) => m[1] as string) : undefined
  return {
    usage: optionUsage(o),
    description: o.kind === 'boolean' || o.kind === 'duration' || choices ? o.description : `${o.description} Allowed: ${o.allowed}.`,
    ...(choices ? { choices } : {}),
    defaultText: o.defaultText,
    env: o.env,
  }
}

/** The flags section of help: every option under its flag, with its default and variable, as `kubevol run --help` lists them. */
export function configHelp(): string {
  return ['Flags:', ...AGENT_OPTIONS.map((o) => flagHelp(optionHelp(o)))].join('\n')
}
