/**
 * UTF-8 text and bytes. `TextEncoder`/`TextDecoder` exist in every runtime core targets; core is
 * compiled without DOM or Node types, so it names the shape it uses.
 */
declare const TextEncoder: { new (): { encode(input: string): Uint8Array } }
declare const TextDecoder: { new (): { decode(input: Uint8Array): string } }

const encoder = new TextEncoder()
const decoder = new TextDecoder()

export function encodeUtf8(text: string): Uint8Array {
  return encoder.encode(text)
}

export function decodeUtf8(bytes: Uint8Array): string {
  return decoder.decode(bytes)
}
