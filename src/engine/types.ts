// The engine's data: the backend requests and replies it speaks in, the events a step takes, the
// commands a step returns for the shell to perform, and the state it threads from step to step. Types
// (and `initial`) only, at the bottom of the engine's modules so that every one can name them;
// `src/Engine.ts` re-exports them.
import * as Session from "../Session.js"
import type { ElectionStatus, SessionStatus, SimbaEvent } from "../SimbaEvent.js"
import type { RevokeReason } from "../Term.js"
import { OrderedMap } from "./orderedMap.js"

export type Request =
  | { readonly _tag: "OpenSession"; readonly ttl: number }
  /** `known`: the lease-set version of the last renewal reply read (the reply omits an unchanged list). */
  | { readonly _tag: "KeepAlive"; readonly sessionId: string; readonly ttl: number; readonly known?: string | undefined }
  | { readonly _tag: "CloseSession"; readonly sessionId: string }
  /** `reserve`: a block of tokens for a lease to be cached (see `LeaseBackend.acquire`). */
  | { readonly _tag: "Acquire"; readonly sessionId: string; readonly name: string; readonly reserve?: number | undefined }
  /** `completion`: answered when the backend answers the release (a `stop` that waits for it). */
  | {
    readonly _tag: "Release"
    readonly sessionId: string
    readonly name: string
    readonly token: bigint
    readonly completion?: number | undefined
  }
  /** The session no longer waits for `name`: leave its waiter queue (fire-and-forget; the reply is ignored). */
  | { readonly _tag: "Withdraw"; readonly sessionId: string; readonly name: string }
  | { readonly _tag: "Join"; readonly sessionId: string; readonly group: string }
  | { readonly _tag: "Leave"; readonly sessionId: string; readonly group: string }
  | { readonly _tag: "Members"; readonly group: string }

export type Response =
  | { readonly _tag: "Opened"; readonly sessionId: string; readonly remaining: number }
  | {
    readonly _tag: "Live"
    readonly remaining: number
    /** The session's lease-set version (absent: a backend that does not version, always listing). */
    readonly version?: string | undefined
    /** The leases held; `undefined` when unchanged since the request's `known` version. */
    readonly leases: ReadonlyArray<HeldLease> | undefined
    readonly groups: ReadonlyArray<{ readonly group: string; readonly members: ReadonlyArray<string> }>
  }
  | { readonly _tag: "Expired" }
  /** `reserved`: the grant's block, `token - reserved + 1` to `token` (absent: one). */
  | { readonly _tag: "Granted"; readonly token: bigint; readonly reserved?: number | undefined }
  | { readonly _tag: "HeldBy"; readonly token: bigint | undefined; readonly remaining: number | undefined }
  /** The store will never grant the name as asked (another kind or limit holds it). */
  | { readonly _tag: "Conflict"; readonly held: string; readonly asked: string }
  | { readonly _tag: "Joined" }
  | { readonly _tag: "MemberList"; readonly members: ReadonlyArray<string> }
  | { readonly _tag: "Done" }
  | { readonly _tag: "Failed"; readonly error: string }

// ---------------------------------------------------------------------------------------------------
// Events and commands
// ---------------------------------------------------------------------------------------------------

export type ElectionKind = "election" | "lock" | "partition"

export type HintEvent =
  | { readonly _tag: "Released"; readonly name: string; readonly to?: string | undefined }
  | { readonly _tag: "Granted"; readonly name: string; readonly to: string; readonly token: bigint }
  | { readonly _tag: "GroupChanged"; readonly group: string }
  /** Another session queued for `name`, which the session `holder` holds cached. */
  | { readonly _tag: "Wanted"; readonly name: string; readonly holder: string }

