/**
 * Partition assignment by rendezvous (highest random weight) hashing (docs/design.md, "Partition assignment").
 *
 * Every node computes the same owner for each partition from nothing but the group's live member ids,
 * with no coordination: partition `p` goes to the member `m` with the largest
 * `weight(p, m) = splitmix64(fnv1a64(utf8("${p}@${m}")))`, ties to the smaller id. A member joining
 * takes only the partitions it now wins; a member leaving gives up only its own. The hash is part of
 * the wire contract (all nodes of one major version must agree), pinned by
 * `test/fixtures/partition-weights.json`.
 */

const MASK_64 = (1n << 64n) - 1n

/** FNV-1a 64 offset basis. */
export const FNV_OFFSET_BASIS = 0xcbf29ce484222325n

/** FNV-1a 64 prime. */
export const FNV_PRIME = 0x100000001b3n

const encoder = new TextEncoder()

const TWO_32 = 0x1_0000_0000

/**
 * FNV-1a 64 of `bytes`, mod 2^64. Computed on two 32-bit halves in plain numbers (a `bigint` per byte
 * is ~10x slower, and a view change recomputes partitions × members weights): with
 * `prime = 2^40 + 0x1b3`, `h × prime = h × 0x1b3 + (h << 40)`, and every intermediate stays below 2^53.
 */
export const fnv1a64 = (bytes: Uint8Array): bigint => {
  let hi = 0xcbf29ce4
  let lo = 0x84222325
  for (const byte of bytes) {
    lo = (lo ^ byte) >>> 0
    const low = lo * 0x1b3
    const carry = Math.floor(low / TWO_32)
    hi = (hi * 0x1b3 + carry + ((lo << 8) >>> 0)) % TWO_32
    lo = low % TWO_32
  }
  return (BigInt(hi) << 32n) | BigInt(lo)
}

/** The SplitMix64 finaliser, mod 2^64: spreads FNV's weak low bits over the whole word. */
export const splitmix64 = (x: bigint): bigint => {
  let z = (x + 0x9e3779b97f4a7c15n) & MASK_64
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK_64
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK_64
  return z ^ (z >> 31n)
}

/** The weight of `member` (a session id) for `partition`: an unsigned 64-bit `bigint`. */
export const weight = (partition: number, member: string): bigint =>
  splitmix64(fnv1a64(encoder.encode(`${partition}@${member}`)))

/** Whether `candidate` (with `candidateWeight`) beats `current`: larger weight, ties to the smaller id. */
const beats = (candidate: string, candidateWeight: bigint, current: string, currentWeight: bigint): boolean =>
  candidateWeight > currentWeight || (candidateWeight === currentWeight && candidate < current)

/** The owner of `partition` among `members`, or `undefined` when there are none. */
export const ownerOf = (partition: number, members: ReadonlyArray<string>): string | undefined => {
  let owner: string | undefined
  let ownerWeight = 0n
  for (const member of members) {
    const w = weight(partition, member)
    if (owner === undefined || beats(member, w, owner, ownerWeight)) {
      owner = member
      ownerWeight = w
    }
  }
  return owner
}

/**
 * The owner of each partition `0 … partitions-1` among `members` (the group's live session ids; order
 * and duplicates do not matter). Empty when there are no members. `partitions` is the group's
 * partition count, a non-negative integer the caller has validated.
 */
export const assign = (partitions: number, members: ReadonlyArray<string>): ReadonlyMap<number, string> => {
  const owners = new Map<number, string>()
  if (members.length === 0) return owners
  for (let partition = 0; partition < partitions; partition++) {
    owners.set(partition, ownerOf(partition, members)!)
  }
  return owners
}

/** The partitions `me` owns among `members`, in ascending order (empty unless `me` is a member). */
export const owned = (partitions: number, members: ReadonlyArray<string>, me: string): ReadonlyArray<number> => {
  const mine: Array<number> = []
  if (!members.includes(me)) return mine
  for (const [partition, owner] of assign(partitions, members)) {
    if (owner === me) mine.push(partition)
  }
  return mine.sort((a, b) => a - b)
}
