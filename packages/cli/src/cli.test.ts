import { execFileSync } from 'node:child_process'
import { AGENT_OPTIONS, runAgentProcess } from '@kubevol/agent'
import { describe, expect, it } from 'vitest'
import { cli } from '../test/helpers.js'
import { COMMANDS } from './command-table.js'
import { renderCompletion } from './completion.js'
import { EXIT } from './errors.js'
import { parseCommandLine, parseDuration } from './parse.js'
import { renderConfigurationReference, renderReference } from './reference.js'

describe('the command line', () => {
  it('lists every command in --help, version and completion included, and exits 0', async () => {
    const r = await cli(['--help'])
    expect(r.code).toBe(0)
    for (const c of COMMANDS) expect(r.stdout).toContain(`  ${c.name}`)
    expect(r.stdout).toMatch(/^ {2}version +Print the version/m)
    expect(r.stdout).toMatch(/^ {2}completion +Print a shell completion script/m)
  })

  it('shows each run flag once, under the option table\'s (kubelet) name, never a deprecated one', async () => {
    const help = (await cli(['run', '--help'])).stdout
    const flags = [...help.matchAll(/^ {2}(?:-\w, )?(--[a-z0-9-]+)/gm)].map((m) => m[1])
    expect(new Set(flags).size).toBe(flags.length)
    for (const o of AGENT_OPTIONS) {
      expect(flags).toContain(o.flag)
      for (const a of o.aliases) expect(flags).not.toContain(a.flag)
    }
    expect(flags.filter((f) => f === '--kubeconfig')).toHaveLength(1)
    expect(help).toContain('  -v, --v N')
    expect(flags).not.toContain('--listen')
  })

  it("has one help format: the agent's own --help lists each flag exactly as `kubevol run --help` does", async () => {
    let agentHelp = ''
    await runAgentProcess({ argv: ['--help'], env: {}, stdout: { write: (t: string) => (agentHelp += t) }, exit: () => {} })
    const runHelp = (await cli(['run', '--help'])).stdout
    // Each flag: its usage line and its meaning line, with choices, default and variable.
    const entries = (help: string) => [...help.matchAll(/^ {2}(-.*)\n {6}(.*)$/gm)].map((m) => `${m[1]}\n${m[2]}`)
    const agent = entries(agentHelp)
    expect(agent.length).toBeGreaterThanOrEqual(AGENT_OPTIONS.length)
    const run = new Set(entries(runHelp))
    for (const entry of agent.filter((e) => !e.startsWith('--version'))) expect(run, entry).toContain(entry)
    for (const o of AGENT_OPTIONS) expect(agentHelp).toContain(`default ${o.defaultText}; env ${o.env})`)
    // The same sections, in the same order.
    const sections = (help: string) => help.split('\n').filter((l) => /^(Usage|Flags|Exit codes):/.test(l)).map((l) => l.split(':')[0])
    expect(sections(agentHelp)).toEqual(['Usage', 'Flags', 'Exit codes'])
    expect(sections(runHelp).filter((s) => s !== 'Examples')).toEqual(['Usage', 'Flags', 'Exit codes'])
  })

  it.each(COMMANDS.map((c) => [c.name]))('%s --help shows its flags and exit codes', async (name) => {
    const r = await cli([name, '--help'])
    expect(r.code).toBe(0)
    const command = COMMANDS.find((c) => c.name === name)!
    for (const f of command.flags) expect(r.stdout).toContain(`--${f.name}`)
    expect(r.stdout).toContain('Exit codes:')
  })

  it.each([
    { name: 'an unknown command', argv: ['mount-everything'], message: 'error: unknown command "mount-everything" for "kubevol"', hint: "See 'kubevol --help' for usage." },
    { name: 'an unknown flag', argv: ['run', '--bogus'], message: 'error: unknown flag: --bogus', hint: "See 'kubevol run --help' for usage." },
    { name: 'an unknown shorthand', argv: ['status', '-x'], message: "error: unknown shorthand flag: 'x' in -x", hint: "See 'kubevol status --help' for usage." },
    { name: 'a flag without its value', argv: ['status', '--server'], message: 'error: flag needs an argument: --server', hint: "See 'kubevol status --help' for usage." },
    { name: 'a bad choice', argv: ['status', '-o', 'xml'], message: 'error: invalid argument "xml" for "--output" flag: allowed: table, wide, json, yaml, name', hint: "See 'kubevol status --help' for usage." },
    { name: 'a missing argument', argv: ['explain'], message: 'error: explain: missing POD', hint: "See 'kubevol explain --help' for usage." },
    { name: 'a bad number', argv: ['simulate', '--pods', 'many'], message: 'error: invalid argument "many" for "--pods" flag: not an integer', hint: "See 'kubevol simulate --help' for usage." },
    { name: 'a bad duration', argv: ['run', '--once', '--timeout', 'soon'], message: 'error: invalid argument "soon" for "--timeout" flag: not a duration such as 60s, 500ms or 2m', hint: "See 'kubevol run --help' for usage." },
    { name: 'a duration without a unit', argv: ['run', '--file-check-frequency', '20'], message: 'error: invalid argument "20" for "--file-check-frequency" flag', hint: "See 'kubevol run --help' for usage." },
    { name: 'a bad boolean', argv: ['run', '--post-events=maybe'], message: 'error: invalid argument "maybe" for "--post-events" flag: true or false', hint: "See 'kubevol run --help' for usage." },
    { name: 'an unsupported shell', argv: ['completion', 'fish'], message: 'error: completion: "fish" is not supported; supported: bash, zsh', hint: "See 'kubevol completion --help' for usage." },
  ])('exits 2 for $name, as kubectl words it: the error, then the help to read', async ({ argv, message, hint }) => {
    const r = await cli(argv)
    expect(r.code).toBe(EXIT.usage)
    expect(r.stdout).toBe('')
    const [first, second, rest] = r.stderr.split('\n')
    expect(first).toContain(message)
    expect(second).toBe(hint)
    expect(rest).toBe('')
  })

  it('documents exit code 2 for bad usage in every command, as the parse errors exit', () => {
    for (const c of COMMANDS) expect(c.exitCodes.find((e) => e.code === EXIT.usage)?.meaning).toMatch(/bad usage/)
  })

  it('parses --no-FLAG, --FLAG=false, -v, durations, defaults and what was given', () => {
    const r = parseCommandLine(['run', '--once', '--no-post-events', '--enable-controller-attach-detach=false', '--register-node=true', '--pod-manifest-path', 'm', '-v', '4', '--node-status-update-frequency=1m'])
    expect(r.kind).toBe('command')
    if (r.kind !== 'command') return
    expect(r.parsed.flags).toMatchObject({
      once: true,
      'post-events': false,
      'enable-controller-attach-detach': false,
      'register-node': true,
      'pod-manifest-path': 'm',
      v: 4,
      'node-status-update-frequency': 60_000,
      timeout: 60_000,
    })
    expect([...r.parsed.given].sort()).toEqual(['enable-controller-attach-detach', 'node-status-update-frequency', 'once', 'pod-manifest-path', 'post-events', 'register-node', 'v'])
    expect(r.parsed.warnings).toEqual([])
  })

  it('reads deprecated spellings under the new name, with a warning, and old --*-ms flags as milliseconds', () => {
    const r = parseCommandLine(['run', '--root', '/r', '--manifests=m', '--verbosity=3', '--controller-attach-detach=false', '--stats-period-ms', '2500'])
    if (r.kind !== 'command') throw new Error('not a command')
    expect(r.parsed.flags).toMatchObject({ 'root-dir': '/r', 'pod-manifest-path': 'm', v: 3, 'enable-controller-attach-detach': false, 'volume-stats-agg-period': 2_500 })
    expect(r.parsed.warnings).toContain('Flag --root has been deprecated, use --root-dir instead')
    expect(r.parsed.warnings).toContain('Flag --stats-period-ms has been deprecated, use --volume-stats-agg-period instead')
  })

  it.each([
    ['60s', 60_000],
    ['500ms', 500],
    ['2m', 120_000],
    ['1m30s', 90_000],
  ])('reads the duration %s', (text, ms) => {
    expect(parseDuration('timeout', text)).toBe(ms)
  })

  it.each([['--version'], ['version']])('prints the version for %s', async (arg) => {
    expect((await cli([arg])).stdout).toMatch(/^\d+\.\d+\.\d+\n$/)
  })
})