export type Event =
  | { readonly _tag: "Boot" }
  | {
    readonly _tag: "Start"
    readonly handle: number
    readonly name: string
    readonly kind: "election" | "lock"
    readonly hasWork: boolean
    readonly completion: number
    /**
     * A try-lock: one acquire, no waiting. This completion answers `Ok` once the lock is held, or
     * `NotAcquired` (and the lock is removed) after the first attempt fails for any reason.
     */
    readonly tryCompletion?: number | undefined
    /** A lock's `keep` (millis, > 0): its lease is cached after the body (see `CachedLease`). */
    readonly keep?: number | undefined
    /**
     * A lock's: answered `Conflict` (and the lock removed) when the store refuses the name as another
     * kind or limit (`AcquireReply.Conflict`); never answered otherwise.
     */
    readonly refusal?: number | undefined
  }
  /**
   * `awaitRelease`: a held lease's stop completes when the backend answered its release (confirmed
   * or failed), not in the step that sends it.
   */
  | { readonly _tag: "Stop"; readonly handle: number; readonly completion: number; readonly awaitRelease?: boolean | undefined }
  | { readonly _tag: "StepDown"; readonly handle: number; readonly cooldown: number; readonly completion: number }
  | { readonly _tag: "Timer"; readonly key: string; readonly id: number }
  | {
    readonly _tag: "Reply"
    readonly requestId: number
    readonly sentAt: number
    readonly request: Request
    readonly response: Response
  }
  | { readonly _tag: "Hint"; readonly hint: HintEvent }
  | {
    readonly _tag: "WorkExited"
    readonly handle: number
    readonly termId: number
    /**
     * The work failed: give the term up (as a step-down, with handover already done since the work
     * has exited) and stay out of the race for this many millis.
     */
    readonly stepDown?: number | undefined
  }
  | {
    readonly _tag: "Join"
    readonly handle: number
    readonly group: string
    readonly partitions: number
    readonly completion: number
  }
  | { readonly _tag: "Leave"; readonly handle: number; readonly completion: number }
  | { readonly _tag: "Close"; readonly completion: number }

export type Outcome =
  | { readonly _tag: "Ok" }
  | { readonly _tag: "AlreadyStarted"; readonly name: string }
  | { readonly _tag: "Closed" }
  /** A try-lock's one attempt did not win the lease. */
  | { readonly _tag: "NotAcquired" }
  /** The store refuses the name as asked (a lock's `refusal` completion). */
  | { readonly _tag: "Conflict"; readonly name: string; readonly held: string; readonly asked: string }

/** What a step asks the shell to do, in order: the engine's only way to act on the world. */
export type Command =
  /** Perform a backend request; reply with a `Reply` event carrying `requestId`, `sentAt` and `request`. */
  | {
    readonly _tag: "Call"
    readonly requestId: number
    readonly sentAt: number
    readonly timeout: number
    readonly request: Request
  }
  /** Deliver `Timer { key, id }` at `at`, replacing any timer armed under `key`. */
  | { readonly _tag: "Arm"; readonly key: string; readonly id: number; readonly at: number }
  /** Cancel the timer armed under `key`. */
  | { readonly _tag: "Disarm"; readonly key: string }
  /** The local deadline of session incarnation `sessionSeq` is now `deadline`; its terms read it. */
  | { readonly _tag: "Deadline"; readonly sessionSeq: number; readonly deadline: number }
  | {
    readonly _tag: "Elected"
    readonly handle: number
    readonly termId: number
    readonly name: string
    readonly token: bigint
    /** The lease's token on the store (`token`, or the last of the block `token` is taken from). */
    readonly leaseToken: bigint
    readonly sessionId: string
    readonly sessionSeq: number
    readonly kind: ElectionKind
    readonly group: string | undefined
    readonly partition: number | undefined
    /** Whether the engine waits for `WorkExited` of this term before a voluntary release. */
    readonly hasWork: boolean
  }
  | {
    readonly _tag: "Revoked"
    readonly handle: number
    readonly termId: number
    readonly name: string
    readonly token: bigint
    readonly reason: RevokeReason
  }
  /** Finish a waiting `start`/`stop`/`stepDown`/`join`/`leave`/`close`. */
  | { readonly _tag: "Complete"; readonly completion: number; readonly outcome: Outcome }
  /** `kind`: of the election an `Elected`/`Revoked` is about (the shell logs locks' quieter). */
  | { readonly _tag: "Publish"; readonly event: SimbaEvent; readonly kind?: ElectionKind | undefined }
  /** The group view and the partitions this client now owns. */
  | {
    readonly _tag: "Members"
    readonly handle: number
    readonly group: string
    readonly members: ReadonlyArray<string>
    readonly owned: ReadonlyArray<number>
  }

// ---------------------------------------------------------------------------------------------------
// State
// ---------------------------------------------------------------------------------------------------

