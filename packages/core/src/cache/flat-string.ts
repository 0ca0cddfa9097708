/**
 * A string built by concatenation is a tree of pieces in V8 (about 30 bytes a piece), kept as long
 * as the string is. Names the caches hold for every volume are stored flat instead.
 */

/**
 * The same text as one flat string. `normalize()` returns the text copied flat; the comparison
 * keeps the original when normalizing would change it (text not in NFC form).
 */
export function flatString(text: string): string {
  const flat = text.normalize()
  return flat === text ? flat : text
}
