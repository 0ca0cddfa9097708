import { TABLE } from './crc32-table.js'

/**
 * The CRC-32 of the UTF-8 encoding of `text`, without encoding it first: the journal checksums every
 * record, and an encoded copy of each was a buffer allocated and freed per record. Unpaired
 * surrogates count as U+FFFD, as `TextEncoder` encodes them.
 */
export function crc32Utf8(text: string): number {
  // All ones, as a signed 32-bit integer: `c` stays one through the loop.
  let c = -1
  for (let i = 0; i < text.length; i++) {
    let code = text.charCodeAt(i)
    if (code < 0x80) {
      c = step(c, code)
    } else if (code < 0x800) {
      c = step(step(c, 0xc0 | (code >> 6)), 0x80 | (code & 0x3f))
    } else {
      if (code >= 0xd800 && code <= 0xdfff) {
        const next = i + 1 < text.length ? text.charCodeAt(i + 1) : 0
        if (code <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
          code = 0x10000 + ((code - 0xd800) << 10) + (next - 0xdc00)
          i++
          c = step(step(c, 0xf0 | (code >> 18)), 0x80 | ((code >> 12) & 0x3f))
          c = step(step(c, 0x80 | ((code >> 6) & 0x3f)), 0x80 | (code & 0x3f))
          continue
        }
        code = 0xfffd
      }
      c = step(step(step(c, 0xe0 | (code >> 12)), 0x80 | ((code >> 6) & 0x3f)), 0x80 | (code & 0x3f))
    }
  }
  return (c ^ -1) >>> 0
}

/** The running CRC after one more byte. */
function step(c: number, byte: number): number {
  return (TABLE[(c ^ byte) & 0xff] as number) ^ (c >>> 8)
}
