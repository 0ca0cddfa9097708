/**
 * Kubernetes resource quantities (`1Gi`, `500M`, `1.5`, `100m`) as byte counts.
 */

const BINARY: Readonly<Record<string, number>> = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60 }
const DECIMAL: Readonly<Record<string, number>> = { n: 1e-9, u: 1e-6, m: 1e-3, '': 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18 }

/**
 * Parses a quantity into a number (bytes for storage). Throws on anything that is not a valid
 * quantity, with the value in the message.
 */
export function parseQuantity(value: string | number): number {
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new Error(`invalid quantity ${value}`)
    return value
  }
  const match = /^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:[eE]([+-]?\d+))?([KMGTPE]i|[numkMGTPE])?$/.exec(value.trim())
  if (!match) throw new Error(`invalid quantity "${value}"`)
  const [, digits = '0', exponent, suffix = ''] = match
  const base = Number(digits) * (exponent ? 10 ** Number(exponent) : 1)
  const factor = BINARY[suffix] ?? DECIMAL[suffix]
  if (factor === undefined) throw new Error(`invalid quantity "${value}"`)
  return Math.ceil(base * factor)
}

/** `storage` of a resource list as bytes, or undefined when absent. */
export function storageOf(list: Readonly<Record<string, string | number>> | undefined): number | undefined {
  const value = list?.storage
  return value === undefined ? undefined : parseQuantity(value)
}
