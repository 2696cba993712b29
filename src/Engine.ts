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
 */
import { partitionName } from "./LeaseName.js"
import * as PartitionAssignment from "./PartitionAssignment.js"
import * as Session from "./Session.js"
import { SimbaEvent } from "./SimbaEvent.js"
import type { ElectionStatus, SessionEndReason, SessionStatus } from "./SimbaEvent.js"
import type { RevokeReason } from "./Term.js"

// ---------------------------------------------------------------------------------------------------
// Backend requests and responses, as the engine sees them (durations in millis on the backend clock)
// ---------------------------------------------------------------------------------------------------

export type Request =
  | { readonly _tag: "OpenSession"; readonly ttl: number }
  /** `known`: the lease-set version of the last renewal reply read (the reply omits an unchanged list). */
  | { readonly _tag: "KeepAlive"; readonly sessionId: string; readonly ttl: number; readonly known?: string | undefined }
  | { readonly _tag: "CloseSession"; readonly sessionId: string }
  | { readonly _tag: "Acquire"; readonly sessionId: string; readonly name: string }
  | { readonly _tag: "Release"; readonly sessionId: string; readonly name: string; readonly token: bigint }
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
  | { readonly _tag: "Granted"; readonly token: bigint }
  | { readonly _tag: "HeldBy"; readonly token: bigint | undefined; readonly remaining: number | undefined }
  | { readonly _tag: "Joined" }
  | { readonly _tag: "MemberList"; readonly members: ReadonlyArray<string> }
  | { readonly _tag: "Done" }
  | { readonly _tag: "Failed"; readonly error: string }

// ---------------------------------------------------------------------------------------------------
// Events and effects
// ---------------------------------------------------------------------------------------------------

export type ElectionKind = "election" | "lock" | "partition"

export type HintEvent =
  | { readonly _tag: "Released"; readonly name: string; readonly to?: string | undefined }
  | { readonly _tag: "Granted"; readonly name: string; readonly to: string; readonly token: bigint }
  | { readonly _tag: "GroupChanged"; readonly group: string }

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
  }
  | { readonly _tag: "Stop"; readonly handle: number; readonly completion: number }
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

export type Effect =
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
  readonly token: bigint
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
  readonly tryCompletion?: number | undefined
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
  readonly leaving: boolean
  readonly waiters: ReadonlyArray<number>
}

export interface HeldLease {
  readonly name: string
  readonly token: bigint
}

/** The lease list of the last renewal reply, and the version the backend gave it. */
export interface LeaseView {
  readonly version: string
  readonly leases: ReadonlyArray<HeldLease>
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
  /** Highest token this session released per name (rule 1). */
  readonly released: ReadonlyMap<string, bigint>
  /** What the last renewal reply listed, for replies that say "unchanged" (SPEC section 7). */
  readonly leaseView: LeaseView | undefined
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
  readonly tokens: ReadonlyMap<string, TokenMemory>
  /** Names with a memory but no election, least recently used first. */
  readonly idleNames: ReadonlyMap<string, true>
  readonly elections: ReadonlyMap<number, ElectionState>
  readonly groups: ReadonlyMap<number, GroupState>
  readonly timers: ReadonlyMap<string, number>
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
    released: new Map(),
    leaseView: undefined
  },
  tokens: new Map(),
  idleNames: new Map(),
  elections: new Map(),
  groups: new Map(),
  timers: new Map(),
  nextId: 1,
  rng: seed >>> 0,
  closing: undefined,
  closed: false
})

// ---------------------------------------------------------------------------------------------------
// step
// ---------------------------------------------------------------------------------------------------

type Mutable<T> = { -readonly [K in keyof T]: T[K] }

/** The working copy of one step: the input state is never mutated. */
interface Step {
  readonly now: number
  readonly timing: Session.Timing
  session: Mutable<SessionState>
  released: ReadonlyMap<string, bigint>
  releasedCopied: boolean
  tokens: ReadonlyMap<string, TokenMemory>
  idleNames: ReadonlyMap<string, true>
  /** Copy-on-write of `tokens` and `idleNames`: most steps touch neither. */
  tokensCopied: boolean
  elections: Map<number, Mutable<ElectionState>>
  groups: Map<number, Mutable<GroupState>>
  timers: Map<string, number>
  nextId: number
  rng: number
  closing: Array<number> | undefined
  closed: boolean
  readonly effects: Array<Effect>
}

/** A map of shallow copies of the values (the step mutates its copies, never the input state). */
const copyEntries = <K, V extends object>(source: ReadonlyMap<K, V>): Map<K, Mutable<V>> => {
  const copy = new Map<K, Mutable<V>>()
  for (const [key, value] of source) copy.set(key, { ...value })
  return copy
}

export const step = (state: State, event: Event, now: number): readonly [State, ReadonlyArray<Effect>] => {
  const s: Step = {
    now,
    timing: state.timing,
    session: { ...state.session },
    released: state.session.released,
    releasedCopied: false,
    tokens: state.tokens,
    idleNames: state.idleNames,
    tokensCopied: false,
    elections: copyEntries(state.elections),
    groups: copyEntries(state.groups),
    timers: new Map(state.timers),
    nextId: state.nextId,
    rng: state.rng,
    closing: state.closing === undefined ? undefined : [...state.closing],
    closed: state.closed,
    effects: []
  }
  checkDeadline(s)
  handle(s, event)
  const next: State = {
    timing: state.timing,
    session: { ...s.session, released: s.released },
    tokens: s.tokens,
    idleNames: s.idleNames,
    elections: s.elections,
    groups: s.groups,
    timers: s.timers,
    nextId: s.nextId,
    rng: s.rng,
    closing: s.closing,
    closed: s.closed
  }
  return [next, s.effects]
}

const handle = (s: Step, event: Event): void => {
  if (s.closed) {
    return afterClose(s, event)
  }
  switch (event._tag) {
    case "Boot":
      return openSession(s)
    case "Start":
      return start(s, event)
    case "Stop":
      return stop(s, event.handle, event.completion)
    case "StepDown":
      return stepDown(s, event.handle, event.cooldown, event.completion)
    case "Timer":
      return timer(s, event.key, event.id)
    case "Reply":
      return reply(s, event)
    case "Hint":
      return hint(s, event.hint)
    case "WorkExited":
      return workExited(s, event.handle, event.termId, event.stepDown)
    case "Join":
      return join(s, event)
    case "Leave":
      return leave(s, event.handle, event.completion)
    case "Close":
      return close(s, event.completion)
  }
}

