/**
 * Leader-only cron jobs: the work of one term runs the job at each tick of
 * the cron expression while the term lasts. A tick before the election is run at once only if it is
 * at most `skipIfOlderThan` old (as `@effect/cluster`'s `ClusterCron`), and never twice by this
 * client.
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Cron from "effect/Cron"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Ref from "effect/Ref"
import type { CronOptions } from "../Simba.js"
import type * as Term from "../Term.js"

/** The latest tick at or before `now` (the cron module's `prev` skips the current second). */
const latestTick = (cron: Cron.Cron, now: number): number => {
  const date = new Date(now)
  return Cron.match(cron, date) ? now - (now % 1000) : Cron.prev(cron, date).getTime()
}

/** The work for each term; the last tick run is shared by the terms of this client. */
export const work = <E, R>(
  options: CronOptions<E, R>
): Effect.Effect<(term: Term.Term) => Effect.Effect<never, never, R>> =>
  Effect.map(Ref.make(Number.NEGATIVE_INFINITY), (lastRun) => (term: Term.Term) => {
    const skipIfOlderThan = Duration.toMillis(Duration.decode(options.skipIfOlderThan ?? 0))
    const execute = options.execute
    const run = (tick: number) =>
      // Marked before it runs: a run cut short by revocation is not repeated by this client.
      Ref.set(lastRun, tick).pipe(
        Effect.zipRight(Effect.isEffect(execute) ? execute : execute(term)),
        Effect.catchAllCause((cause) =>
          Cause.isInterruptedOnly(cause)
            ? Effect.interrupt
            : Effect.logWarning(`cron job ${options.name} failed; the next tick still runs`, cause)
        ),
        Effect.annotateLogs({ cron: options.name, tick: new Date(tick).toISOString() })
      )
    return Effect.gen(function*() {
      const elected = yield* Clock.currentTimeMillis
      const missed = latestTick(options.cron, elected)
      if (elected - missed <= skipIfOlderThan && missed > (yield* Ref.get(lastRun))) yield* run(missed)
      return yield* Effect.forever(Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const next = Cron.next(options.cron, new Date(now)).getTime()
        yield* Effect.sleep(Duration.millis(next - now))
        yield* run(next)
      }))
    })
  })
