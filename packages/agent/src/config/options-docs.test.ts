/**
 * What the project ships speaks the option table's vocabulary: the agent README's table is the
 * option table (every option once, under its flag, variable and default), and the DaemonSet's args
 * and deploy/README.md's agent command lines use no deprecated spelling.
 */
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { parseAllDocuments } from 'yaml'
import { optionUsage } from './load-config.js'
import { AGENT_OPTIONS, optionOfFlag } from './options.js'

const README = readFileSync(new URL('../../README.md', import.meta.url), 'utf8')
const rows = README.split('\n').filter((l) => /^\| `[a-zA-Z]+` \| `-/.test(l))

describe('packages/agent/README.md', () => {
  it('lists every option as the table gives it', () => {
    expect(rows.map((r) => r.split(' | ')[0]?.slice(3, -1))).toEqual(AGENT_OPTIONS.map((o) => o.key))
    for (const o of AGENT_OPTIONS) {
      expect(rows).toContain(`| \`${o.key}\` | \`${optionUsage(o)}\` | \`${o.env}\` | ${o.defaultText.replace(/\|/g, '\\|')} |`)
    }
  })
})

describe('deploy/daemonset.yaml', () => {
  it('passes each option under its flag, never a deprecated spelling', () => {
    const [ds] = parseAllDocuments(readFileSync(new URL('../../../../deploy/daemonset.yaml', import.meta.url), 'utf8')).map((d) => d.toJS())
    const args = ds.spec.template.spec.containers[0].args as string[]
    expect(args.length).toBeGreaterThan(0)
    for (const arg of args) {
      const found = optionOfFlag(arg.split('=')[0] as string)
      expect(found, arg).toBeDefined()
      expect(found?.alias, arg).toBeUndefined()
    }
  })
})

describe('deploy/README.md', () => {
  it("starts the agent under the option table's flags, never a deprecated spelling", () => {
    const readme = readFileSync(new URL('../../../../deploy/README.md', import.meta.url), 'utf8')
    const lines = readme.split('\n').filter((l) => /^(sudo )?node \S*packages\/agent\/dist\/\S*main\.js /.test(l))
    expect(lines.length).toBeGreaterThan(0)
    for (const line of lines) {
      for (const flag of line.match(/ --?[a-z][\w-]*/g) ?? []) {
        const found = optionOfFlag(flag.trim())
        expect(found, `${flag.trim()} in ${line}`).toBeDefined()
        expect(found?.alias, `${flag.trim()} in ${line}`).toBeUndefined()
      }
    }
  })
})
