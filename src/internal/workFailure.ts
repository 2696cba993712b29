/**
 * What a leader's failing work does: by default the term ends (the shell reports
 * `WorkExited { stepDown }`, the engine releases and cools down for the backoff), so another node can
 * take over; `{ restart: schedule }` restarts the work on this leader first, and steps down once the
 * schedule is exhausted.
 */
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as ScheduleDecision from "effect/ScheduleDecision"
import type { WorkFailureOptions } from "../Simba.js"

/** The defaults of `WorkFailureOptions.backoff`. */
export const defaultBackoff = {
  initial: Duration.seconds(1),
  max: Duration.seconds(30),
  resetAfter: Duration.minutes(1)
} as const

/** The step-down backoffs of one handle, per key (a partition, or `-1` for an election). */
export interface Backoff {
  /** The cooldown (millis) after a failure of a term that ran `ranFor` millis; counts the failure. */
  readonly failed: (key: number, ranFor: number) => number
}

export const backoff = (options: WorkFailureOptions | undefined): Backoff => {
  const initial = Duration.toMillis(Duration.decode(options?.backoff?.initial ?? defaultBackoff.initial))
  const max = Math.max(initial, Duration.toMillis(Duration.decode(options?.backoff?.max ?? defaultBackoff.max)))
  const resetAfter = Duration.toMillis(Duration.decode(options?.backoff?.resetAfter ?? defaultBackoff.resetAfter))
  // Consecutive failures per key; a term that ran `resetAfter` before failing starts the count afresh.
  const failures = new Map<number, number>()
  return {
    failed: (key, ranFor) => {
      const before = ranFor >= resetAfter ? 0 : failures.get(key) ?? 0
      failures.set(key, before + 1)
      return Math.min(max, initial * 2 ** Math.min(before, 52))
    }
  }
}

/**
 * The work as the term runs it: with `{ restart }`, a failure or defect (not an interruption) runs
 * it again on the schedule (its input is the `Cause`); once the schedule is done the last failure
 * stands, and the term steps down.
 */
export const withRestart = (
  name: string,
  options: WorkFailureOptions | undefined,
  work: Effect.Effect<unknown, unknown>
): Effect.Effect<unknown, unknown> => {
  const onFailure = options?.onFailure
  if (onFailure === undefined || onFailure === "stepDown") return work
  // Logged on the schedule's decision, so once per restart: a failure the schedule does not restart
  // (it is exhausted) is not announced as restarting. The `while` below steps the schedule before
  // checking the cause, hence the same check here.
  const onCause: Schedule.Schedule<unknown, Cause.Cause<unknown>> = onFailure.restart
  const restart = Schedule.passthrough(onCause).pipe(
    Schedule.onDecision((cause, decision) =>
      ScheduleDecision.isContinue(decision) && !Cause.isInterruptedOnly(cause)
        ? Effect.logWarning(`leader work for ${name} failed; restarting it on this leader`, cause)
        : Effect.void
    )
  )
  return work.pipe(
    Effect.sandbox,
    Effect.retry({ schedule: restart, while: (cause) => !Cause.isInterruptedOnly(cause) }),
    Effect.unsandbox
  )
}
