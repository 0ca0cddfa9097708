import { describe, expect, it } from 'vitest'
import { compareSides, fieldOf, median, parseRunOutput, percentile } from './side-by-side.js'

describe('median and percentile', () => {
  it.each([
    { xs: [3], median: 3 },
    { xs: [5, 1, 3], median: 3 },
    { xs: [4, 1, 3, 2], median: 2.5 },
  ])('median of $xs is $median', ({ xs, median: m }) => {
    expect(median(xs)).toBe(m)
  })

  it('takes the nearest rank, never past the largest value', () => {
    const xs = Array.from({ length: 200 }, (_, i) => 200 - i)
    expect(percentile(xs, 50)).toBe(100)
    expect(percentile(xs, 99)).toBe(198)
    expect(percentile(xs, 100)).toBe(200)
    expect(percentile([7], 99)).toBe(7)
  })

  it('refuses no values', () => {
    expect(() => median([])).toThrow('median of no values')
    expect(() => percentile([], 50)).toThrow('percentile of no values')
  })
})

describe('parseRunOutput', () => {
  const fields = ['startupMs', 'idle.cpuPercent', 'maxRssKiB']
  const ok = { workload: 'latency', startupMs: [1], idle: { cpuPercent: 0.5 }, maxRssKiB: 100 }

  it('takes the last JSON object on stdout, past other lines', () => {
    const out = `starting\n${JSON.stringify({ ...ok, maxRssKiB: 1 })}\n{not json\n${JSON.stringify(ok)}\n\n`
    expect(parseRunOutput(out, { workload: 'latency', fields, who: 'kubelet' })).toEqual(ok)
  })

  it.each([
    { name: 'nothing printed', out: '', error: 'kubelet: no JSON object on stdout (it printed nothing)' },
    { name: 'no object', out: 'panic: boom', error: 'kubelet: no JSON object on stdout (it ended: panic: boom)' },
    { name: 'another workload', out: JSON.stringify({ ...ok, workload: 'kernel' }), error: 'kubelet: printed the "kernel" workload\'s figures, expected "latency"' },
    { name: 'a missing field', out: JSON.stringify({ ...ok, idle: {} }), error: 'kubelet: its latency figures lack idle.cpuPercent' },
  ])('says what is wrong: $name', ({ out, error }) => {
    expect(() => parseRunOutput(out, { workload: 'latency', fields, who: 'kubelet' })).toThrow(error)
  })

  it('reads dotted fields, undefined past a missing level', () => {
    expect(fieldOf({ a: { b: 2 } }, 'a.b')).toBe(2)
    expect(fieldOf({ a: 1 }, 'a.b')).toBeUndefined()
  })
})

describe('compareSides', () => {
  it('gives the ratio of the medians and the range of the pairs\' own ratios', () => {
    const pairs = [
      { a: { ms: 300 }, b: { ms: 2 } },
      { a: { ms: 310 }, b: { ms: 3 } },
      { a: { ms: 290 }, b: { ms: 2.5 } },
    ]
    const c = compareSides(pairs, (run) => run.ms)
    expect(c.a).toEqual({ runs: [300, 310, 290], median: 300 })
    expect(c.b).toEqual({ runs: [2, 3, 2.5], median: 2.5 })
    expect(c.ratio).toBe(120)
    expect(c.ratios).toEqual([150, 310 / 3, 116])
    expect(c.range).toEqual([310 / 3, 150])
  })

  it.each([
    { name: 'a zero', b: 0 },
    { name: 'NaN', b: Number.NaN },
    { name: 'a missing figure', b: undefined },
  ])('refuses a pair with $name', ({ b }) => {
    expect(() => compareSides([{ a: { x: 1 }, b: { x: b } }], (run) => run.x)).toThrow(/pair 1: the second side's figure is .*, not a positive number/)
  })

  it('refuses no pairs', () => {
    expect(() => compareSides([], (run) => run)).toThrow('no pairs of runs to compare')
  })
})
