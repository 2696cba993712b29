/**
 * A `Term` is one period during which this client owns a lease. Two wins of the same name are two
 * distinct values, so code handed one term can never see a later term's token.
 *
 * Validity is a pure function of the clock and the session's local deadline (no watchdog fiber): a
 * process waking from a long pause reads `false` on its very first check, and an ended term never
 * becomes valid again.
 */
import * as Clock from "effect/Clock"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { DeadlineCell } from "./internal/sessionDeadline.js"

/** Why a term ended. Exactly one per term. */
export type RevokeReason = "STOPPED" | "STEPPED_DOWN" | "DEADLINE_PASSED" | "SESSION_EXPIRED" | "TAKEN_OVER"

export const RevokeReason = {
  STOPPED: "STOPPED",
  STEPPED_DOWN: "STEPPED_DOWN",
  DEADLINE_PASSED: "DEADLINE_PASSED",
  SESSION_EXPIRED: "SESSION_EXPIRED",
  TAKEN_OVER: "TAKEN_OVER"
} as const satisfies Record<RevokeReason, RevokeReason>

/** Involuntary reasons send an election straight back to candidacy and end a lock with `LockLostError`. */
export const isInvoluntary = (reason: RevokeReason): boolean =>
  reason === "DEADLINE_PASSED" || reason === "SESSION_EXPIRED" || reason === "TAKEN_OVER"

/** The term has ended, or will end within the required time. */
export class TermExpiredError extends Data.TaggedError("TermExpiredError")<{
  readonly lease: string
  readonly token: bigint
  readonly remaining: Duration.Duration
  readonly required: Duration.Duration
}> {
  override get message() {
    return `term ${this.lease} (token ${this.token}) has ${Duration.format(this.remaining)} left, ` +
      `needs more than ${Duration.format(this.required)}`
  }
}

export interface Term {
  /** The lease name. */
  readonly name: string
  /** Fencing token: > 0, constant within the term, strictly increasing across the terms of a name. */
  readonly token: bigint
  /** The backend session this term belongs to. */
  readonly sessionId: string
  /** Not revoked and the session's local deadline has not passed. */
  readonly isValid: Effect.Effect<boolean>
  /** Time to the local deadline; zero once the term has ended. */
  readonly remaining: Effect.Effect<Duration.Duration>
  /** Fails with `TermExpiredError` unless the term stays valid for more than `minRemaining` (default 0). */
  readonly ensureValid: (minRemaining?: Duration.DurationInput) => Effect.Effect<void, TermExpiredError>
  /** Completes exactly once, when the term ends, with the reason. */
  readonly revoked: Effect.Effect<RevokeReason>
  /** The reason, once revoked. */
  readonly revokedReason: Effect.Effect<Option.Option<RevokeReason>>
}

/** Milliseconds on the monotonic clock that every lease decision uses. */
export const monotonicMillis: Effect.Effect<number> = Effect.map(
  Clock.currentTimeNanos,
  (nanos) => Number(nanos) / 1_000_000
)

/**
 * A term's end as the shell records it (its own terms carry no `Deferred`: with its fibers' hooks and
 * own hidden class, one cost ~0.75 KB per leader): set once by `revoke`, which resumes the `revoked`
 * waiters. Internal to the client.
 */
export interface Revocation {
  reason: RevokeReason | undefined
  waiters: Array<(reason: RevokeReason) => void> | undefined
}

/** A term not ended yet. */
export const revocation = (): Revocation => ({ reason: undefined, waiters: undefined })

/** Ends the term (the first reason wins) and resumes whoever waits on `revoked`. */
export const revoke = (cell: Revocation, reason: RevokeReason): void => {
  if (cell.reason !== undefined) return
  cell.reason = reason
  const waiters = cell.waiters
  cell.waiters = undefined
  if (waiters !== undefined) for (const resume of waiters) resume(reason)
}

const awaitRevocation = (cell: Revocation): Effect.Effect<RevokeReason> =>
  Effect.async<RevokeReason>((resume) => {
    if (cell.reason !== undefined) return resume(Effect.succeed(cell.reason))
    const waiter = (reason: RevokeReason) => resume(Effect.succeed(reason))
    ;(cell.waiters ??= []).push(waiter)
    return Effect.sync(() => {
      const waiters = cell.waiters
      if (waiters !== undefined) waiters.splice(waiters.indexOf(waiter), 1)
    })
  })