describe('renderReference', () => {
  it('documents every command, flag and exit code', () => {
    const md = renderReference()
    for (const c of COMMANDS) {
      expect(md).toContain(`## kubevol ${c.name}`)
      for (const f of c.flags) expect(md).toContain(`--${f.name}`)
      for (const e of c.exitCodes) expect(md).toContain(`| ${e.code} | ${e.meaning.replace(/\|/g, '\\|')} |`)
      for (const x of c.examples) expect(md).toContain(x)
    }
  })

  it('gives run every agent option, under its flag', () => {
    const run = COMMANDS.find((c) => c.name === 'run')!
    for (const o of AGENT_OPTIONS) expect(run.flags.find((f) => f.agentKey === o.key)?.name).toBe(o.flag.slice(2))
  })
})

describe('renderConfigurationReference', () => {
  it('lists every option with its flag, variable, key and default, and every deprecated spelling', () => {
    const md = renderConfigurationReference()
    for (const o of AGENT_OPTIONS) {
      // The flag is followed by its value's name or the closing backquote: `--config` is not `--config-map-...`.
      const row = md.split('\n').find((l) => new RegExp(`^\\| \`${o.short ? `-${o.short}, ` : ''}${o.flag}[ \`]`).test(l))
      expect(row).toBeDefined()
      expect(row).toContain(`\`${o.env}\``)
      expect(row).toContain(`\`${o.key}\``)
      for (const a of o.aliases) expect(md).toContain(`| \`${a.flag}\``)
    }
  })
})

