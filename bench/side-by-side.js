// The arithmetic of a side-by-side benchmark (kubelet.js): what one run printed, read back, and the
// ratio of two sides' medians with its range across the pairs of runs. No I/O here, so it is tested
// on its own (side-by-side.test.js).

/** The median: the middle value, or the mean of the two middle values of an even count. */
export function median(xs) {
  if (xs.length === 0) throw new Error('median of no values')
  const s = [...xs].sort((a, b) => a - b)
  const mid = Math.floor(s.length / 2)
  return s.length % 2 === 1 ? s[mid] : (s[mid - 1] + s[mid]) / 2
}

/** The nearest-rank percentile `p` (0–100) of `xs`. */
export function percentile(xs, p) {
  if (xs.length === 0) throw new Error('percentile of no values')
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.max(0, Math.ceil((p / 100) * s.length) - 1)]
}

/**
 * The JSON object a run printed: the last line of `stdout` that is a JSON object (the kubelet's
 * binary logs to stderr, but a stray line on stdout must not be taken for the result). Checks that
 * it is the `workload` asked for and holds every field in `fields`; throws an error naming what is
 * missing, with the output's tail, otherwise.
 */
export function parseRunOutput(stdout, { workload, fields, who }) {
  const lines = stdout.split('\n').map((l) => l.trim()).filter((l) => l.startsWith('{'))
  let result
  for (const line of lines.reverse()) {
    try {
      result = JSON.parse(line)
      break
    } catch {
      // not this line
    }
  }
  const tail = stdout.trim().slice(-300)
  if (!result) throw new Error(`${who}: no JSON object on stdout${tail ? ` (it ended: ${tail})` : ' (it printed nothing)'}`)
  if (result.workload !== workload) throw new Error(`${who}: printed the ${JSON.stringify(result.workload)} workload's figures, expected ${JSON.stringify(workload)}`)
  const missing = fields.filter((f) => fieldOf(result, f) === undefined)
  if (missing.length > 0) throw new Error(`${who}: its ${workload} figures lack ${missing.join(', ')}`)
  return result
}

/** A dotted path (`idle.cpuPercent`) into an object; undefined where any level is missing. */
export function fieldOf(object, path) {
  let value = object
  for (const key of path.split('.')) {
    if (value === null || typeof value !== 'object') return undefined
    value = value[key]
  }
  return value
}

/**
 * One figure of both sides over the pairs of runs: each side's value in each run (`pick`), each side's
 * median, the ratio of the medians (`a` ÷ `b`), and the range of the pairs' own ratios (min–max). A
 * ratio above 1 says `b` took less (time, CPU, memory) than `a`. Pairs where either side's figure is
 * not a positive finite number are refused, so a ratio never hides a zero or a NaN.
 */
export function compareSides(pairs, pick) {
  if (pairs.length === 0) throw new Error('no pairs of runs to compare')
  const a = []
  const b = []
  for (const [i, pair] of pairs.entries()) {
    const x = pick(pair.a)
    const y = pick(pair.b)
    for (const [side, v] of [['first', x], ['second', y]]) {
      if (!(Number.isFinite(v) && v > 0)) throw new Error(`pair ${i + 1}: the ${side} side's figure is ${v}, not a positive number`)
    }
    a.push(x)
    b.push(y)
  }
  const ratios = a.map((x, i) => x / b[i])
  return { a: { runs: a, median: median(a) }, b: { runs: b, median: median(b) }, ratio: median(a) / median(b), ratios, range: [Math.min(...ratios), Math.max(...ratios)] }
}
