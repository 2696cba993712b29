/**
 * The engine: a pure state machine `step(state, event, now) -> [state, effects]` (SPEC section 5.1).
 *
 * No clock, timer, randomness, I/O or Effect runtime: time comes in as `now` (monotonic millis),
 * jitter from a seeded generator kept in the state, backend results as `Reply` events. The shell
 * (`internal/`) feeds it events and performs the effects it returns, so every race is a sequence of
 * events that a test can replay.
 *
 * The rules it keeps, cited below by number (the simulation checks each on every step):
 *
 * 1. A term is adopted only from a reply to the election's current attempt, arriving before the
 *    session's local deadline, with a token greater than every token this session released for that
 *    name. A reply to an abandoned attempt that won a lease gives the lease back. A lease nobody asked
 *    for (a pushed hand-off grant, or one a renewal lists) is adopted only above every token of the
 *    name the election has seen.
 * 2. A term is revoked first, then its lease is released; the release carries the term's token.
 * 3. A renewal reply lists the leases the session holds (or says the list is unchanged since the
 *    version the request named, and then stands for the list read with that version): a term adopted
 *    before the request was sent but missing from the list is revoked `TAKEN_OVER`; a listed lease
 *    that no election holds or is acquiring is released.
 * 4. An expired session is never revived: revoke all its terms, open a new session.
 * 5. Handover: a stopped or stepped-down term whose work still runs keeps its lease until the work
 *    exits or the session's local deadline at stop time passes, whichever comes first. A term without
 *    work releases at once.
 * 6. At most one renewal in flight per session, at most one acquire in flight per election.
 *
 * 7. Tokens only rise (see `observe`): a token of a name at or below the highest this client has seen
 *    for it is a regression of the store, reported with `TokenRegressed`; no term of that name starts
 *    for one lease duration after it.
 *
 * Local deadline: `sentAt + remaining x (1 - drift) - margin` of the last successful renewal
 * (`Session.localDeadline`); once passed without a renewal the session is over for this client and
 * every term ends `DEADLINE_PASSED`; a late reply never extends it.
 *
 * This file is the engine's public entry; the code sits in `engine/` (README "Layout").
 */
export type {
  Effect,
  ElectionKind,
  ElectionState,
  Event,
  GroupState,
  HeldLease,
  HintEvent,
  LeaseView,
  Outcome,
  Request,
  Response,
  SessionState,
  State,
  TermState,
  TokenMemory
} from "./engine/types.js"
export { initial } from "./engine/types.js"
export type { OrderedMap } from "./engine/orderedMap.js"
export { step } from "./engine/step.js"
export { idleNamesKept } from "./engine/tokens.js"
export { electionByName, publicStatus, wantsHint } from "./engine/views.js"
