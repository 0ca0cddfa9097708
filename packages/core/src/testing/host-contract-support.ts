/**
 * What the parts of the Host contract share: the context `runHostContract` gives each part (the host,
 * paths under its root, loop attaches it cleans up) and the error assertion.
 */
import { expect } from 'vitest'
import type { HostErrorCode } from '../errors.js'
import { HostError } from '../errors.js'
import type { Host, MountEntry } from '../host/host.js'

/** What the parts of the suite need from it: the host, paths under its root, and loop attaches it cleans up. */
export interface ContractContext {
  readonly h: () => Host
  readonly p: (...parts: string[]) => string
  /** The test's root directory, as setup gave it. */
  readonly root: () => string
  /** A file's content as text. */
  readonly read: (path: string) => Promise<string>
  /** The latest mount table entry at `target`. */
  readonly entryAt: (target: string) => Promise<MountEntry | undefined>
  readonly attach: (file: string, options?: { readonly readOnly?: boolean }) => Promise<string>
}

interface TextCodecs {
  TextEncoder: new () => { encode(text: string): Uint8Array }
  TextDecoder: new () => { decode(bytes: Uint8Array): string }
}
const codecs = globalThis as unknown as TextCodecs
const decoder = new codecs.TextDecoder()
export const encoder = new codecs.TextEncoder()
export const text = (bytes: Uint8Array): string => decoder.decode(bytes)
export const MiB = 2 ** 20

/** Awaits `promise`, expects it to reject with a HostError of `code`, and returns that error. */
export async function expectHostError(promise: Promise<unknown>, code: HostErrorCode): Promise<HostError> {
  const error = await promise.then(
    () => undefined,
    (err: unknown) => err,
  )
  expect(error, `expected a HostError ${code}`).toBeInstanceOf(HostError)
  expect((error as HostError).code).toBe(code)
  return error as HostError
}
