// Rule 7's memory of each name's tokens, and the released-token records of rule 1. It reads and
// writes only the working copy, so elections, renewal and hints all record and consult tokens here
// without depending on each other.
import { SimbaEvent } from "../SimbaEvent.js"
import { electionsNamed, publish, type Step, touch } from "./context.js"
import type { Request, TokenMemory } from "./types.js"

/**
 * How many names without an election keep their token memory (the least recently used go first), so
 * a client that locks one name per entity does not remember every name forever. A regression on a
 * name idle for longer than that goes unreported here; a fenced resource still refuses its writes.
 */
export const idleNamesKept = 1_000

/**
 * How long no term of a name starts after a regression: every session that held the name before the
 * store lost it ends its term by its local deadline, at most one lease duration (on the backend's
 * clock) after its last renewal, which was sent before now; `1 + drift` converts to our clock.
 */
export const quietPeriod = (s: Step): number => s.timing.leaseDuration * (1 + s.timing.drift) + s.timing.margin

export const hasElection = (s: Step, name: string): boolean => {
  const handles = s.electionsByName.get(name)
  return handles !== undefined && handles.length > 0
}

/**
 * Records a token of `name` the store answered (to `holder`, when that is one of our sessions) and
 * reports a regression: a token below the highest seen, or equal to it but granted to a different
 * holder. Only a reply to a request sent after the highest was recorded (`requestId`) can show one:
 * tokens only rise in a store that keeps its state, so anything such a reply reports is at least what
 * was seen before; an older reply, a hint (its channel is not ordered with replies) or our own
 * give-back only raises the memory. A regression re-bases the memory on the new token (it is reported
 * once) and starts the quiet period of the name (see `quietPeriod`; docs/design.md, "Terms, tokens and revocation").
 */
export const observe = (s: Step, name: string, token: bigint, holder: string | undefined, requestId?: number): void => {
  const known = s.tokens.get(name)
  const entry = (quietUntil: number): TokenMemory => ({ token, holder, seq: s.nextId, quietUntil })
  if (known === undefined) {
    // Only names in use get a memory (a late message about a forgotten name does not bring it back).
    if (hasElection(s, name)) remember(s, name, entry(Number.NEGATIVE_INFINITY))
    return
  }
  if (token > known.token) {
    remember(s, name, entry(known.quietUntil))
    return
  }
  if (requestId === undefined || known.seq > requestId) return
  if (token === known.token && (holder === undefined || holder === known.holder)) return
  publish(s, SimbaEvent.TokenRegressed({ name, seen: known.token, token }))
  remember(s, name, entry(s.now + quietPeriod(s)))
}

/** Sets (or, `undefined`, forgets) `name`'s memory; renewal reconciliation reads it (see `touch`). */
const remember = (s: Step, name: string, memory: TokenMemory | undefined): void => {
  touch(s, name)
  if (memory !== undefined) {
    s.tokens = s.tokens.set(name, memory)
    return
  }
  s.tokens = s.tokens.delete(name)
  // The name's empty index entry was kept for its memory (see `deleteElection`).
  if (!hasElection(s, name)) s.electionsByName = s.electionsByName.delete(name)
}

/** The time before which no term of `name` starts (after a regression), else `-Infinity`. */
export const quietUntil = (s: Step, name: string): number => s.tokens.get(name)?.quietUntil ?? Number.NEGATIVE_INFINITY

/** A lease nobody asked for is above every token of the name seen (observed only after this check). */
export const aboveSeen = (s: Step, name: string, token: bigint): boolean => {
  const known = s.tokens.get(name)
  return known === undefined || token > known.token
}

/** A name's last election ended: its memory becomes idle, and the least recently used idle ones go. */
export const retireName = (s: Step, name: string): void => {
  if (!s.tokens.has(name) || hasElection(s, name)) return
  s.idleNames = s.idleNames.delete(name).set(name, true)
  while (s.idleNames.size > idleNamesKept) {
    const oldest = s.idleNames.first()!
    s.idleNames = s.idleNames.delete(oldest)
    remember(s, oldest, undefined)
  }
}

/** A name in use again: its memory is no longer idle (so never dropped while in use). */
export const reviveName = (s: Step, name: string): void => {
  s.idleNames = s.idleNames.delete(name)
}

/**
 * A release the backend confirmed makes its record unnecessary once no acquire of that name is in
 * flight (any later grant carries a higher token), which keeps the records bounded by the releases
 * in flight instead of growing with every name ever used.
 */
export const onReleased = (s: Step, request: Extract<Request, { _tag: "Release" }>): void => {
  if (request.sessionId !== s.session.id || s.released.get(request.name) !== request.token) return
  for (const e of electionsNamed(s, request.name)) {
    if (e.attempt !== undefined) return
  }
  s.released = s.released.delete(request.name)
}
