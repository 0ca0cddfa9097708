/**
 * Shell completion scripts, generated from the command table: commands, each command's flags (the
 * names help shows), the values of flags with choices, files for the other flags that take a value,
 * and the choices of a first argument (`completion bash|zsh`).
 */
import { COMMANDS, type CommandSpec, type FlagSpec } from './command-table.js'

/** The shells `kubevol completion` writes for. */
export type CompletionShell = 'bash' | 'zsh'

const spellings = (f: FlagSpec): string[] => [`--${f.name}`, ...(f.short ? [`-${f.short}`] : [])]
const takesValue = (f: FlagSpec): boolean => f.type !== 'boolean'

function bash(): string {
  const lines = [
    '# bash completion for kubevol: source <(kubevol completion bash)',
    '_kubevol() {',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: bash's own ${...}
    '  local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"',
    '  if [[ $COMP_CWORD -eq 1 ]]; then',
    `    COMPREPLY=( $(compgen -W "${COMMANDS.map((c) => c.name).join(' ')} help --help --version" -- "$cur") )`,
    '    return',
    '  fi',
    '  local flags="" values="" choices=""',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: bash's own ${...}
    '  case "${COMP_WORDS[1]}" in',
  ]
  for (const c of COMMANDS) {
    const all = [...c.flags.flatMap(spellings), '--help']
    const valued = c.flags.filter(takesValue).flatMap(spellings)
    lines.push(`    ${c.name})`, `      flags="${all.join(' ')}"`, `      values=" ${valued.join(' ')} "`)
    const withChoices = c.flags.filter((f) => f.choices)
    if (withChoices.length > 0) {
      lines.push('      case "$prev" in')
      for (const f of withChoices) lines.push(`        ${spellings(f).join('|')}) choices="${(f.choices ?? []).join(' ')}" ;;`)
      lines.push('      esac')
    }
    if (c.argChoices) lines.push(`      [[ $cur != -* && $COMP_CWORD -eq 2 ]] && choices="${c.argChoices.join(' ')}"`)
    lines.push('      ;;')
  }
  lines.push(
    '  esac',
    '  if [[ -n $choices ]]; then COMPREPLY=( $(compgen -W "$choices" -- "$cur") ); return; fi',
    '  if [[ $values == *" $prev "* ]]; then COMPREPLY=( $(compgen -f -- "$cur") ); return; fi',
    '  COMPREPLY=( $(compgen -W "$flags" -- "$cur") )',
    '}',
    'complete -o default -F _kubevol kubevol',
    '',
  )
  return lines.join('\n')
}

/** Text inside a zsh `_arguments` spec: no brackets, colons or quotes to break it. */
const zshText = (s: string): string => (s.split(/(?<=\.)\s/)[0] ?? s).replace(/[[\]:'\\`$]/g, ' ').trim()

function zshFlag(f: FlagSpec): string[] {
  const help = zshText(f.description)
  const action = f.choices ? `:${f.value ?? 'VALUE'}:(${f.choices.join(' ')})` : takesValue(f) ? `:${f.value ?? 'VALUE'}:_files` : ''
  return spellings(f).map((s) => `'${s}${takesValue(f) && s.startsWith('--') ? '=' : ''}[${help}]${action}'`)
}

function zshCommand(c: CommandSpec): string[] {
  const specs = [...c.flags.flatMap(zshFlag), "'--help[Show help]'"]
  if (c.argChoices) specs.push(`'1:${c.args[0]?.name ?? 'ARG'}:(${c.argChoices.join(' ')})'`)
  return [`    ${c.name})`, `      _arguments ${specs.join(' \\\n        ')}`, '      ;;']
}

function zsh(): string {
  return [
    '#compdef kubevol',
    '# zsh completion for kubevol: source <(kubevol completion zsh), or save it as _kubevol in $fpath',
    '_kubevol() {',
    '  local -a commands',
    `  commands=(${COMMANDS.map((c) => `'${c.name}:${zshText(c.summary)}'`).join(' ')})`,
    '  if (( CURRENT == 2 )); then',
    "    _describe 'command' commands",
    '    return',
    '  fi',
    '  local cmd=$words[2]',
    '  shift words',
    '  (( CURRENT-- ))',
    '  case $cmd in',
    ...COMMANDS.flatMap(zshCommand),
    '  esac',
    '}',
    'if [[ $zsh_eval_context[-1] == loadautofunc ]]; then _kubevol "$@"; else compdef _kubevol kubevol; fi',
    '',
  ].join('\n')
}

/** The completion script of `shell`. */
export function renderCompletion(shell: CompletionShell): string {
  return shell === 'zsh' ? zsh() : bash()
}
