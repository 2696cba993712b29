/**
 * Redis Cluster hash slots, computed on the client: which slot a key lives in, and a fixed short tag
 * hashing to each slot (the `{tag}` of a session's per-slot shadow keys, see docs/design.md).
 */

const crcTable = (() => {
  const table = new Uint16Array(256)
  for (let i = 0; i < 256; i++) {
    let crc = i << 8
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff
    table[i] = crc
  }
  return table
})()

const crc16 = (bytes: ArrayLike<number>): number => {
  let crc = 0
  for (let i = 0; i < bytes.length; i++) crc = ((crc << 8) & 0xffff) ^ crcTable[((crc >> 8) ^ bytes[i]!) & 0xff]!
  return crc
}

/** The Redis Cluster hash slot of `key` (CRC16/XMODEM of its hash tag, or of the whole key, mod 16384). */
export const keySlot = (key: string): number => {
  const open = key.indexOf("{")
  if (open !== -1) {
    const close = key.indexOf("}", open + 1)
    if (close > open + 1) key = key.slice(open + 1, close)
  }
  return crc16(Buffer.from(key, "utf8")) & 16383
}

// Built on first use (~10 ms), then read only: a cache, not state anything depends on.
let slotTags: Array<string> | undefined

/** A fixed short string hashing to `slot`: the first base-36 counter value that does (table built once, ~10 ms). */
export const slotTag = (slot: number): string => {
  if (slotTags === undefined) {
    const tags: Array<string> = new Array(16384)
    const codes: Array<number> = []
    let left = 16384
    for (let i = 0; left > 0; i++) {
      const tag = i.toString(36)
      codes.length = tag.length
      for (let j = 0; j < tag.length; j++) codes[j] = tag.charCodeAt(j)
      const s = crc16(codes) & 16383
      if (tags[s] === undefined) {
        tags[s] = tag
        left--
      }
    }
    slotTags = tags
  }
  return slotTags[slot]!
}

/** The tag of the slot `key` lives in. */
export const tagOf = (key: string): string => slotTag(keySlot(key))