describe('kubevol completion', () => {
  // Runs the generated bash script and asks it what it completes, as bash would.
  const complete = (words: string[]): string[] => {
    const script = `${renderCompletion('bash')}\nCOMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _kubevol; printf '%s\\n' "\${COMPREPLY[@]}"`
    return execFileSync('bash', ['-c', script], { encoding: 'utf8' }).split('\n').filter(Boolean)
  }

  it('completes commands, flags and flag values from the command table (bash)', () => {
    expect(complete(['kubevol', 'st'])).toEqual(['status'])
    expect(complete(['kubevol', ''])).toEqual(expect.arrayContaining(COMMANDS.map((c) => c.name)))
    expect(complete(['kubevol', 'run', '--pod-m'])).toEqual(['--pod-manifest-path'])
    expect(complete(['kubevol', 'status', '-o', ''])).toEqual(['table', 'wide', 'json', 'yaml', 'name'])
    expect(complete(['kubevol', 'run', '--host', 'l'])).toEqual(['linux'])
    expect(complete(['kubevol', 'completion', ''])).toEqual(['bash', 'zsh'])
    expect(complete(['kubevol', 'run', '--roo'])).toEqual(['--root-dir'])
  })

  it('writes a zsh script with every command and flag', async () => {
    const r = await cli(['completion', 'zsh'])
    expect(r.code).toBe(0)
    expect(r.stdout.startsWith('#compdef kubevol\n')).toBe(true)
    for (const c of COMMANDS) {
      expect(r.stdout).toContain(`'${c.name}:`)
      for (const f of c.flags) expect(r.stdout).toContain(`'--${f.name}`)
    }
  })
})
