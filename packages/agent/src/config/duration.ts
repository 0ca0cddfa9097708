/**
 * Durations as the kubelet writes them (Go's time.Duration syntax: `10s`, `500ms`, `2m`, `1h30m`),
 * held in milliseconds.
 */

const DURATION_UNITS: Readonly<Record<string, number>> = { ns: 1e-6, us: 1e-3, 'µs': 1e-3, ms: 1, s: 1_000, m: 60_000, h: 3_600_000 }

/**
 * Milliseconds of a duration as Go's time.ParseDuration (and so the kubelet) reads one: `10s`,
 * `500ms`, `2m`, `1h30m`, `1.5s`, or `0`. A number without a unit is refused (undefined), as Go does.
 */
export function parseDuration(text: string): number | undefined {
  const t = text.trim()
  if (t === '0') return 0
  if (!/^(\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)((\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h))*$/.test(t)) return undefined
  let total = 0
  for (const m of t.matchAll(/(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)/g)) total += Number(m[1]) * (DURATION_UNITS[m[2] as string] as number)
  return Math.round(total)
}

/** `120000` → `2m`, `123000` → `2m3s`, `1500` → `1.5s`, `500` → `500ms`: a duration as Go prints one, trailing zero units left out. */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0'
  if (ms < 1_000) return `${ms}ms`
  const h = Math.floor(ms / 3_600_000)
  const m = Math.floor((ms % 3_600_000) / 60_000)
  const s = (ms % 60_000) / 1_000
  return `${h > 0 ? `${h}h` : ''}${m > 0 ? `${m}m` : ''}${s > 0 ? `${s}s` : ''}`
}