export interface TermState {
  readonly termId: number
  /** The term's fencing token: the lease's, or for a lease with a block of tokens one of the block. */
  readonly token: bigint
  /**
   * The lease's token on the store (its grant's, the last of its block), which its release, the
   * renewal listing and pushed grants name; `token` unless the lease came with a block.
   */
  readonly leaseToken: bigint
  /** When this client was granted the lease (monotonic millis): a cached lease is kept only so long. */
  readonly leaseSince: number
  readonly sessionId: string
  readonly sessionSeq: number
  /** Sequence number at adoption, comparable with request ids (rule 3). */
  readonly adoptedSeq: number
  readonly workRunning: boolean
  readonly revoked: boolean
}

export interface ElectionState {
  readonly handle: number
  readonly name: string
  readonly kind: ElectionKind
  readonly group: string | undefined
  readonly partition: number | undefined
  readonly hasWork: boolean
  /** `QUEUED`: a lock waiting behind another lock of the same name in this client. */
  readonly status: ElectionStatus | "QUEUED"
  /** The acquire in flight (rule 6: at most one). */
  readonly attempt: number | undefined
  /** A `released` hint arrived while an attempt was in flight: try again at once after it. */
  readonly hinted: boolean
  /**
   * The highest token of the name this election has seen (a holder's, in a `HeldBy` reply; its own
   * terms'; every token this client gave back). A lease nobody asked for (pushed grant, renewal
   * listing) is adopted only above it: a later grant to a queued session always is, while a late or
   * duplicate message of an earlier grant is not.
   */
  readonly seenToken: bigint | undefined
  /**
   * The session a `HeldBy` reply of this election last came from (the backend may have queued it as a
   * waiter there); cleared by a grant. An election that stops wanting the name without holding it
   * then withdraws (see `withdraw`).
   */
  readonly queuedAs: string | undefined
  /** The lease this election holds (LEADER), or still holds during HANDOVER (then `revoked`). */
  readonly term: TermState | undefined
  readonly cooldownUntil: number
  /** What a HANDOVER ends in. */
  readonly afterHandover: "stop" | "cooldown"
  /** Completions waiting for this election's stop/stepDown to finish. */
  readonly waiters: ReadonlyArray<number>
  /** A try-lock's completion, until its one attempt is decided. */
  readonly tryCompletion: number | undefined
  /** A lock's completion for a store's `Conflict` (see the `Start` event). */
  readonly refusal: number | undefined
  /** A lock's `keep` (millis; 0: none): its lease is cached after its term (see `CachedLease`). */
  readonly keep: number
  /** Another session waits for the lease this term holds (a `Wanted` hint): released, never cached. */
  readonly wantedElsewhere: boolean
}

export interface GroupState {
  readonly handle: number
  readonly group: string
  readonly partitions: number
  readonly joined: boolean
  readonly joining: number | undefined
  readonly listing: number | undefined
  readonly members: ReadonlyArray<string>
  readonly owned: ReadonlyArray<number>
  /** The session `owned` was computed for (the assignment depends on who we are). */
  readonly ownedBy: string | undefined
  readonly leaving: boolean
  readonly waiters: ReadonlyArray<number>
}

export interface HeldLease {
  readonly name: string
  readonly token: bigint
}

/**
 * The lease list of the last renewal reply, the version the backend gave it, and what a reply saying
 * "unchanged" must still reconcile: the names whose reconciliation against this list may do
 * something (see `reconcileLeases`). Every other name is settled: reconciling it again would change
 * nothing, so a renewal that changes nothing costs what changed since the last one, not the leases held.
 */
export interface LeaseView {
  readonly version: string
  readonly leases: ReadonlyArray<HeldLease>
  /** Each listed name's token (the list as a map, built once per list). */
  readonly tokens: ReadonlyMap<string, bigint>
  /**
   * Names not settled against this list: not settled at the last reconciliation, or touched since
   * (an election of the name or its token memory changed: see `touch`).
   */
  readonly unsettled: OrderedMap<string, true>
}

export interface SessionState {
  /** Incarnation number: increases each time a new session is opened. */
  readonly seq: number
  readonly id: string | undefined
  readonly status: SessionStatus
  /** Local deadline (monotonic millis); `-Infinity` without a live session. */
  readonly deadline: number
  /** Current renewal period (shortened when the backend grants less than asked). */
  readonly every: number
  readonly shortenedPublished: boolean
  readonly opening: number | undefined
  readonly renewing: number | undefined
  /**
   * Highest token this session released per name (rule 1). Persistent: a client closing 10,000 locks
   * records 10,000 releases in flight, and copying a `Map` per step made that quadratic.
   */
  readonly released: OrderedMap<string, bigint>
  /** What the last renewal reply listed, for replies that say "unchanged" (docs/design.md, "Sessions"). */
  readonly leaseView: LeaseView | undefined
}

