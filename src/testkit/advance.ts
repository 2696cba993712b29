/**
 * `advance`: moves `TestClock` in steps rather than in one jump, because a client's renewal is a
 * chain (timer, backend call, reply, next timer) that must run at each virtual instant it is due.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as TestClock from "effect/TestClock"

/**
 * Lets a few event-loop turns pass, so fibers woken by the clock finish what they were doing (not a
 * lease decision: virtual time does not move here).
 */
const settle: Effect.Effect<void> = Effect.async<void>((resume) => {
  const turn = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(turn))
}).pipe(Effect.repeatN(2))

/**
 * Moves `TestClock` forward by `duration` in steps of `step` (default 250 ms), letting the fibers run
 * between steps and after the last one, so chains of timers and backend calls (renewal, reply, next
 * renewal) happen at the right virtual instants and have finished when it returns. Whole milliseconds.
 */
export const advance = (
  duration: Duration.DurationInput,
  options?: { readonly step?: Duration.DurationInput | undefined }
): Effect.Effect<void> =>
  Effect.gen(function*() {
    const step = Math.max(1, Math.floor(Duration.toMillis(options?.step ?? Duration.millis(250))))
    let left = Math.ceil(Duration.toMillis(duration))
    while (left > 0) {
      const now = Math.min(step, left)
      yield* TestClock.adjust(Duration.millis(now))
      left -= now
    }
    yield* settle
  })
