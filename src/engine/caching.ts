// Lock caching: a lease kept between locks of its name (`keep`), and the block of tokens that gives
// each of their terms its own fencing token without a round trip (docs/design.md, "Lock caching").
// State only: the elections module decides when a lease is cached, taken or released.
import { arm, disarm, type Step, touch } from "./context.js"
import type { CachedLease, TermState } from "./types.js"

/**
 * The tokens a lock with `keep` asks its store to reserve with a grant: the most terms one grant
 * serves. A crash of the caching client wastes at most this many (`LeaseBackend.maxReserve` caps it).
 */
export const reservedTokens = 256

export const cacheKey = (name: string) => `cache:${name}`

/** The token of a grant's first term: the first of its block (`token` when the grant has none). */
export const firstOfBlock = (token: bigint, reserved: number | undefined): bigint =>
  reserved === undefined || reserved <= 1 ? token : token - BigInt(reserved - 1)

/** Keeps `term`'s lease for the next lock of `name` until `keep` passes. */
export const keepCached = (s: Step, name: string, term: TermState, keep: number): void => {
  const until = s.now + keep
  const cached: CachedLease = {
    leaseToken: term.leaseToken,
    next: term.token + 1n,
    sessionId: term.sessionId,
    sessionSeq: term.sessionSeq,
    leaseSince: term.leaseSince,
    adoptedSeq: term.adoptedSeq,
    until
  }
  s.cached = s.cached.set(name, cached)
  arm(s, cacheKey(name), until)
  touch(s, name)
}

/** Forgets the cached lease of `name` (its caller releases it, or the store no longer has it). */
export const dropCached = (s: Step, name: string): CachedLease | undefined => {
  const cached = s.cached.get(name)
  if (cached === undefined) return undefined
  s.cached = s.cached.delete(name)
  disarm(s, cacheKey(name))
  touch(s, name)
  return cached
}
