import { describe, expect, it } from 'vitest'
import { cli } from '../test/helpers.js'
import { COMMANDS } from './command-table.js'
import { EXIT } from './errors.js'
import { parseCommandLine, parseDuration } from './parse.js'
import { renderReference } from './reference.js'

describe('the command line', () => {
  it('lists every command in --help and exits 0', async () => {
    const r = await cli(['--help'])
    expect(r.code).toBe(0)
    for (const c of COMMANDS) expect(r.stdout).toContain(`  ${c.name}`)
  })

  it.each(COMMANDS.map((c) => [c.name]))('%s --help shows its flags and exit codes', async (name) => {
    const r = await cli([name, '--help'])
    expect(r.code).toBe(0)
    const command = COMMANDS.find((c) => c.name === name)!
    for (const f of command.flags) expect(r.stdout).toContain(`--${f.name}`)
    expect(r.stdout).toContain('Exit codes:')
  })

  it.each([
    { name: 'an unknown command', argv: ['mount-everything'], message: 'unknown command "mount-everything"' },
    { name: 'an unknown flag', argv: ['status', '--colour'], message: "Unknown option '--colour'" },
    { name: 'a bad choice', argv: ['status', '-o', 'xml'], message: '--output: "xml" is not allowed; allowed: table, wide, json, yaml' },
    { name: 'a missing argument', argv: ['explain'], message: 'explain: missing POD' },
    { name: 'a bad number', argv: ['simulate', '--pods', 'many'], message: '--pods: "many" is not an integer' },
    { name: 'a bad duration', argv: ['run', '--once', '--timeout', 'soon'], message: '--timeout: "soon" is not a duration' },
  ])('exits 2 with one line for $name', async ({ argv, message }) => {
    const r = await cli(argv)
    expect(r.code).toBe(EXIT.usage)
    expect(r.stdout).toBe('')
    expect(r.stderr.split('\n')[0]).toContain(message)
    expect(r.stderr).toContain('kubevol --help')
  })

  it('parses --no-FLAG, defaults and what was given', () => {
    const r = parseCommandLine(['run', '--once', '--no-post-events', '--manifests', 'm'])
    expect(r.kind).toBe('command')
    if (r.kind !== 'command') return
    expect(r.parsed.flags).toMatchObject({ once: true, 'post-events': false, manifests: 'm', timeout: '60s', host: 'mock' })
    expect([...r.parsed.given].sort()).toEqual(['manifests', 'once', 'post-events'])
  })

  it.each([
    ['60s', 60_000],
    ['500ms', 500],
    ['2m', 120_000],
    ['1.5', 1_500],
  ])('reads the duration %s', (text, ms) => {
    expect(parseDuration('timeout', text)).toBe(ms)
  })

  it('prints the version', async () => {
    expect((await cli(['--version'])).stdout).toMatch(/^\d+\.\d+\.\d+\n$/)
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

  it('gives run every agent option', async () => {
    const { AGENT_OPTIONS } = await import('@kubevol/agent')
    const run = COMMANDS.find((c) => c.name === 'run')!
    for (const o of AGENT_OPTIONS) expect(run.flags.some((f) => f.agentKey === o.key)).toBe(true)
  })
})