/** After `close` completed only late replies matter: a session or lease won too late is given back. */
const afterClose = (s: Step, event: Event): void => {
  switch (event._tag) {
    case "Start":
    case "Join":
      return complete(s, event.completion, { _tag: "Closed" })
    case "Close":
      // The session is closed but its CloseSession reply is still awaited: complete with the first close.
      if (s.closing !== undefined && s.closing.length > 0) {
        s.closing.push(event.completion)
        return
      }
      return complete(s, event.completion, { _tag: "Ok" })
    case "Stop":
    case "StepDown":
    case "Leave":
      return complete(s, event.completion, { _tag: "Ok" })
    case "Reply": {
      const { request, response } = event
      if (request._tag === "CloseSession") return onClosed(s, request)
      if (request._tag === "OpenSession" && response._tag === "Opened") {
        call(s, { _tag: "CloseSession", sessionId: response.sessionId })
      } else if (request._tag === "Acquire" && response._tag === "Granted") {
        call(s, { _tag: "Release", sessionId: request.sessionId, name: request.name, token: response.token })
      }
      return
    }
    default:
      return
  }
}

// ---------------------------------------------------------------------------------------------------
// Helpers for effects
// ---------------------------------------------------------------------------------------------------

const nextId = (s: Step): number => s.nextId++

