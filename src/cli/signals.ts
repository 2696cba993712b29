/**
 * SIGINT, SIGTERM and SIGHUP as the `simba` command hears them: while it runs they do not end the
 * process, they are handed to the command in charge (forwarded to a child, or taken as a stop).
 */
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as PubSub from "effect/PubSub"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"

export const handled = ["SIGINT", "SIGTERM", "SIGHUP"] as const satisfies ReadonlyArray<NodeJS.Signals>

export interface SignalsService {
  /** Completes with the first signal received. */
  readonly first: Deferred.Deferred<NodeJS.Signals>
  /** Every signal from now on, until the scope closes. */
  readonly subscribe: Effect.Effect<Queue.Dequeue<NodeJS.Signals>, never, Scope.Scope>
}

export class Signals extends Context.Tag("simba/cli/Signals")<Signals, SignalsService>() {}

/** Listens to the process's signals while the layer lives. */
export const layer: Layer.Layer<Signals> = Layer.scoped(
  Signals,
  Effect.gen(function*() {
    const first = yield* Deferred.make<NodeJS.Signals>()
    const pubsub = yield* PubSub.unbounded<NodeJS.Signals>()
    const onSignal = (signal: NodeJS.Signals) => {
      Deferred.unsafeDone(first, Effect.succeed(signal))
      pubsub.unsafeOffer(signal)
    }
    yield* Effect.acquireRelease(
      Effect.sync(() => handled.forEach((signal) => process.on(signal, onSignal))),
      () => Effect.sync(() => handled.forEach((signal) => process.off(signal, onSignal)))
    )
    return { first, subscribe: PubSub.subscribe(pubsub) }
  })
)
