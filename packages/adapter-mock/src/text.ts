/**
 * UTF-8 through the web-standard TextEncoder/TextDecoder, present in every runtime kubevol targets. The
 * package compiles without DOM or Node types, so the shape is named here (as core's clock does for timers).
 */
interface TextCodecs {
  TextEncoder: new () => { encode(text: string): Uint8Array }
  TextDecoder: new () => { decode(bytes: Uint8Array): string }
}
const codecs = globalThis as unknown as TextCodecs
const encoder = new codecs.TextEncoder()
const decoder = new codecs.TextDecoder()

/** The UTF-8 bytes of `text`. */
export function encodeText(text: string): Uint8Array {
  return encoder.encode(text)
}

/** `bytes` read as UTF-8; invalid sequences become U+FFFD. */
export function decodeText(bytes: Uint8Array): string {
  return decoder.decode(bytes)
}