/** Where a term reads its local deadline: the shell's cell of its session, or an Effect (`make`). */
type DeadlineSource = DeadlineCell | Effect.Effect<number>

/** How a term learns its end: the shell's `Revocation`, or a `Deferred` (`make`). */
type RevocationSource = Revocation | Deferred.Deferred<RevokeReason>

const isDeferred = (source: RevocationSource): source is Deferred.Deferred<RevokeReason> =>
  Deferred.DeferredTypeId in source

/** The reason, once ended. */
const reasonOf = (source: RevocationSource): Effect.Effect<RevokeReason | undefined> =>
  isDeferred(source)
    ? Effect.flatMap(Deferred.poll(source), (done) => Option.isSome(done) ? done.value : Effect.succeed(undefined))
    : Effect.sync(() => source.reason)

/**
 * Each member is built when read, from the prototype: a leader holds its term for long and most
 * members are never used, so a term is its fields (an object literal of built Effects and their
 * closures cost ~0.6 KB more per leader). Immutable; the `#` fields stay out of structural equality.
 */
class ClientTerm implements Term {
  readonly #deadline: DeadlineSource
  readonly #revoked: RevocationSource
  constructor(
    readonly name: string,
    readonly token: bigint,
    readonly sessionId: string,
    deadline: DeadlineSource,
    revoked: RevocationSource
  ) {
    this.#deadline = deadline
    this.#revoked = revoked
  }
  get isValid(): Effect.Effect<boolean> {
    return Effect.map(remainingMillis(this.#deadline, this.#revoked), (ms) => ms > 0)
  }
  get remaining(): Effect.Effect<Duration.Duration> {
    return Effect.map(remainingMillis(this.#deadline, this.#revoked), (ms) => Duration.millis(ms))
  }
  // A getter returning an arrow, not a method: callers pass it around unbound
  // (`Effect.flatMap(term.ensureValid)`), and a field would be a closure kept per term.
  get ensureValid(): (minRemaining?: Duration.DurationInput) => Effect.Effect<void, TermExpiredError> {
    return (minRemaining = Duration.zero) =>
      Effect.flatMap(remainingMillis(this.#deadline, this.#revoked), (ms) => {
        const required = Duration.decode(minRemaining)
        return ms > 0 && ms > Duration.toMillis(required)
          ? Effect.void
          : Effect.fail(new TermExpiredError({ lease: this.name, token: this.token, remaining: Duration.millis(ms), required }))
      })
  }
  get revoked(): Effect.Effect<RevokeReason> {
    const source = this.#revoked
    return isDeferred(source) ? Deferred.await(source) : awaitRevocation(source)
  }
  get revokedReason(): Effect.Effect<Option.Option<RevokeReason>> {
    return Effect.map(reasonOf(this.#revoked), Option.fromNullable)
  }
}

/**
 * Builds a term. `deadline` reads the session's current local deadline (monotonic millis); `revoked`
 * is completed exactly once, when the term ends.
 */
export const make = (options: {
  readonly name: string
  readonly token: bigint
  readonly sessionId: string
  readonly deadline: Effect.Effect<number>
  readonly revoked: Deferred.Deferred<RevokeReason>
}): Term => new ClientTerm(options.name, options.token, options.sessionId, options.deadline, options.revoked)

/**
 * A term as the shell builds it: the deadline read from its session's cell, the end from a
 * `Revocation` (see `revoke`). Internal to the client.
 */
export const makeLive = (
  name: string,
  token: bigint,
  sessionId: string,
  deadline: DeadlineCell,
  revoked: Revocation
): Term => new ClientTerm(name, token, sessionId, deadline, revoked)

/** Millis to the local deadline; zero once revoked or past it. */
const remainingMillis = (deadline: DeadlineSource, revoked: RevocationSource): Effect.Effect<number> =>
  // Combinators, not `Effect.gen`: fenced writes check their term on every write (a generator costs
  // more than the rest of the check).
  Effect.flatMap(reasonOf(revoked), (reason) => {
    if (reason !== undefined) return Effect.succeed(0)
    const left = (at: number) => Effect.map(monotonicMillis, (now) => Math.max(0, at - now))
    return Effect.isEffect(deadline) ? Effect.flatMap(deadline, left) : left(deadline.deadline)
  })
