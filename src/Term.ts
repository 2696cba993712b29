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
 * Builds a term. `deadline` reads the session's current local deadline (monotonic millis); `revoked`
 * is completed by the shell exactly once.
 */
export const make = (options: {
  readonly name: string
  readonly token: bigint
  readonly sessionId: string
  readonly deadline: Effect.Effect<number>
  readonly revoked: Deferred.Deferred<RevokeReason>
}): Term => ({
  // Each member is built when run: a leader holds its term for long, and most members are never used.
  name: options.name,
  token: options.token,
  sessionId: options.sessionId,
  isValid: Effect.suspend(() => Effect.map(remainingMillis(options), (ms) => ms > 0)),
  remaining: Effect.suspend(() => Effect.map(remainingMillis(options), (ms) => Duration.millis(ms))),
  ensureValid: (minRemaining = Duration.zero) =>
    Effect.flatMap(remainingMillis(options), (ms) => {
      const required = Duration.decode(minRemaining)
      return ms > 0 && ms > Duration.toMillis(required)
        ? Effect.void
        : Effect.fail(
          new TermExpiredError({ lease: options.name, token: options.token, remaining: Duration.millis(ms), required })
        )
    }),
  revoked: Effect.suspend(() => Deferred.await(options.revoked)),
  revokedReason: Effect.suspend(() =>
    Effect.flatMap(
      Deferred.poll(options.revoked),
      Option.match({ onNone: () => Effect.succeedNone, onSome: Effect.asSome })
    )
  )
})

/** Millis to the local deadline; zero once revoked or past it. */
const remainingMillis = (options: {
  readonly deadline: Effect.Effect<number>
  readonly revoked: Deferred.Deferred<RevokeReason>
}): Effect.Effect<number> =>
  Effect.gen(function*() {
    if (yield* Deferred.isDone(options.revoked)) return 0
    const deadline = yield* options.deadline
    const now = yield* monotonicMillis
    return Math.max(0, deadline - now)
  })
