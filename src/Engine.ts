/**
 * The engine: a pure state machine `step(state, event, now) -> [state, commands]`. No clock, timer,
 * randomness, I/O or Effect runtime (time comes in as `now`, jitter from a seeded generator in the
 * state, backend answers as events), so the shell (`internal/`) only performs what it returns and
 * every race is a sequence of events a test can replay. This file is the public entry; the code sits
 * in `engine/`.
 *
 * The rules it keeps, cited by number in `engine/` (stated in full in docs/design.md, "The engine"):
 * 1. a term is adopted only from the current attempt's reply, before the local deadline, above every
 *    token this session released for the name (a lease nobody asked for: above every token seen);
 * 2. a term is revoked first, then released with its token;
 * 3. a renewal's lease list reconciles: a term missing from it is `TAKEN_OVER`, an unknown lease released;
 * 4. an expired session is never revived;
 * 5. handover: a stopped term keeps its lease until its work exits or the deadline at stop time passes;
 * 6. at most one renewal per session and one acquire per election in flight;
 * 7. tokens only rise: a regression is reported and no term of the name starts for one lease duration.
 *
 * Local deadline: `sentAt + remaining x (1 - drift) - margin` of the last successful renewal; once
 * passed, every term of the session ends `DEADLINE_PASSED`, and a late reply never extends it.
 */
export type {
  Command,
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
export { initial, supersede } from "./engine/types.js"
export type { OrderedMap } from "./engine/orderedMap.js"
export { step } from "./engine/step.js"
export { idleNamesKept } from "./engine/tokens.js"
export { electionByName, publicStatus, wantsHint } from "./engine/views.js"
