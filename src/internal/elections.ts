/** Elections: the `election` handle, `runWhileLeader` and leader-only `schedule`. */
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as Engine from "../Engine.js"
import type { Election, ElectionError, ElectionOptions, ScheduleOptions, WorkFailureOptions } from "../Simba.js"
import type * as Term from "../Term.js"
import { request } from "./completions.js"
import * as Handles from "./handles.js"
import type { Shell } from "./shell.js"
import * as WorkFailure from "./workFailure.js"

export const election = (
  shell: Shell,
  name: string,
  options?: ElectionOptions
): Effect.Effect<Election, ElectionError, Scope.Scope> =>
  Effect.gen(function*() {
    const current = yield* SubscriptionRef.make(Option.none<Term.Term>())
    const work = options?.work
    const backoff = WorkFailure.backoff(options)
    const { handle, stop } = yield* Handles.start(shell, name, "election", work !== undefined, {
      onElected: (term) =>
        Effect.as(
          SubscriptionRef.set(current, Option.some(term)),
          Option.map(Option.fromNullable(work?.(term)), (run) => WorkFailure.withRestart(name, options, run))
        ),
      onRevoked: () => SubscriptionRef.set(current, Option.none()),
      onWorkFailed: (_partition, ranFor) => backoff.failed(-1, ranFor)
    })
    const terms = current.changes.pipe(Stream.filterMap((term) => term), Stream.changes)
    return {
      name,
      status: Effect.sync(() => {
        const e = shell.state.elections.get(handle)
        return e === undefined ? "STOPPED" : Engine.publicStatus(e)
      }),
      term: SubscriptionRef.get(current),
      terms,
      awaitLeader: terms.pipe(Stream.runHead, Effect.flatMap(Option.match({ onNone: () => Effect.never, onSome: Effect.succeed }))),
      stepDown: (cooldown) =>
        Effect.asVoid(
          request(shell, (completion) => ({
            _tag: "StepDown",
            handle,
            cooldown: Duration.toMillis(Duration.decode(cooldown)),
            completion
          }))
        ),
      stop
    }
  })

export const runWhileLeader = <E, R>(
  shell: Shell,
  name: string,
  work: (term: Term.Term) => Effect.Effect<unknown, E, R>,
  options?: WorkFailureOptions
): Effect.Effect<never, ElectionError, R> =>
  Effect.flatMap(Effect.context<R>(), (context) =>
    Effect.scoped(
      Effect.zipRight(
        election(shell, name, { ...options, work: (term) => Effect.provide(work(term), context) }),
        Effect.never
      )
    ))

export const schedule = <Out, E, R, R2>(
  shell: Shell,
  name: string,
  schedule: Schedule.Schedule<Out, unknown, R2>,
  task: (term: Term.Term) => Effect.Effect<unknown, E, R>,
  options?: ScheduleOptions
): Effect.Effect<never, ElectionError, R | R2> =>
  runWhileLeader(shell, name, (term) => {
    const run = task(term).pipe(
      Effect.catchAllCause((cause) =>
        Cause.isInterruptedOnly(cause)
          ? Effect.failCause(cause)
          : Effect.logWarning(`scheduled task ${name} failed; the next run still happens`, cause)
      )
    )
    // `Effect.schedule` waits for the first recurrence; `Effect.repeat` runs once first.
    return options?.immediate === true ? Effect.repeat(run, schedule) : Effect.schedule(run, schedule)
  })
