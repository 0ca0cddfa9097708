/**
 * Help text and the docs reference pages: the commands from the command table, the configuration
 * from the agent's option table (which the command table's `run` flags come from too).
 */
import { AGENT_OPTIONS, flagHelp, optionUsage } from '@kubevol/agent'
import { COMMANDS, type CommandSpec, type FlagSpec } from './command-table.js'

function flagUsage(f: FlagSpec): string {
  const name = `${f.short ? `-${f.short}, ` : ''}--${f.name}`
  return f.value ? `${name} ${f.value}` : name
}


function usageLine(c: CommandSpec): string {
  const args = c.args.map((a) => (a.required ? a.name : `[${a.name}]`)).join(' ')
  return `kubevol ${c.name}${args ? ` ${args}` : ''} [flags]`
}

/** `kubevol --help`. */
export function renderMainHelp(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length))
  return [
    'kubevol: the Kubernetes kubelet\'s volume manager, as a command.',
    '',
    'Usage: kubevol COMMAND [flags]',
    '',
    'Commands:',
    ...COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    '',
    'Run `kubevol COMMAND --help` for its flags, `kubevol completion bash|zsh` for shell completion. Exit codes: 0 ok, 1 the command found a problem, 2 bad usage, 3 agent unreachable.',
    '',
  ].join('\n')
}

/** `kubevol CMD --help`. */
export function renderCommandHelp(c: CommandSpec): string {
  const lines = [`Usage: ${usageLine(c)}`, '', c.summary, '', c.description, '']
  if (c.args.length > 0) {
    lines.push('Arguments:')
    for (const a of c.args) lines.push(`  ${a.name}  ${a.description}`)
    lines.push('')
  }
  lines.push('Flags:')
  // The agent's own --help lists its flags the same way.
  for (const f of c.flags) lines.push(flagHelp({ ...f, usage: flagUsage(f) }))
  lines.push('  -h, --help', '      Show this help.', '', 'Examples:')
  for (const e of c.examples) lines.push(`  ${e}`)
  lines.push('', 'Exit codes:')
  for (const e of c.exitCodes) lines.push(`  ${e.code}  ${e.meaning}`)
  return `${lines.join('\n')}\n`
}

const cell = (text: string): string => text.replace(/\|/g, '\\|')

/** The reference page (markdown) of every command, for the docs site. */
export function renderReference(): string {
  const out = ['# kubevol command reference', '', '| command | what it does |', '| --- | --- |']
  for (const c of COMMANDS) out.push(`| [\`${c.name}\`](#kubevol-${c.name}) | ${cell(c.summary)} |`)
  for (const c of COMMANDS) {
    out.push('', `## kubevol ${c.name}`, '', '```', usageLine(c), '```', '', c.description, '')
    if (c.args.length > 0) {
      out.push('| argument | meaning |', '| --- | --- |')
      for (const a of c.args) out.push(`| \`${a.name}\` | ${cell(a.description)}${a.required ? '' : ' (optional)'} |`)
      out.push('')
    }
    out.push('| flag | meaning | default |', '| --- | --- | --- |')
    for (const f of c.flags) {
      const meaning = f.choices ? `${f.description} One of ${f.choices.map((x) => `\`${x}\``).join(', ')}.` : f.description
      out.push(`| \`${flagUsage(f)}\` | ${cell(meaning)} | ${cell(f.defaultText ?? '')} |`)
    }
    out.push('', 'Examples:', '', '```sh', ...c.examples, '```', '', '| exit code | meaning |', '| --- | --- |')
    for (const e of c.exitCodes) out.push(`| ${e.code} | ${cell(e.meaning)} |`)
  }
  return `${out.join('\n')}\n`
}

/**
 * The configuration reference page (markdown): every agent option with its flag, environment
 * variable, config file key, default and allowed values, and the deprecated spellings still read.
 */
export function renderConfigurationReference(): string {
  const code = (t: string): string => (t ? `\`${t.replace(/\|/g, '\\|')}\`` : '')
  const out = [
    '# Configuration',
    '',
    "Every option of the node agent (`kubevol run`, and the agent's own process), from the agent's option table. Each can be given as a flag, as an environment variable or as a key of the configuration file (`--config FILE`, YAML or JSON); a flag wins over the environment, which wins over the file.",
    '',
    "Flags are the kubelet's where the kubelet has the option (`--root-dir`, `--pod-manifest-path`, `--kubeconfig`, `--node-labels`, `-v`, ...) and read as the kubelet reads them: `--flag=value` or `--flag value`, a boolean alone or as `--flag=true|false`. A duration is written as the kubelet writes one: `10s`, `500ms`, `2m`, `1h30m`; in the configuration file a duration key also takes a number of milliseconds, and an environment variable (named for milliseconds) a bare number of milliseconds.",
    '',
    '| flag | environment | config key | default | allowed | meaning |',
    '| --- | --- | --- | --- | --- | --- |',
    ...AGENT_OPTIONS.map((o) => `| ${code(optionUsage(o))} | ${code(o.env)} | ${code(o.key)} | ${cell(o.defaultText)} | ${cell(o.allowed)} | ${cell(o.description)} |`),
    '',
    '## Deprecated spellings',
    '',
    'Still read, with a warning from `kubevol run`; help and this page list only the names above.',
    '',
    '| deprecated | use |',
    '| --- | --- |',
    ...AGENT_OPTIONS.flatMap((o) => o.aliases.map((a) => `| ${code(a.flag)}${a.unit === 'ms' ? ' (milliseconds)' : ''} | ${code(o.flag)} |`)),
  ]
  return `${out.join('\n')}\n`
}
