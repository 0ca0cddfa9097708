import { spawn } from 'node:child_process'
import { EventEmitter } from 'node:events'
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { get, tempDir, until } from '../test/helpers.js'
import { runAgentProcess } from './process.js'

const dirs: { cleanup(): void }[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) d.cleanup()
})

function io() {
  const out: string[] = []
  const err: string[] = []
  const codes: number[] = []
  return { out, err, codes, stdout: { write: (t: string) => out.push(t) }, stderr: { write: (t: string) => err.push(t) }, exit: (c: number) => codes.push(c) }
}

/** The agent started in static mode on an empty manifest directory, with `signals` as its signal source. */
function startStatic(signals: EventEmitter) {
  const d = tempDir()
  dirs.push(d)
  const o = io()
  const starting = runAgentProcess({
    argv: ['--node-name=n1', '--port=0', `--pod-manifest-path=${d.dir}`, '--logging-format=json', '--v=0'],
    env: {},
    signals: signals as never,
    ...o,
  })
  return { starting, o }
}

describe('the agent process', () => {
  it('shuts down on SIGTERM and exits 0', async () => {
    const signals = new EventEmitter()
    const { starting, o } = startStatic(signals)
    const agent = await starting
    expect(agent).toBeDefined()
    expect((await get(`${agent?.url}/livez`)).status).toBe(200)
    signals.emit('SIGTERM')
    await agent?.stopped
    await until('exit', () => o.codes.length > 0)
    expect(o.codes).toEqual([0])
  })

  // Node stops watching a signal when its last listener goes, and drops one that had arrived but not
  // yet reached a listener: from the first listener until the agent stops there must always be one.
  it('keeps a SIGTERM and a SIGINT listener from before the start until the agent stops (a signal in between is never dropped)', async () => {
    const signals = new EventEmitter()
    const gaps: string[] = []
    let stopped = false
    signals.on('removeListener', (name: string) => {
      if (!stopped && (name === 'SIGTERM' || name === 'SIGINT') && signals.listenerCount(name) === 0) gaps.push(name)
    })
    const { starting, o } = startStatic(signals)
    const agent = await starting
    expect(gaps).toEqual([])
    expect(signals.listenerCount('SIGTERM')).toBe(1)
    expect(signals.listenerCount('SIGINT')).toBe(1)
    stopped = true
    signals.emit('SIGTERM')
    await agent?.stopped
    await until('exit', () => o.codes.length > 0)
    expect(o.codes).toEqual([0])
  })

  it('a SIGTERM while it starts stops it once started, and exits 0', async () => {
    const signals = new EventEmitter()
    const { starting, o } = startStatic(signals)
    // Before startAgent has returned: no listener of the shutdown's own yet.
    expect(signals.listenerCount('SIGTERM')).toBe(1)
    signals.emit('SIGTERM')
    const agent = await starting
    await agent?.stopped
    await until('exit', () => o.codes.length > 0)
    expect(o.codes).toEqual([0])
  })

  it.each([
    ['empty', ''],
    ['whitespace only', ' \n\t\n'],
  ])('refuses to start with an auth token file that is %s (every request would be refused): exit 2 with the reason', async (_name, content) => {
    const d = tempDir()
    dirs.push(d)
    d.write('token', content)
    const o = io()
    const agent = await runAgentProcess({ argv: [`--auth-token-file=${d.dir}/token`, `--pod-manifest-path=${d.dir}`, '--port=0'], env: {}, ...o })
    expect(agent).toBeUndefined()
    expect(o.codes).toEqual([2])
    expect(o.err.join('')).toMatch(/authTokenFile: ".*\/token" \(from the agent configuration\) is not allowed; allowed: a file holding the bearer token; this one is empty or only whitespace/)
  })

  it.each([
    [['--mode=nope'], 2, /mode: "nope" \(from --mode\) is not allowed; allowed: "static" or "api"/],
    [['--help'], 0, undefined],
    [['--version'], 0, undefined],
  ])('%j exits %i', async (argv, code, message) => {
    const o = io()
    await runAgentProcess({ argv, env: {}, ...o })
    expect(o.codes).toEqual([code])
    if (message) expect(o.err.join('')).toMatch(message)
    else expect(o.out.join('')).not.toBe('')
  })

  const main = fileURLToPath(new URL('../dist/main.js', import.meta.url))
  if (!existsSync(main)) console.warn(`[agent] skipping the real-process SIGTERM test: ${main} is not built (npx tsc -b)`)
  it.runIf(existsSync(main))('as a real process, exits 0 on SIGTERM (built dist)', async () => {
    const d = tempDir()
    dirs.push(d)
    const child = spawn(process.execPath, [main, '--node-name=n1', '--port=0', `--pod-manifest-path=${d.dir}`, '--logging-format=json'], { stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
    await until('started', () => output.includes('kubevol agent started'), 20_000)
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
    child.kill('SIGTERM')
    expect(await exited).toBe(0)
    expect(output).toContain('"msg":"Stopped"')
  })
})
