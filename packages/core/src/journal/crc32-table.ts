/**
 * The CRC-32 (IEEE 802.3) lookup table, shared by the byte and the text variants. Signed entries:
 * the same bits, but they stay small integers in the engine, which made the lookups twice as fast
 * as unsigned ones.
 */
export const TABLE = (() => {
  const table = new Int32Array(256)
  for (let n = 0; n < 256; n++) {
    let c = n
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1
    table[n] = c
  }
  return table
})()
