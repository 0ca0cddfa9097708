/**
 * The part of the web-standard `AbortSignal` core uses. Core is compiled without DOM or Node types,
 * so it names the shape it needs; a real `AbortSignal` satisfies it.
 */
export interface AbortSignalLike {
  readonly aborted: boolean
  readonly reason?: unknown
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void
  removeEventListener(type: 'abort', listener: () => void): void
}
