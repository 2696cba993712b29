/**
 * The loop fiber: takes an event, runs `Engine.step` with `now` from the clock, and performs the
 * effects in order. Only this fiber sets the engine state.
 */
import * as Effect from "effect/Effect"
import * as PubSub from "effect/PubSub"
import * as Queue from "effect/Queue"
import * as Ref from "effect/Ref"
import * as Stream from "effect/Stream"
import * as Engine from "../Engine.js"
import * as Term from "../Term.js"
import * as BackendCalls from "./backendCalls.js"
import * as Completions from "./completions.js"
import * as Logs from "./logs.js"
import * as SessionDeadline from "./sessionDeadline.js"
import { offer, type Shell } from "./shell.js"
import * as Terms from "./terms.js"
import * as Timers from "./timers.js"

const perform = (shell: Shell, effect: Engine.Effect, now: number): Effect.Effect<void> => {
  switch (effect._tag) {
    case "Call":
      return BackendCalls.perform(shell, effect, now)
    case "Arm":
      return Timers.arm(shell, effect.key, effect.id, effect.at, now)
    case "Disarm":
      return Timers.cancel(shell, effect.key)
    case "Deadline":
      return Effect.sync(() => SessionDeadline.set(shell.deadline, effect.sessionSeq, effect.deadline))
    case "Elected":
      return Terms.onElected(shell, effect)
    case "Revoked":
      return Terms.onRevoked(shell, effect)
    case "Complete":
      return Completions.complete(shell, effect.completion, effect.outcome)
    case "Publish":
      // Every lifecycle log line comes from here (README "Logs").
      return Effect.zipRight(Logs.log(shell, effect.event, effect.kind), PubSub.publish(shell.pubsub, effect.event))
    case "Members":
      // The group view lives in the engine state, where `snapshot` reads it.
      return Effect.void
  }
}

/** The loop, forever. */
export const run = (shell: Shell): Effect.Effect<never> =>
  Effect.gen(function*() {
    const event = yield* Queue.take(shell.events)
    // From the new state to its last published event, `observe` waits (see observe.ts).
    yield* shell.publishing.withPermits(1)(Effect.gen(function*() {
      const now = yield* Term.monotonicMillis
      const [next, effects] = Engine.step(yield* Ref.get(shell.state), event, now)
      yield* Ref.set(shell.state, next)
      for (const effect of effects) yield* perform(shell, effect, now)
    }))
  }).pipe(Effect.forever)

/** Queues the backend's hints the engine has a use for, forever. */
export const forwardHints = (shell: Shell): Effect.Effect<void> =>
  shell.backend.hints.pipe(
    Stream.runForEach((hint) =>
      Effect.flatMap(
        Ref.get(shell.state),
        (current) => Engine.wantsHint(current, hint) ? offer(shell, { _tag: "Hint", hint }) : Effect.void
      )
    )
  )