/**
 * A lease kept after its lock's body (`keep`), for the next lock of its name in this client to start
 * at once with the next token of the lease's block. Ended (released) when `keep` passes, another
 * session wants it, the block is used up or the client closes; dropped with its session.
 */
export interface CachedLease {
  readonly leaseToken: bigint
  /** The next term's token (at most `leaseToken`). */
  readonly next: bigint
  readonly sessionId: string
  readonly sessionSeq: number
  readonly leaseSince: number
  /** The `adoptedSeq` of the term that was granted the lease (rule 3 judges the lease from then). */
  readonly adoptedSeq: number
  /** Released at this time unless a lock of the name takes it first (monotonic millis). */
  readonly until: number
}

/** What the client remembers of one name's tokens, across sessions (rule 7, `observe`). */
export interface TokenMemory {
  /** The highest token of the name seen (after a regression: the regressed one). */
  readonly token: bigint
  /** The session that held it when that was one of ours (a grant, a listing, a give-back). */
  readonly holder: string | undefined
  /** `nextId` when it was recorded: a reply to a request with a lower id may predate it. */
  readonly seq: number
  /** After a regression, no term of the name starts before this (monotonic millis). */
  readonly quietUntil: number
}

export interface State {
  readonly timing: Session.Timing
  readonly session: SessionState
  /** Rule 7's memory: every name with an election, and the `idleNamesKept` names used last. */
  readonly tokens: OrderedMap<string, TokenMemory>
  /** Names with a memory but no election, least recently used first. */
  readonly idleNames: OrderedMap<string, true>
  readonly elections: OrderedMap<number, ElectionState>
  /**
   * The handles of each name's elections, in the order they started (an index of `elections`); empty
   * for a name without an election that keeps its token memory (see `deleteElection`).
   */
  readonly electionsByName: OrderedMap<string, ReadonlyArray<number>>
  readonly groups: ReadonlyMap<number, GroupState>
  /** Leases kept between locks of their name (see `CachedLease`). */
  readonly cached: OrderedMap<string, CachedLease>
  readonly timers: OrderedMap<string, number>
  readonly nextId: number
  readonly rng: number
  readonly closing: ReadonlyArray<number> | undefined
  readonly closed: boolean
}

/** A fresh engine. `seed` makes the retry jitter reproducible. */
export const initial = (timing: Session.Timing, seed: number): State => ({
  timing,
  session: {
    seq: 0,
    id: undefined,
    status: "OPENING",
    deadline: Number.NEGATIVE_INFINITY,
    every: timing.renewInterval,
    shortenedPublished: false,
    opening: undefined,
    renewing: undefined,
    released: OrderedMap.empty(),
    leaseView: undefined
  },
  tokens: OrderedMap.empty(),
  idleNames: OrderedMap.empty(),
  elections: OrderedMap.empty(),
  electionsByName: OrderedMap.empty(),
  groups: new Map(),
  cached: OrderedMap.empty(),
  timers: OrderedMap.empty(),
  nextId: 1,
  rng: seed >>> 0,
  closing: undefined,
  closed: false
})

/**
 * Tells `previous`'s tables that `next` replaced them, for a caller that holds only the newest state
 * (the shell): each table's change records from `previous` to `next` are dropped (see
 * `OrderedMap.supersededBy`), so they cannot keep later states alive in the heap. `previous` must not
 * be used after this.
 */
export const supersede = (previous: State, next: State): void => {
  previous.session.released.supersededBy(next.session.released)
  if (previous.session.leaseView !== undefined && next.session.leaseView !== undefined) {
    previous.session.leaseView.unsettled.supersededBy(next.session.leaseView.unsettled)
  }
  previous.tokens.supersededBy(next.tokens)
  previous.idleNames.supersededBy(next.idleNames)
  previous.elections.supersededBy(next.elections)
  previous.electionsByName.supersededBy(next.electionsByName)
  previous.cached.supersededBy(next.cached)
  previous.timers.supersededBy(next.timers)
}
