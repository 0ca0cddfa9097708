/**
 * Times as kubectl shows them: an age (`12s`, `5m`, `3h20m`, `2d`) rather than a timestamp, and a
 * repeated event as `12s (x4 over 30s)`.
 */

/**
 * A duration as kubectl words it (k8s.io/apimachinery's duration.HumanDuration): seconds up to 2
 * minutes, then minutes (with seconds below 10 minutes), hours (with minutes below 8 hours), days,
 * years. A slightly negative duration (clock skew) is `0s`.
 */
export function humanDuration(ms: number): string {
  const seconds = Math.floor(ms / 1_000)
  if (seconds < -1) return '<invalid>'
  if (seconds < 0) return '0s'
  if (seconds < 120) return `${seconds}s`
  const minutes = Math.floor(seconds / 60)
  if (minutes < 10) return seconds % 60 === 0 ? `${minutes}m` : `${minutes}m${seconds % 60}s`
  if (minutes < 180) return `${minutes}m`
  const hours = Math.floor(minutes / 60)
  if (hours < 8) return minutes % 60 === 0 ? `${hours}h` : `${hours}h${minutes % 60}m`
  if (hours < 48) return `${hours}h`
  if (hours < 24 * 8) return hours % 24 === 0 ? `${Math.floor(hours / 24)}d` : `${Math.floor(hours / 24)}d${hours % 24}h`
  if (hours < 24 * 365 * 2) return `${Math.floor(hours / 24)}d`
  const days = Math.floor(hours / 24)
  if (hours < 24 * 365 * 8) return days % 365 === 0 ? `${Math.floor(days / 365)}y` : `${Math.floor(days / 365)}y${days % 365}d`
  return `${Math.floor(days / 365)}y`
}

/** How long a command took: `0.4s`, `12.3s` below a minute, then as {@link humanDuration} (`2m5s`). */
export function elapsed(ms: number): string {
  return ms < 60_000 ? `${(Math.max(0, ms) / 1_000).toFixed(1)}s` : humanDuration(ms)
}

/** A time (ms or ISO) as an age at `now`: `12s`. Empty for no time. */
export function ageOf(time: number | string | undefined, now: number): string {
  const t = typeof time === 'string' ? Date.parse(time) : time
  return t === undefined || Number.isNaN(t) ? '' : humanDuration(now - t)
}

/** A time ahead (a retry) as `in 8s`, rounded up (`in 1s`, not `in 0s`); `now` when it has come. Empty for no time. */
export function untilOf(time: number | string | undefined, now: number): string {
  const t = typeof time === 'string' ? Date.parse(time) : time
  if (t === undefined || Number.isNaN(t)) return ''
  return t <= now ? 'now' : `in ${humanDuration(Math.ceil((t - now) / 1_000) * 1_000)}`
}

/** An event's age as kubectl describe shows it: `12s`, or `12s (x4 over 30s)` for a repeated one. */
export function eventAge(event: { readonly count: number; readonly firstTimestamp: number | string; readonly lastTimestamp: number | string }, now: number): string {
  const last = ageOf(event.lastTimestamp, now)
  return event.count > 1 ? `${last} (x${event.count} over ${ageOf(event.firstTimestamp, now)})` : last
}