/** mulberry32: a tiny seeded generator, so jitter is data and replays are exact. */
const random = (s: Step): number => {
  s.rng = (s.rng + 0x6d2b79f5) >>> 0
  let t = s.rng
  t = Math.imul(t ^ (t >>> 15), t | 1)
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

const call = (s: Step, request: Request): number => {
  const requestId = nextId(s)
  s.effects.push({ _tag: "Call", requestId, sentAt: s.now, timeout: s.session.every, request })
  return requestId
}

const arm = (s: Step, key: string, at: number): void => {
  const id = nextId(s)
  s.timers.set(key, id)
  s.effects.push({ _tag: "Arm", key, id, at: Math.max(at, s.now) })
}

const disarm = (s: Step, key: string): void => {
  if (s.timers.delete(key)) s.effects.push({ _tag: "Disarm", key })
}

const publish = (s: Step, event: SimbaEvent, kind?: ElectionKind): void => {
  s.effects.push(kind === undefined ? { _tag: "Publish", event } : { _tag: "Publish", event, kind })
}

const complete = (s: Step, completion: number, outcome: Outcome): void => {
  s.effects.push({ _tag: "Complete", completion, outcome })
}

const ok: Outcome = { _tag: "Ok" }
const notAcquired: Outcome = { _tag: "NotAcquired" }

const failed = (s: Step, operation: string, error: string): void =>
  publish(s, SimbaEvent.BackendFailed({ operation, error }))

const setStatus = (s: Step, e: Mutable<ElectionState>, status: ElectionStatus): void => {
  if (e.status === status) return
  e.status = status
  publish(s, SimbaEvent.StatusChanged({ name: e.name, status }))
}

const retryKey = (handle: number) => `retry:${handle}`
const cooldownKey = (handle: number) => `cooldown:${handle}`
const handoverKey = (handle: number) => `handover:${handle}`
const joinKey = (handle: number) => `join:${handle}`

// ---------------------------------------------------------------------------------------------------
// Session
// ---------------------------------------------------------------------------------------------------

const sessionUsable = (s: Step): boolean =>
  s.session.id !== undefined && (s.session.status === "LIVE" || s.session.status === "SUSPENDED") &&
  s.now < s.session.deadline

const openSession = (s: Step): void => {
  disarm(s, "renew")
  disarm(s, "deadline")
  disarm(s, "open")
  s.session = {
    ...s.session,
    seq: s.session.seq + 1,
    id: undefined,
    status: "OPENING",
    deadline: Number.NEGATIVE_INFINITY,
    every: s.timing.renewInterval,
    shortenedPublished: false,
    renewing: undefined,
    opening: undefined,
    leaseView: undefined
  }
  s.released = new Map()
  s.releasedCopied = true
  s.session.opening = call(s, { _tag: "OpenSession", ttl: s.timing.leaseDuration })
}

/** Rule: once the local deadline passed without a successful renewal, the session is over for us. */
const checkDeadline = (s: Step): void => {
  if (s.closed || s.session.id === undefined) return
  if (s.session.status !== "LIVE" && s.session.status !== "SUSPENDED") return
  if (s.now >= s.session.deadline) sessionLost(s, "DEADLINE_PASSED")
}

/** Applies a reply's remaining time: the deadline only moves forward; the renewal period may shorten. */
const extendDeadline = (s: Step, sentAt: number, remaining: number): void => {
  const deadline = Session.localDeadline(s.timing, sentAt, remaining)
  if (deadline > s.session.deadline) s.session.deadline = deadline
  const { every, shortened } = Session.renewEvery(s.timing, remaining)
  s.session.every = every
  if (shortened && !s.session.shortenedPublished && s.session.id !== undefined) {
    s.session.shortenedPublished = true
    publish(s, SimbaEvent.SessionLeaseShortened({ sessionId: s.session.id, granted: remaining, renewEvery: every }))
  }
  s.effects.push({ _tag: "Deadline", sessionSeq: s.session.seq, deadline: s.session.deadline })
  arm(s, "deadline", s.session.deadline)
  arm(s, "renew", sentAt + s.session.every)
}

const onOpened = (s: Step, requestId: number, sentAt: number, response: Response): void => {
  if (requestId !== s.session.opening) {
    if (response._tag === "Opened") call(s, { _tag: "CloseSession", sessionId: response.sessionId })
    return
  }
  s.session.opening = undefined
  if (response._tag !== "Opened") {
    failed(s, "openSession", response._tag === "Failed" ? response.error : response._tag)
    return arm(s, "open", s.now + Session.candidateRetry(s.timing, random(s)))
  }
  if (Session.localDeadline(s.timing, sentAt, response.remaining) <= s.now) {
    // The reply came back after its own deadline: the session is useless to us.
    call(s, { _tag: "CloseSession", sessionId: response.sessionId })
    failed(s, "openSession", "reply arrived after the session's local deadline")
    return arm(s, "open", s.now + s.timing.minBackoff)
  }
  s.session.id = response.sessionId
  s.session.status = "LIVE"
  publish(s, SimbaEvent.SessionOpened({ sessionId: response.sessionId }))
  extendDeadline(s, sentAt, response.remaining)
  for (const g of s.groups.values()) {
    if (!g.leaving) joinGroup(s, g)
  }
  for (const e of s.elections.values()) tryAcquire(s, e)
}

const renew = (s: Step): void => {
  if (!sessionUsable(s) || s.session.renewing !== undefined || s.session.id === undefined) return
  s.session.renewing = call(s, {
    _tag: "KeepAlive",
    sessionId: s.session.id,
    ttl: s.timing.leaseDuration,
    known: s.session.leaseView?.version
  })
}

/**
 * The leases a `Live` reply stands for: its own list, or (when it says "unchanged since `known`") the
 * list of the reply that carried that version; `undefined` when the reply names a version this
 * session never read (a backend fault: treated as a failed renewal).
 */
const leasesOf = (
  s: Step,
  request: Extract<Request, { _tag: "KeepAlive" }>,
  response: Extract<Response, { _tag: "Live" }>
): ReadonlyArray<HeldLease> | undefined => {
  if (response.leases !== undefined) return response.leases
  const view = s.session.leaseView
  return view !== undefined && request.known === view.version ? view.leases : undefined
}

const onKeepAlive = (
  s: Step,
  requestId: number,
  sentAt: number,
  request: Extract<Request, { _tag: "KeepAlive" }>,
  response: Response
): void => {
  if (requestId !== s.session.renewing) return
  s.session.renewing = undefined
  if (response._tag === "Expired") return sessionLost(s, "SESSION_EXPIRED")
  const leases = response._tag === "Live" ? leasesOf(s, request, response) : undefined
  if (response._tag !== "Live" || leases === undefined) {
    return renewalFailed(s, response._tag === "Failed" ? response.error : `unexpected reply ${response._tag}`)
  }
  s.session.leaseView = response.version === undefined ? undefined : { version: response.version, leases }
  extendDeadline(s, sentAt, response.remaining)
  const resumed = s.session.status === "SUSPENDED" && s.session.id !== undefined
  if (resumed) {
    s.session.status = "LIVE"
    publish(s, SimbaEvent.SessionLive({ sessionId: s.session.id! }))
  }
  reconcileLeases(s, requestId, leases)
  reconcileGroups(s, response.groups)
  if (resumed) {
    // Joins and acquisitions that came due while SUSPENDED were skipped (and not re-armed): resume them.
    for (const g of s.groups.values()) if (!g.joined && !g.leaving) joinGroup(s, g)
    for (const e of s.elections.values()) if (!s.timers.has(retryKey(e.handle))) tryAcquire(s, e)
  }
}

/** A renewal failed (or answered what it cannot mean): suspend and retry with halving backoff. */
const renewalFailed = (s: Step, error: string): void => {
  failed(s, "keepAlive", error)
  if (s.session.status === "LIVE" && s.session.id !== undefined) {
    s.session.status = "SUSPENDED"
    publish(s, SimbaEvent.SessionSuspended({ sessionId: s.session.id }))
  }
  const backoff = Session.renewalBackoff(s.timing, s.now, s.session.deadline, s.session.every)
  arm(s, "renew", s.now + backoff)
}

/**
 * Rule 3: a term adopted before the renewal was sent but missing from its reply was taken over; a
 * lease the session holds that no election holds or is acquiring is released.
 */
const reconcileLeases = (
  s: Step,
  requestId: number,
  leases: ReadonlyArray<HeldLease>
): void => {
  const held = new Map(leases.map((l) => [l.name, l.token]))
  const sessionId = s.session.id
  const byName = new Map<string, Array<Mutable<ElectionState>>>()
  for (const e of s.elections.values()) {
    const list = byName.get(e.name)
    if (list) list.push(e)
    else byName.set(e.name, [e])
  }
  for (const e of s.elections.values()) {
    const term = e.term
    if (term === undefined || term.sessionSeq !== s.session.seq || term.adoptedSeq > requestId) continue
    // A live session never loses a lease it holds unless the store lost it (reported as rule 7 does;
    // no quiet period: we were the holder, and our term ends right here).
    if (!held.has(e.name)) leaseForgotten(s, e.name, term.token)
    if (held.get(e.name) !== term.token) loseTerm(s, e, "TAKEN_OVER")
  }
  if (sessionId === undefined) return
  for (const [name, token] of held) {
    const claimants = byName.get(name) ?? []
    const wanted = claimants.some((e) => e.attempt !== undefined || e.term?.token === token)
    if (!wanted) unaskedLease(s, claimants.find((e) => e.status === "CANDIDATE"), sessionId, name, token)
  }
  // After the unasked leases were judged against what was seen before this reply (rule 7).
  for (const [name, token] of held) observe(s, name, token, sessionId, requestId)
}

/** A renewal no longer lists a lease of a term of the live session: the store lost it (rule 7). */
const leaseForgotten = (s: Step, name: string, token: bigint): void => {
  const known = s.tokens.get(name)?.token
  publish(s, SimbaEvent.TokenRegressed({ name, seen: known !== undefined && known > token ? known : token, token: undefined }))
}

/** Rule 4: an expired (or, for us, ended) session is never revived: revoke all, open a new one. */
const sessionLost = (s: Step, reason: SessionEndReason & RevokeReason): void => {
  const sessionId = s.session.id
  // Try-locks whose one attempt the lost session abandoned end (after the new session is asked for).
  const triedOut: Array<Mutable<ElectionState>> = []
  for (const e of s.elections.values()) {
    if (e.attempt !== undefined && e.tryCompletion !== undefined) triedOut.push(e)
    if (e.attempt !== undefined) e.attempt = undefined
    if (e.term !== undefined) loseTerm(s, e, reason)
  }
  for (const g of s.groups.values()) {
    g.joined = false
    g.joining = undefined
    g.listing = undefined
  }
  // Losing the terms ended the last handover of a pending close, which has already closed the session.
  if (s.closed) return
  if (sessionId !== undefined) {
    publish(s, SimbaEvent.SessionEnded({ sessionId, reason }))
    // Best effort: if the backend is reachable after all, free our leases now rather than at expiry.
    if (reason === "DEADLINE_PASSED") call(s, { _tag: "CloseSession", sessionId })
  }
  if (s.closing !== undefined) {
    s.session = { ...s.session, id: undefined, status: "CLOSED", deadline: Number.NEGATIVE_INFINITY }
  } else {
    openSession(s)
  }
  for (const e of triedOut) if (s.elections.has(e.handle)) remove(s, e)
  maybeFinishClose(s)
}

// ---------------------------------------------------------------------------------------------------
// Elections
// ---------------------------------------------------------------------------------------------------

const newElection = (
  s: Step,
  fields: Pick<ElectionState, "handle" | "name" | "kind" | "group" | "partition" | "hasWork">
): Mutable<ElectionState> => {
  const e: Mutable<ElectionState> = {
    ...fields,
    status: "CANDIDATE",
    attempt: undefined,
    hinted: false,
    seenToken: undefined,
    queuedAs: undefined,
    term: undefined,
    cooldownUntil: 0,
    afterHandover: "stop",
    waiters: []
  }
  s.elections.set(e.handle, e)
  reviveName(s, e.name)
  return e
}

const start = (s: Step, ev: Extract<Event, { _tag: "Start" }>): void => {
  const refuse = (outcome: Outcome): void => {
    complete(s, ev.completion, outcome)
    if (ev.tryCompletion !== undefined) complete(s, ev.tryCompletion, outcome)
  }
  if (s.closing !== undefined) return refuse({ _tag: "Closed" })
  const same = Array.from(s.elections.values()).filter((e) => e.name === ev.name)
  if (same.length > 0 && !(ev.kind === "lock" && same.every((e) => e.kind === "lock"))) {
    return refuse({ _tag: "AlreadyStarted", name: ev.name })
  }
  // A try-lock never queues: a lock of this client holds or wants the name.
  if (same.length > 0 && ev.tryCompletion !== undefined) {
    complete(s, ev.completion, ok)
    return complete(s, ev.tryCompletion, notAcquired)
  }
  const e = newElection(s, {
    handle: ev.handle,
    name: ev.name,
    kind: ev.kind,
    group: undefined,
    partition: undefined,
    hasWork: ev.hasWork
  })
  e.tryCompletion = ev.tryCompletion
  complete(s, ev.completion, ok)
  if (same.length > 0) {
    // Locks of one name in one client queue FIFO (handles are allocated in call order).
    e.status = "QUEUED"
    return
  }
  publish(s, SimbaEvent.StatusChanged({ name: e.name, status: "CANDIDATE" }))
  tryAcquire(s, e)
}

const tryAcquire = (s: Step, e: Mutable<ElectionState>): void => {
  if (e.status !== "CANDIDATE" || e.attempt !== undefined || !sessionUsable(s) || s.session.id === undefined) return
  if (s.session.status !== "LIVE") return
  // Rule 7: after a regression, no acquire of the name until the quiet period is over.
  const quiet = quietUntil(s, e.name)
  // A try-lock does not wait for it: not acquired.
  if (s.now < quiet) return e.tryCompletion !== undefined ? remove(s, e) : arm(s, retryKey(e.handle), quiet)
  disarm(s, retryKey(e.handle))
  e.hinted = false
  e.attempt = call(s, { _tag: "Acquire", sessionId: s.session.id, name: e.name })
}

const scheduleRetry = (s: Step, e: Mutable<ElectionState>, sentAt: number, holderRemaining?: number): void => {
  let at = s.now + Session.candidateRetry(s.timing, random(s))
  if (holderRemaining !== undefined) {
    at = Math.min(at, Session.afterHolderExpiry(s.timing, sentAt, holderRemaining, random(s)))
  }
  arm(s, retryKey(e.handle), Math.max(at, quietUntil(s, e.name)))
}

const onAcquire = (
  s: Step,
  ev: Extract<Event, { _tag: "Reply" }>,
  request: Extract<Request, { _tag: "Acquire" }>
): void => {
  const response = ev.response
  const e = Array.from(s.elections.values()).find((x) => x.attempt === ev.requestId)
  if (e === undefined) {
    // Rule 1: a reply to an abandoned attempt that won a lease gives it back, unless a term of ours holds
    // that very lease: acquire is idempotent, so an abandoned attempt and the one that replaced it can
    // both be granted the same token, and releasing it would free the current term's lease.
    if (response._tag === "Granted") {
      const { token } = response
      const ours = Array.from(s.elections.values()).some((x) =>
        x.name === request.name && x.term?.sessionId === request.sessionId && x.term.token === token
      )
      if (!ours) giveBack(s, request.sessionId, request.name, token)
    } else if (response._tag === "HeldBy" && request.sessionId === s.session.id && !wanted(s, request.name)) {
      // An abandoned attempt may have queued the session after the election withdrew: withdraw again.
      call(s, { _tag: "Withdraw", sessionId: request.sessionId, name: request.name })
    }
    return
  }
  e.attempt = undefined
  // A try-lock's one attempt: anything but an adopted grant ends it.
  const retry = e.tryCompletion === undefined
  switch (response._tag) {
    case "Granted": {
      const current = request.sessionId === s.session.id && sessionUsable(s)
      observe(s, e.name, response.token, request.sessionId, ev.requestId)
      if (current && aboveReleased(s, e.name, response.token) && s.now >= quietUntil(s, e.name)) {
        return adopt(s, e, response.token)
      }
      giveBack(s, request.sessionId, request.name, response.token)
      return retry ? scheduleRetry(s, e, ev.sentAt) : remove(s, e)
    }
    case "HeldBy":
      if (response.token !== undefined) observe(s, e.name, response.token, undefined, ev.requestId)
      see(e, response.token)
      e.queuedAs = request.sessionId
      // A try-lock ends here; `remove` withdraws the waiter the HeldBy may have queued.
      if (!retry) return remove(s, e)
      if (e.hinted) return tryAcquire(s, e)
      return scheduleRetry(s, e, ev.sentAt, response.remaining)
    case "Expired":
      if (request.sessionId === s.session.id) sessionLost(s, "SESSION_EXPIRED")
      if (!retry && s.elections.has(e.handle)) remove(s, e)
      return
    default:
      failed(s, "acquire", response._tag === "Failed" ? response.error : response._tag)
      return retry ? scheduleRetry(s, e, ev.sentAt) : remove(s, e)
  }
}

const see = (e: Mutable<ElectionState>, token: bigint | undefined): void => {
  if (token !== undefined && (e.seenToken === undefined || token > e.seenToken)) e.seenToken = token
}

const adopt = (s: Step, e: Mutable<ElectionState>, token: bigint): void => {
  const sessionId = s.session.id as string
  const termId = nextId(s)
  observe(s, e.name, token, sessionId)
  see(e, token)
  e.queuedAs = undefined
  e.term = {
    termId,
    token,
    sessionId,
    sessionSeq: s.session.seq,
    adoptedSeq: termId,
    workRunning: e.hasWork,
    revoked: false
  }
  disarm(s, retryKey(e.handle))
  s.effects.push({
    _tag: "Elected",
    handle: e.handle,
    termId,
    name: e.name,
    token,
    sessionId,
    sessionSeq: s.session.seq,
    kind: e.kind,
    group: e.group,
    partition: e.partition,
    hasWork: e.hasWork
  })
  publish(s, SimbaEvent.Elected({ name: e.name, token }), e.kind)
  setStatus(s, e, "LEADER")
  if (e.tryCompletion !== undefined) {
    complete(s, e.tryCompletion, ok)
    e.tryCompletion = undefined
  }
}

/** Rule 2, first half: revoke (exactly once per term). */
const revoke = (s: Step, e: Mutable<ElectionState>, reason: RevokeReason): void => {
  const term = e.term
  if (term === undefined || term.revoked) return
  e.term = { ...term, revoked: true }
  s.effects.push({ _tag: "Revoked", handle: e.handle, termId: term.termId, name: e.name, token: term.token, reason })
  publish(s, SimbaEvent.Revoked({ name: e.name, token: term.token, reason }), e.kind)
}

/** Rule 2, second half: release with the term's token, after revocation. */
const releaseLease = (s: Step, e: Mutable<ElectionState>): void => {
  const term = e.term
  if (term === undefined) return
  e.term = undefined
  giveBack(s, term.sessionId, e.name, term.token)
}

/**
 * Releases a lease and, for the current session, records its token (rule 1): the release may reach
 * the backend after a retried acquire that the backend answers with the same token (acquire is
 * idempotent), and adopting that grant would make a term of a lease the late release then frees.
 */
const giveBack = (s: Step, sessionId: string, name: string, token: bigint): void => {
  observe(s, name, token, sessionId)
  // A renewal reply or a pushed grant may still name this token later: never adopt it then.
  for (const e of s.elections.values()) {
    if (e.name === name) see(e, token)
  }
  if (sessionId === s.session.id && aboveReleased(s, name, token)) writableReleased(s).set(name, token)
  call(s, { _tag: "Release", sessionId, name, token })
}

/** `token` is above the last token of `name` this session released (rule 1), or none was released. */
const aboveReleased = (s: Step, name: string, token: bigint): boolean => {
  const released = s.released.get(name)
  return released === undefined || token > released
}

/** Copy-on-write: most steps never touch the released tokens. */
const writableReleased = (s: Step): Map<string, bigint> => {
  if (s.releasedCopied) return s.released as Map<string, bigint>
  const copy = new Map(s.released)
  s.released = copy
  s.releasedCopied = true
  return copy
}

// ---------------------------------------------------------------------------------------------------
// Rule 7: tokens only rise
// ---------------------------------------------------------------------------------------------------

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
const quietPeriod = (s: Step): number => s.timing.leaseDuration * (1 + s.timing.drift) + s.timing.margin

const writableTokens = (s: Step): { tokens: Map<string, TokenMemory>; idle: Map<string, true> } => {
  if (!s.tokensCopied) {
    s.tokens = new Map(s.tokens)
    s.idleNames = new Map(s.idleNames)
    s.tokensCopied = true
  }
  return { tokens: s.tokens as Map<string, TokenMemory>, idle: s.idleNames as Map<string, true> }
}

const hasElection = (s: Step, name: string): boolean => {
  for (const e of s.elections.values()) if (e.name === name) return true
  return false
}

/**
 * Records a token of `name` the store answered (to `holder`, when that is one of our sessions) and
 * reports a regression: a token below the highest seen, or equal to it but granted to a different
 * holder. Only a reply to a request sent after the highest was recorded (`requestId`) can show one:
 * tokens only rise in a store that keeps its state, so anything such a reply reports is at least what
 * was seen before; an older reply, a hint (its channel is not ordered with replies) or our own
 * give-back only raises the memory. A regression re-bases the memory on the new token (it is reported
 * once) and starts the quiet period of the name (see `quietPeriod`, README "Token regressions").
 */
const observe = (s: Step, name: string, token: bigint, holder: string | undefined, requestId?: number): void => {
  const known = s.tokens.get(name)
  const entry = (quietUntil: number): TokenMemory => ({ token, holder, seq: s.nextId, quietUntil })
  if (known === undefined) {
    // Only names in use get a memory (a late message about a forgotten name does not bring it back).
    if (hasElection(s, name)) writableTokens(s).tokens.set(name, entry(Number.NEGATIVE_INFINITY))
    return
  }
  if (token > known.token) {
    writableTokens(s).tokens.set(name, entry(known.quietUntil))
    return
  }
  if (requestId === undefined || known.seq > requestId) return
  if (token === known.token && (holder === undefined || holder === known.holder)) return
  publish(s, SimbaEvent.TokenRegressed({ name, seen: known.token, token }))
  writableTokens(s).tokens.set(name, entry(s.now + quietPeriod(s)))
}

/** The time before which no term of `name` starts (after a regression), else `-Infinity`. */
const quietUntil = (s: Step, name: string): number => s.tokens.get(name)?.quietUntil ?? Number.NEGATIVE_INFINITY

/** A lease nobody asked for is above every token of the name seen (observed only after this check). */
const aboveSeen = (s: Step, name: string, token: bigint): boolean => {
  const known = s.tokens.get(name)
  return known === undefined || token > known.token
}

/** A name's last election ended: its memory becomes idle, and the least recently used idle ones go. */
const retireName = (s: Step, name: string): void => {
  if (!s.tokens.has(name) || hasElection(s, name)) return
  const { idle, tokens } = writableTokens(s)
  idle.delete(name)
  idle.set(name, true)
  for (const oldest of idle.keys()) {
    if (idle.size <= idleNamesKept) break
    idle.delete(oldest)
    tokens.delete(oldest)
  }
}

/** A name in use again: its memory is no longer idle (so never dropped while in use). */
const reviveName = (s: Step, name: string): void => {
  if (s.idleNames.has(name)) writableTokens(s).idle.delete(name)
}

/**
 * A release the backend confirmed makes its record unnecessary once no acquire of that name is in
 * flight (any later grant carries a higher token), which keeps the records bounded by the releases
 * in flight instead of growing with every name ever used.
 */
const onReleased = (s: Step, request: Extract<Request, { _tag: "Release" }>): void => {
  if (request.sessionId !== s.session.id || s.released.get(request.name) !== request.token) return
  for (const e of s.elections.values()) {
    if (e.name === request.name && e.attempt !== undefined) return
  }
  writableReleased(s).delete(request.name)
}

/**
 * An election stops wanting its name (stopped, timed out, interrupted, closing, cooling down) while a
 * `HeldBy` may have left its session in the backend's waiter queue: tell the backend, so the queue
 * does not keep a waiter that no longer waits. Not while another election of this client still wants
 * the name (a queued lock inherits the session's place), nor when the election holds the lease.
 */
const withdraw = (s: Step, e: Mutable<ElectionState>): void => {
  const sessionId = e.queuedAs
  e.queuedAs = undefined
  // A waiter of an earlier session leaves with it (the backend skips waiters whose session is gone).
  if (sessionId === undefined || sessionId !== s.session.id || e.term !== undefined) return
  if (wanted(s, e.name, e)) return
  call(s, { _tag: "Withdraw", sessionId, name: e.name })
}

/** Whether an election of this client other than `except` still wants (or holds) `name`. */
const wanted = (s: Step, name: string, except?: ElectionState): boolean => {
  for (const e of s.elections.values()) {
    if (e !== except && e.name === name && e.status !== "COOLDOWN") return true
  }
  return false
}

/** Involuntary loss: revoke at once, do not wait for the work, go back to candidacy (locks end). */
const loseTerm = (s: Step, e: Mutable<ElectionState>, reason: RevokeReason): void => {
  revoke(s, e, reason)
  e.term = undefined
  if (e.status === "HANDOVER") return finishHandover(s, e)
  if (e.kind === "lock") return remove(s, e)
  setStatus(s, e, "CANDIDATE")
  if (reason === "TAKEN_OVER") scheduleRetry(s, e, s.now)
}

const stop = (s: Step, handle: number, completion: number): void => {
  const e = s.elections.get(handle)
  if (e === undefined) return complete(s, completion, ok)
  e.waiters = [...e.waiters, completion]
  beginStop(s, e, "stop", "STOPPED")
}

/** Voluntary end of a term (rule 5): with running work, hold the lease until it exits or the deadline. */
const beginStop = (
  s: Step,
  e: Mutable<ElectionState>,
  after: "stop" | "cooldown",
  reason: "STOPPED" | "STEPPED_DOWN"
): void => {
  switch (e.status) {
    case "HANDOVER":
      if (after === "stop") e.afterHandover = "stop"
      return
    case "LEADER": {
      revoke(s, e, reason)
      if (e.term?.workRunning === true && sessionUsable(s)) {
        e.afterHandover = after
        setStatus(s, e, "HANDOVER")
        return arm(s, handoverKey(e.handle), s.session.deadline)
      }
      releaseLease(s, e)
      return after === "stop" ? remove(s, e) : enterCooldown(s, e)
    }
    default:
      return after === "stop" ? remove(s, e) : enterCooldown(s, e)
  }
}

const stepDown = (s: Step, handle: number, cooldown: number, completion: number): void => {
  const e = s.elections.get(handle)
  if (e === undefined) return complete(s, completion, ok)
  e.cooldownUntil = Math.max(e.cooldownUntil, s.now + Math.max(0, cooldown))
  e.waiters = [...e.waiters, completion]
  beginStop(s, e, "cooldown", "STEPPED_DOWN")
}

const enterCooldown = (s: Step, e: Mutable<ElectionState>): void => {
  withdraw(s, e)
  e.attempt = undefined
  e.hinted = false
  disarm(s, retryKey(e.handle))
  setStatus(s, e, "COOLDOWN")
  arm(s, cooldownKey(e.handle), e.cooldownUntil)
  completeWaiters(s, e)
}

const completeWaiters = (s: Step, e: Mutable<ElectionState>): void => {
  for (const completion of e.waiters) complete(s, completion, ok)
  e.waiters = []
}

const finishHandover = (s: Step, e: Mutable<ElectionState>): void => {
  disarm(s, handoverKey(e.handle))
  releaseLease(s, e)
  if (e.afterHandover === "stop") return remove(s, e)
  enterCooldown(s, e)
}

const workExited = (s: Step, handle: number, termId: number, stepDown: number | undefined): void => {
  const e = s.elections.get(handle)
  if (e === undefined || e.term === undefined || e.term.termId !== termId) return
  e.term = { ...e.term, workRunning: false }
  if (e.status === "HANDOVER") return finishHandover(s, e)
  // Failed work ends its own term only: a later term of the same election is not touched.
  if (stepDown !== undefined && e.status === "LEADER") {
    e.cooldownUntil = Math.max(e.cooldownUntil, s.now + Math.max(0, stepDown))
    beginStop(s, e, "cooldown", "STEPPED_DOWN")
  }
}

/** Removes an election for good (its lease, if any, was released before). */
const remove = (s: Step, e: Mutable<ElectionState>): void => {
  revoke(s, e, "STOPPED")
  if (e.term !== undefined) releaseLease(s, e)
  e.attempt = undefined
  disarm(s, retryKey(e.handle))
  disarm(s, cooldownKey(e.handle))
  disarm(s, handoverKey(e.handle))
  s.elections.delete(e.handle)
  withdraw(s, e)
  retireName(s, e.name)
  if (e.status !== "QUEUED") publish(s, SimbaEvent.StatusChanged({ name: e.name, status: "STOPPED" }))
  completeWaiters(s, e)
  if (e.tryCompletion !== undefined) complete(s, e.tryCompletion, s.closing === undefined ? notAcquired : { _tag: "Closed" })
  if (e.kind === "lock" && e.status !== "QUEUED") {
    const next = Array.from(s.elections.values()).find((x) => x.name === e.name && x.status === "QUEUED")
    if (next !== undefined) {
      setStatus(s, next, "CANDIDATE")
      tryAcquire(s, next)
    }
  }
  if (e.group !== undefined) {
    const g = Array.from(s.groups.values()).find((x) => x.group === e.group)
    if (g !== undefined && g.leaving) maybeFinishLeave(s, g)
  }
  maybeFinishClose(s)
}

// ---------------------------------------------------------------------------------------------------
// Timers and hints
// ---------------------------------------------------------------------------------------------------

const timer = (s: Step, key: string, id: number): void => {
  if (s.timers.get(key) !== id) return // replaced or cancelled
  s.timers.delete(key)
  if (key === "renew") return renew(s)
  if (key === "open") return s.session.id === undefined && s.session.opening === undefined ? openSession(s) : undefined
  if (key === "deadline") return // checkDeadline already ran
  const [kind, raw] = key.split(":")
  const handle = Number(raw)
  const e = s.elections.get(handle)
  switch (kind) {
    case "retry":
      return e === undefined ? undefined : tryAcquire(s, e)
    case "cooldown":
      if (e === undefined || e.status !== "COOLDOWN") return
      setStatus(s, e, "CANDIDATE")
      return tryAcquire(s, e)
    case "handover":
      return e === undefined || e.status !== "HANDOVER" ? undefined : finishHandover(s, e)
    case "join": {
      const g = s.groups.get(handle)
      return g === undefined ? undefined : joinGroup(s, g)
    }
  }
}

/**
 * A name we lead was released or handed to someone else: the backend may have lost our session early
 * (failover, eviction). Renew now instead of at the next period, so the term ends promptly.
 */
const renewIfLeading = (s: Step, name: string): void => {
  for (const e of s.elections.values()) {
    if (e.name === name && e.status === "LEADER" && e.term !== undefined && !e.term.revoked) {
      renew(s)
      return
    }
  }
}

const hint = (s: Step, h: HintEvent): void => {
  if (h._tag === "Granted") return pushedGrant(s, h)
  if (h._tag === "Released") {
    renewIfLeading(s, h.name)
    // Reserved for another session (FIFO hand-off): an acquire now would only be told HeldBy.
    if (h.to !== undefined && h.to !== s.session.id) return
    for (const e of s.elections.values()) {
      if (e.name !== h.name || e.status !== "CANDIDATE") continue
      if (e.attempt !== undefined) e.hinted = true
      else tryAcquire(s, e)
    }
    return
  }
  for (const g of s.groups.values()) {
    if (g.group === h.group) listMembers(s, g)
  }
}

/**
 * The backend handed a freed lease to a waiting session. For another session: a name we lead went to
 * someone else, so renew now (as for `Released`). For ours: the candidate of that name retries right
 * after its acquire in flight if it has one (the reply then carries the grant); otherwise see
 * `unaskedLease`.
 */
const pushedGrant = (s: Step, h: Extract<HintEvent, { _tag: "Granted" }>): void => {
  if (h.to !== s.session.id) {
    observe(s, h.name, h.token, h.to)
    return renewIfLeading(s, h.name)
  }
  let candidate: Mutable<ElectionState> | undefined
  for (const e of s.elections.values()) {
    if (e.name !== h.name) continue
    // Already ours (a duplicate, or the reply of an acquire came first).
    if (e.term !== undefined && e.term.sessionId === h.to && e.term.token === h.token) return
    if (e.status === "CANDIDATE") candidate = e
  }
  if (candidate !== undefined && candidate.attempt !== undefined) {
    candidate.hinted = true
    return
  }
  // Adopted or given back: either records the token (rule 7).
  unaskedLease(s, candidate, h.to, h.name, h.token)
}

/**
 * A lease the session holds that no reply granted: handed to it by the backend's FIFO hand-off (a
 * pushed grant, or one whose message was lost and that a renewal lists), or the leftover of an
 * abandoned attempt. The waiting candidate adopts it only if the token is above every token of the
 * name it has seen (a holder's in a `HeldBy`, its own terms': so never a late or duplicate message, or a
 * renewal reply, about an earlier grant) and above any we released, and the session is live. Otherwise
 * it is given back (a no-op on the backend when stale).
 */
const unaskedLease = (
  s: Step,
  candidate: Mutable<ElectionState> | undefined,
  sessionId: string,
  name: string,
  token: bigint
): void => {
  const trusted = candidate !== undefined && candidate.seenToken !== undefined && token > candidate.seenToken &&
    aboveReleased(s, name, token) && aboveSeen(s, name, token) && s.now >= quietUntil(s, name)
  if (candidate !== undefined && trusted && sessionId === s.session.id && sessionUsable(s) && s.session.status === "LIVE") {
    return adopt(s, candidate, token)
  }
  giveBack(s, sessionId, name, token)
}

// ---------------------------------------------------------------------------------------------------
// Replies
// ---------------------------------------------------------------------------------------------------

const reply = (s: Step, ev: Extract<Event, { _tag: "Reply" }>): void => {
  const { request, requestId, response, sentAt } = ev
  switch (request._tag) {
    case "OpenSession":
      return onOpened(s, requestId, sentAt, response)
    case "KeepAlive":
      return onKeepAlive(s, requestId, sentAt, request, response)
    case "Acquire":
      return onAcquire(s, ev, request)
    case "Join":
      return onJoined(s, requestId, request, response)
    case "Members":
      return onMembers(s, requestId, response)
    case "CloseSession":
      return onClosed(s, request)
    case "Release":
      // A failed release is retried by rule 3 at the next renewal.
      if (response._tag === "Failed") return failed(s, "release", response.error)
      return onReleased(s, request)
    case "Leave":
      // A failed leave ends with the session.
      if (response._tag === "Failed") failed(s, "leave", response.error)
      return
    case "Withdraw":
      // A failed withdrawal leaves the session queued: a hand-off may then grant it the lease, which
      // no election wants, so it is given back (see `unaskedLease`) and goes to the next waiter.
      if (response._tag === "Failed") failed(s, "withdraw", response.error)
      return
  }
}

// ---------------------------------------------------------------------------------------------------
// Partition groups
// ---------------------------------------------------------------------------------------------------

const join = (s: Step, ev: Extract<Event, { _tag: "Join" }>): void => {
  if (s.closing !== undefined) return complete(s, ev.completion, { _tag: "Closed" })
  if (Array.from(s.groups.values()).some((g) => g.group === ev.group)) {
    return complete(s, ev.completion, { _tag: "AlreadyStarted", name: ev.group })
  }
  const g: Mutable<GroupState> = {
    handle: ev.handle,
    group: ev.group,
    partitions: ev.partitions,
    joined: false,
    joining: undefined,
    listing: undefined,
    members: [],
    owned: [],
    leaving: false,
    waiters: []
  }
  s.groups.set(g.handle, g)
  complete(s, ev.completion, ok)
  joinGroup(s, g)
}

const joinGroup = (s: Step, g: Mutable<GroupState>): void => {
  if (g.joining !== undefined || g.leaving || s.session.status !== "LIVE" || s.session.id === undefined) return
  disarm(s, joinKey(g.handle))
  g.joining = call(s, { _tag: "Join", sessionId: s.session.id, group: g.group })
}

const listMembers = (s: Step, g: Mutable<GroupState>): void => {
  if (g.listing !== undefined || !g.joined || g.leaving) return
  g.listing = call(s, { _tag: "Members", group: g.group })
}

const onJoined = (s: Step, requestId: number, request: Extract<Request, { _tag: "Join" }>, response: Response): void => {
  const g = Array.from(s.groups.values()).find((x) => x.joining === requestId)
  if (g === undefined) return
  g.joining = undefined
  if (response._tag === "Joined") {
    g.joined = true
    return listMembers(s, g)
  }
  if (response._tag === "Expired") {
    if (request.sessionId === s.session.id) sessionLost(s, "SESSION_EXPIRED")
    return
  }
  failed(s, "join", response._tag === "Failed" ? response.error : response._tag)
  arm(s, joinKey(g.handle), s.now + Session.candidateRetry(s.timing, random(s)))
}

const onMembers = (s: Step, requestId: number, response: Response): void => {
  const g = Array.from(s.groups.values()).find((x) => x.listing === requestId)
  if (g === undefined) return
  g.listing = undefined
  if (response._tag === "MemberList") return applyView(s, g, response.members)
  failed(s, "members", response._tag === "Failed" ? response.error : response._tag)
}

const reconcileGroups = (
  s: Step,
  views: ReadonlyArray<{ readonly group: string; readonly members: ReadonlyArray<string> }>
): void => {
  const byGroup = new Map(views.map((v) => [v.group, v.members]))
  for (const g of s.groups.values()) {
    if (g.leaving || !g.joined) continue
    const members = byGroup.get(g.group)
    if (members === undefined) {
      // The backend no longer lists us as a member: join again.
      g.joined = false
      joinGroup(s, g)
    } else {
      applyView(s, g, members)
    }
  }
}

const sameList = <A>(a: ReadonlyArray<A>, b: ReadonlyArray<A>): boolean =>
  a.length === b.length && a.every((x, i) => x === b[i])

/** A new view of the group: lead the partitions we win, hand over the ones we lose. */
const applyView = (s: Step, g: Mutable<GroupState>, view: ReadonlyArray<string>): void => {
  const me = s.session.id
  if (me === undefined || g.leaving) return
  const members = [...new Set(view.includes(me) ? view : [...view, me])].sort()
  const owned = PartitionAssignment.owned(g.partitions, members, me)
  const membersChanged = !sameList(members, g.members)
  const ownedChanged = !sameList(owned, g.owned)
  g.members = members
  g.owned = owned
  if (membersChanged) publish(s, SimbaEvent.GroupView({ group: g.group, members }))
  if (!membersChanged && !ownedChanged) return
  if (ownedChanged) publish(s, SimbaEvent.PartitionsAssigned({ group: g.group, partitions: owned }))
  s.effects.push({ _tag: "Members", handle: g.handle, group: g.group, members, owned })
  const mine = new Set(owned)
  for (const e of Array.from(s.elections.values())) {
    if (e.group !== g.group || e.partition === undefined) continue
    if (!mine.has(e.partition)) beginStop(s, e, "stop", "STOPPED")
  }
  for (const partition of owned) {
    const existing = Array.from(s.elections.values()).find((e) => e.group === g.group && e.partition === partition)
    if (existing !== undefined) {
      // Regained while handing it over: once the handover ends, compete again instead of stopping.
      if (existing.status === "HANDOVER") existing.afterHandover = "cooldown"
      continue
    }
    const e = newElection(s, {
      // Shell handles are positive; the engine numbers the partition elections it creates negatively.
      handle: -nextId(s),
      name: partitionName(g.group, partition),
      kind: "partition",
      group: g.group,
      partition,
      hasWork: true
    })
    publish(s, SimbaEvent.StatusChanged({ name: e.name, status: "CANDIDATE" }))
    tryAcquire(s, e)
  }
}

const leave = (s: Step, handle: number, completion: number | undefined): void => {
  const g = s.groups.get(handle)
  if (g === undefined) return completion === undefined ? undefined : complete(s, completion, ok)
  if (completion !== undefined) g.waiters = [...g.waiters, completion]
  if (g.leaving) return
  g.leaving = true
  disarm(s, joinKey(g.handle))
  for (const e of Array.from(s.elections.values())) {
    if (e.group === g.group) beginStop(s, e, "stop", "STOPPED")
  }
  maybeFinishLeave(s, g)
}

const maybeFinishLeave = (s: Step, g: Mutable<GroupState>): void => {
  if (Array.from(s.elections.values()).some((e) => e.group === g.group)) return
  if (!s.groups.delete(g.handle)) return
  if (s.session.id !== undefined && s.closing === undefined) {
    call(s, { _tag: "Leave", sessionId: s.session.id, group: g.group })
  }
  if (g.owned.length > 0) {
    publish(s, SimbaEvent.PartitionsAssigned({ group: g.group, partitions: [] }))
  }
  s.effects.push({ _tag: "Members", handle: g.handle, group: g.group, members: [], owned: [] })
  for (const completion of g.waiters) complete(s, completion, ok)
  maybeFinishClose(s)
}

// ---------------------------------------------------------------------------------------------------
// Close
// ---------------------------------------------------------------------------------------------------

const close = (s: Step, completion: number): void => {
  if (s.closing !== undefined) {
    s.closing.push(completion)
    return
  }
  s.closing = [completion]
  for (const g of Array.from(s.groups.values())) leave(s, g.handle, undefined)
  for (const e of Array.from(s.elections.values())) beginStop(s, e, "stop", "STOPPED")
  maybeFinishClose(s)
}

/** Once every work has handed over, close the session (which releases everything at once). */
const maybeFinishClose = (s: Step): void => {
  if (s.closing === undefined || s.closed) return
  if (s.elections.size > 0 || s.groups.size > 0) return
  s.closed = true
  for (const key of Array.from(s.timers.keys())) disarm(s, key)
  const sessionId = s.session.id
  const wasOpen = sessionId !== undefined && s.session.status !== "CLOSED"
  s.session = { ...s.session, status: "CLOSED", deadline: Number.NEGATIVE_INFINITY, renewing: undefined }
  if (wasOpen) {
    call(s, { _tag: "CloseSession", sessionId })
    publish(s, SimbaEvent.SessionEnded({ sessionId, reason: "STOPPED" }))
    return
  }
  finishClose(s)
}

const finishClose = (s: Step): void => {
  for (const completion of s.closing ?? []) complete(s, completion, ok)
  s.closing = []
}

const onClosed = (s: Step, request: Extract<Request, { _tag: "CloseSession" }>): void => {
  if (s.closed && s.closing !== undefined && s.closing.length > 0 && request.sessionId === s.session.id) {
    finishClose(s)
  }
}

// ---------------------------------------------------------------------------------------------------
// Views for snapshots and tests
// ---------------------------------------------------------------------------------------------------

/** The election of `name` that is not queued, if any. */
export const electionByName = (state: State, name: string): ElectionState | undefined =>
  Array.from(state.elections.values()).find((e) => e.name === name && e.status !== "QUEUED")

/**
 * Whether `hint` could change anything in `state`: a `Released` for a name one of its elections leads
 * or waits for (unless reserved for another session), a `Granted` to its session or of a name it
 * leads, a `GroupChanged` for a group it belongs to. The shell drops the others before they reach the
 * loop (every client hears every release in its key space). Dropping on a state read a little
 * earlier is safe: an election that starts after the hint arrived sends its first acquire after the
 * release it reports.
 */
export const wantsHint = (state: State, hint: HintEvent): boolean => {
  if (state.closed) return false
  if (hint._tag === "Granted") {
    // Ours: adopted or given back. Another session's: only a leader of the name cares.
    if (hint.to === state.session.id) return true
    for (const e of state.elections.values()) {
      if (e.name === hint.name && e.status === "LEADER") return true
    }
    return false
  }
  if (hint._tag === "Released") {
    // Reserved for another session: only a leader of the name cares (see `hint`).
    const forOther = hint.to !== undefined && hint.to !== state.session.id
    for (const e of state.elections.values()) {
      if (e.name === hint.name && (e.status === "LEADER" || (e.status === "CANDIDATE" && !forOther))) return true
    }
    return false
  }
  for (const g of state.groups.values()) {
    if (g.group === hint.group) return true
  }
  return false
}

/** Public status of an election (queued locks are candidates from the outside). */
export const publicStatus = (e: ElectionState): ElectionStatus => e.status === "QUEUED" ? "CANDIDATE" : e.status
