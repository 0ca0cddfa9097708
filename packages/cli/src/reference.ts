/**
 * Help text and the docs reference page, both rendered from the command table.
 */
import { COMMANDS, type CommandSpec, type FlagSpec } from './command-table.js'

function flagUsage(f: FlagSpec): string {
  const name = `${f.short ? `-${f.short}, ` : ''}--${f.name}`
  return f.value ? `${name} ${f.value}` : name
}

function flagNotes(f: FlagSpec): string {
  const notes: string[] = []
  if (f.choices) notes.push(`one of ${f.choices.join(', ')}`)
  if (f.defaultText) notes.push(`default ${f.defaultText}`)
  return notes.length > 0 ? ` (${notes.join('; ')})` : ''
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
    'Run `kubevol COMMAND --help` for its flags. Exit codes: 0 ok, 1 the command found a problem, 2 bad usage, 3 agent unreachable.',
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
  for (const f of c.flags) lines.push(`  ${flagUsage(f)}`, `      ${f.description}${flagNotes(f)}`)
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
