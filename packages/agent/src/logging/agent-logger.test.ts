import { describe, expect, it } from 'vitest'
import { createAgentLogger, formatTextLine } from './agent-logger.js'

function capture(isTTY: boolean) {
  const lines: string[] = []
  return { lines, destination: { isTTY, write: (line: string) => lines.push(line) } }
}

describe('the agent logger', () => {
  it('writes JSON lines with the level by name, the message and the fields', () => {
    const out = capture(false)
    const logger = createAgentLogger({ destination: out.destination, base: { node: 'n1' } })
    logger.info('Volume mounted', { volume: 'v1' })
    expect(JSON.parse(out.lines[0] as string)).toMatchObject({ level: 'info', msg: 'Volume mounted', volume: 'v1', node: 'n1', time: expect.any(String) })
  })

  it.each([
    [2, false],
    [4, true],
  ])('at verbosity %i logs debug: %s', (verbosity, debug) => {
    const out = capture(false)
    createAgentLogger({ destination: out.destination, verbosity }).debug('details')
    expect(out.lines.length > 0).toBe(debug)
  })

  it('writes klog-like text on a terminal', () => {
    const out = capture(true)
    createAgentLogger({ destination: out.destination }).warn('Slow mount', { volume: 'v1', ms: 12 })
    expect(out.lines[0]).toMatch(/^W\d{4} \d\d:\d\d:\d\d\.\d{3} Slow mount volume="v1" ms=12\n$/)
    expect(formatTextLine({ level: 'error', time: '2026-01-02T03:04:05.006Z', msg: 'x' })).toMatch(/^E0102 \d\d:04:05\.006 x\n$/)
  })
})
